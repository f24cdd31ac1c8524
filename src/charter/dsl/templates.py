"""Templates (docs/dsl.md): JSON values whose strings may hold `{{ expr }}`.

A string that is exactly one `{{ expr }}` (spaces inside the braces optional) renders
as the expression's JSON value; placeholders inside longer text are interpolated:
strings as they are, null as nothing, anything else as compact JSON (keys in their
order, no spaces). Arrays and objects are templates item by item (values only, never
keys). A string without `{{` is a constant; there is no escape for a literal `{{`.
A `}}` inside a quoted literal (`{{ 'a}}b' }}`) does not close the placeholder.

Everything is parsed once, by compile_template; rendering never raises for a Scope of
JSON values. Arrays and objects of the template are fresh on every render; values read
from the Scope are not copied.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from charter.core.errors.workflows import ExpressionError, ExpressionLimitError, TemplateError
from charter.core.jsontypes import JsonValue
from charter.dsl.erased import earliest
from charter.dsl.expressions import Expression, Scope, parse_expression

MAX_TEMPLATE_DEPTH = 64

Renderer = Callable[[Scope], JsonValue]
Problems = list[tuple[str, str]]


class Template:
    """A compiled template; equal to another compiled from the same JSON value."""

    __slots__ = ("_key", "_references", "_render")

    def __init__(self, render: Renderer, references: frozenset[str], key: str) -> None:
        self._render = render
        self._references = references
        self._key = key

    def render(self, scope: Scope) -> JsonValue:
        """The value with every placeholder filled in from `scope`."""
        return self._render(scope)

    def references(self) -> frozenset[str]:
        """The dotted paths the placeholders read (see Expression.references)."""
        return self._references

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Template({self._key})"


def compile_template(value: JsonValue) -> Template:
    """Compile `value`; TemplateError lists every bad placeholder with its JSON pointer."""
    problems: Problems = []
    references: set[str] = set()
    render = _compile(value, "", 0, problems, references)
    if problems:
        raise TemplateError(problems)
    key = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return Template(render, frozenset(references), key)


def template_problems(value: JsonValue) -> list[tuple[str, str]]:
    """The (pointer, message) pairs compile_template would raise; [] if it is valid."""
    problems: Problems = []
    _compile(value, "", 0, problems, set())
    return problems


def _compile(
    value: JsonValue, pointer: str, depth: int, problems: Problems, references: set[str]
) -> Renderer:
    if depth > MAX_TEMPLATE_DEPTH:
        problems.append((pointer, f"nested deeper than {MAX_TEMPLATE_DEPTH} levels"))
        return _constant(None)
    if isinstance(value, str):
        return _string(value, pointer, problems, references)
    if isinstance(value, list):
        items = [
            _compile(item, f"{pointer}/{index}", depth + 1, problems, references)
            for index, item in enumerate(value)
        ]
        return lambda scope: [item(scope) for item in items]
    if isinstance(value, dict):
        fields = [
            (key, _compile(item, f"{pointer}/{_escape(key)}", depth + 1, problems, references))
            for key, item in value.items()
        ]
        return lambda scope: {key: item(scope) for key, item in fields}
    return _constant(value)


def _constant(value: JsonValue) -> Renderer:
    return lambda _scope: value


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _string(text: str, pointer: str, problems: Problems, references: set[str]) -> Renderer:
    if "{{" not in text:
        return _constant(text)
    parts = _split(text, pointer, problems)
    expressions = [part for part in parts if isinstance(part, Expression)]
    for expression in expressions:
        references.update(expression.references())
    if len(parts) == 3 and parts[0] == parts[2] == "" and expressions:
        return expressions[0].evaluate
    pieces = tuple(part for part in parts if part != "")

    def interpolate(scope: Scope) -> JsonValue:
        if scope.unknowns is not None:
            # Text built from an erased value is erased as a whole.
            values = [
                piece if isinstance(piece, str) else piece.evaluate(scope) for piece in pieces
            ]
            unknown = earliest(*values)
            if unknown is not None:
                return unknown  # type: ignore[return-value]
        return "".join(
            piece if isinstance(piece, str) else _as_text(piece.evaluate(scope)) for piece in pieces
        )

    return interpolate


def _split(text: str, pointer: str, problems: Problems) -> list[str | Expression]:
    """Text and parsed placeholders, alternating, starting and ending with text."""
    parts: list[str | Expression] = []
    position = 0
    while (start := text.find("{{", position)) >= 0:
        parts.append(text[position:start])
        end = _closing(text, start + 2)
        if end < 0:
            problems.append((pointer, f"'{{{{' at character {start + 1} is never closed"))
            return parts
        inner = text[start + 2 : end]
        try:
            parts.append(parse_expression(inner))
        except (ExpressionError, ExpressionLimitError) as err:
            where = f"{{{{ }}}} at character {start + 1}"
            detail = "empty placeholder" if not inner.strip() else err.message
            problems.append((pointer, f"{where}: {detail}"))
            parts.append("")
        position = end + 2
    parts.append(text[position:])
    return parts


def _closing(text: str, position: int) -> int:
    """Where the `}}` closing a placeholder starts, skipping quoted text; -1 if none."""
    quoted = False
    for index in range(position, len(text) - 1):
        char = text[index]
        if char == "'":
            quoted = not quoted
        elif not quoted and char == "}" and text[index + 1] == "}":
            return index
    return -1


def _as_text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return _compact_json(value)


class _Raw(str):
    """Punctuation already in JSON form, queued between values by _compact_json."""

    __slots__ = ()


def _compact_json(value: JsonValue) -> str:
    """Compact JSON, built with an explicit stack so deep values cannot exhaust recursion."""
    out: list[str] = []
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if type(item) is _Raw:
            out.append(item)
        elif isinstance(item, list):
            queued: list[object] = [_Raw("[")]
            for index, element in enumerate(item):
                queued.extend([_Raw(",")] if index else [])
                queued.append(element)
            queued.append(_Raw("]"))
            pending.extend(reversed(queued))
        elif isinstance(item, dict):
            queued = [_Raw("{")]
            for index, (key, element) in enumerate(item.items()):
                queued.extend([_Raw(",")] if index else [])
                queued.extend([_Raw(_scalar(key) + ":"), element])
            queued.append(_Raw("}"))
            pending.extend(reversed(queued))
        else:
            out.append(_scalar(item))
    return "".join(out)


def _scalar(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        # Not JSON at all, or an integer too long for str(): nothing sensible to show.
        return "null"
