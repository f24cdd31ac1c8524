"""Conditions and template expressions (docs/dsl.md): parsed once, evaluated purely.

The language in full (docs/dsl.md#conditions is the summary for workflow authors):

- Literals: `'text'` (`''` is a quote), numbers (`12`, `1.5`, `2e3`; integers within
  ±(2^53 - 1), floats finite; `-` directly before a number makes it negative; there is
  no general unary minus: write `0 - x`), `true`, `false`, `null`.
- Paths: identifiers `[A-Za-z_][A-Za-z0-9_]*` joined by dots. A bare path reads the
  process document; `input`, `actor`, `event`, `process` read those parts of the Scope
  (alone, the whole part); `now` is the current time and has no fields. Keywords (AND
  OR NOT IN IS NULL TRUE FALSE, any case) cannot start a path but may follow a dot.
  Function names are case-insensitive; paths are case-sensitive.
- Precedence, loosest first: OR, AND, NOT, then one comparison / IN / IS (they do not
  chain), then `+ -` (left to right). `<>` means `!=`.
- Null: a missing field (or a field of a non-object) is null. Every comparison with a
  null side is false, for `!=` too; IN and NOT IN with a null needle are false; use
  IS [NOT] NULL. `x NOT IN (...)` is `x IS NOT NULL AND NOT x IN (...)`; `x [NOT] IN
  path` is false unless the path holds an array.
- Logic is two-valued: a value counts as true only if it is exactly `true`, so
  `NOT null` and `NOT 5` are true, `AND`/`OR` always give a bool.
- Comparing different kinds is false for every operator (`1 != 'a'` is false too),
  with two readings: against a time value, an RFC 3339 string is read as a time; a
  duration compares with a number as its seconds. `=` is JSON equality (1 = 1.0,
  1 != true, arrays and objects deep). Ordering applies to numbers, strings (code
  point order), times and durations; to anything else it is false.
- Arithmetic: number ± number; time ± duration → time; duration + time → time;
  duration ± duration → duration; time - time → duration. An RFC 3339 string in
  arithmetic is a time. Anything else, or a result outside I-JSON (integers beyond
  ±(2^53 - 1), non-finite floats) or outside years 1..9999, is null.
- Functions: `len(x)` counts code points, array items or object keys (else null);
  `exists(path)` is true if the last field is present, even as null (a reserved root
  or `now` always exists); `duration('48h')` (checked at parse time).
- Results: evaluate() gives JSON, times as RFC 3339 (`format_rfc3339`), durations as
  seconds. Values read from the Scope are returned as they are, not copied.
- Limits, checked at parse time: MAX_SOURCE_CHARS characters, MAX_DEPTH nesting (tree
  depth and parentheses), MAX_NODES tree nodes: ExpressionLimitError.
"""

from __future__ import annotations

from charter.core.errors.workflows import ExpressionError
from charter.core.jsontypes import JsonValue
from charter.dsl import erased
from charter.dsl.evaluate import Evaluator, compile_node
from charter.dsl.operations import to_json
from charter.dsl.parsing import parse_tree
from charter.dsl.printer import to_text
from charter.dsl.scope import Scope
from charter.dsl.syntax import (
    RESERVED_ROOTS,
    And,
    Bool,
    Compare,
    In,
    InPath,
    IsNull,
    Node,
    Not,
    Or,
    Path,
    walk,
)

__all__ = ["RESERVED_ROOTS", "Expression", "Scope", "parse_condition", "parse_expression"]


class Expression:
    """A parsed expression: immutable, compared and hashed by its syntax tree."""

    __slots__ = ("_evaluate", "source", "tree")

    source: str
    tree: Node
    _evaluate: Evaluator

    def __init__(self, tree: Node, source: str) -> None:
        object.__setattr__(self, "tree", tree)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "_evaluate", compile_node(tree))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Expression is immutable")

    def evaluate(self, scope: Scope) -> JsonValue:
        """The JSON value of the expression in `scope`; never raises for JSON scopes.
        While replaying over erased values, an unknown value is an `Erased` marker."""
        if scope.unknowns is None:
            return to_json(self._evaluate(scope))
        value = erased.evaluate(self.tree, scope)
        return value if type(value) is erased.Erased else to_json(value)  # type: ignore[return-value]

    def holds(self, scope: Scope) -> bool:
        """True iff the value is exactly `true` (how `when` reads a condition). While
        replaying over erased values, an unknown condition holds (the event was accepted
        on the real values) and is noted in `scope.unknowns`."""
        if scope.unknowns is None:
            return self._evaluate(scope) is True
        value = erased.evaluate(self.tree, scope)
        if type(value) is erased.Erased:
            scope.unknowns.append(self.source)
            return True
        return value is True

    def references(self) -> frozenset[str]:
        """The dotted paths the expression reads, e.g. {"state", "input.amount", "now"}."""
        return frozenset(node.dotted for node in walk(self.tree) if isinstance(node, Path))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and self.tree == other.tree

    def __hash__(self) -> int:
        return hash(self.tree)

    def __str__(self) -> str:
        return to_text(self.tree)

    def __repr__(self) -> str:
        return f"Expression({to_text(self.tree)!r})"


def parse_expression(text: str) -> Expression:
    """Parse any expression (templates use this)."""
    return Expression(parse_tree(text), text)


def parse_condition(text: str) -> Expression:
    """Parse a `when` condition: the same language, but the result must be able to be a bool.

    A literal, a sum, a function result or `now` can never be exactly true, so such a
    condition would silently refuse every event; it is an error instead.
    """
    expression = parse_expression(text)
    tree = expression.tree
    if not isinstance(tree, _MAYBE_BOOL) or tree == _NOW:
        stripped = text.lstrip()
        skipped = text[: len(text) - len(stripped)]
        line = skipped.count("\n") + 1
        column = len(skipped) - (skipped.rfind("\n") + 1) + 1
        raise ExpressionError(
            "a condition must be true or false, e.g. state = 'ready'", line=line, column=column
        )
    return expression


_MAYBE_BOOL = (Bool, Path, Compare, In, InPath, IsNull, Not, And, Or)
_NOW = Path(("now",))
