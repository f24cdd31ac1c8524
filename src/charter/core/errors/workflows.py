"""Errors of the workflow language."""

from __future__ import annotations

from charter.core.errors import CharterError


class DslError(CharterError):
    """The workflow language rejected its input."""

    code = "dsl"
    http_status = 422


class ExpressionError(DslError):
    """The expression is not valid."""

    code = "invalid_expression"

    def __init__(self, message: str, *, line: int = 1, column: int = 1) -> None:
        super().__init__(f"{message} (line {line}, column {column})", line=line, column=column)
        self.line = line
        self.column = column


class ExpressionLimitError(DslError):
    """The expression is too large or too deeply nested."""

    code = "expression_limit"


class DurationError(DslError):
    """Not a duration: expected <number><unit> with a unit of s m h d w y."""

    code = "invalid_duration"


class TemplateError(DslError):
    """The value holds templates that are not valid."""

    code = "invalid_template"

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        lines = "; ".join(f"{pointer or '/'}: {message}" for pointer, message in problems)
        super().__init__(
            f"invalid template: {lines}",
            problems=[{"pointer": pointer, "message": message} for pointer, message in problems],
        )
        self.problems = problems


class StrandsProcesses(CharterError):
    """Deploying this definition would strand processes or orphan their work."""

    code = "strands_processes"
    http_status = 409
