"""Values that are gone: personal inputs erased by `charter:erase`, or withheld from an
export, and what replay derives from them (docs/dsl.md, "Personal data").

Replay cannot know an erased value, yet it must decide every event again and derive the
same data the engine stored. It puts an `Erased` marker where the value was; whatever is
derived from one is erased too, and is stored as `{"erased": true}`. A marker is a Python
object that no JSON value equals, so an input that merely looks like `{"erased": true}`
is never taken for an erasure: which values are erased comes from the erase events.

Conditions become three-valued while replaying: a comparison that reads a marker is
unknown, AND with a false part is false, OR with a true part is true, and the rest of
what touches an unknown is unknown. `evaluate` here is that reading of the syntax tree;
the compiled two-valued evaluator of live decisions is not touched by any of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.durations import parse_duration
from charter.dsl.operations import Kind, arith, compare, kind
from charter.dsl.scope import Scope
from charter.dsl.syntax import (
    And,
    Arith,
    Bool,
    Call,
    Compare,
    In,
    InPath,
    IsNull,
    Node,
    Not,
    Null,
    Number,
    Or,
    Path,
    String,
)

WITHHELD = sys.maxsize
"""The `by` of a value left out of an export: no erase event ever settles it."""
ERASED_JSON: JsonObject = {"erased": True}
WITHHELD_JSON: JsonObject = {"withheld": True}


@dataclass(frozen=True, slots=True)
class Erased:
    """A value replay cannot know. `by` is the seq of the `charter:erase` event that
    erased it (for a derived value, the earliest of its sources'), or WITHHELD."""

    by: int

    def json(self) -> JsonObject:
        """How the value is stored and shown: `{"erased": true}` (or `{"withheld": true}`)."""
        return dict(WITHHELD_JSON if self.by == WITHHELD else ERASED_JSON)


def is_erased(value: object) -> bool:
    """Whether `value` is a marker. Markers stand in JSON containers during replay, where
    the types say JSON: this test keeps the type checker from ruling them out."""
    return type(value) is Erased


def as_value(marker: Erased) -> JsonValue:
    """A marker where a JSON value is expected (replay only)."""
    return cast(JsonValue, marker)


def earliest(*values: object) -> Erased | None:
    """The marker with the smallest `by` among `values`, or None if none is a marker."""
    found = [value for value in values if type(value) is Erased]
    return min(found, key=lambda value: value.by) if found else None


def settle(value: JsonValue, through: int = WITHHELD) -> JsonValue:
    """`value` with every marker whose `by` is at most `through` in its JSON form: what
    the engine stored once the erase event at seq `through` was committed."""
    marker: object = value
    if isinstance(marker, Erased):
        return marker.json() if marker.by <= through else value
    if isinstance(value, dict):
        return {key: settle(item, through) for key, item in value.items()}
    if isinstance(value, list):
        return [settle(item, through) for item in value]
    return value


def marker_pointers(value: JsonValue, at: str = "") -> list[str]:
    """The JSON pointers of the markers in `value`."""
    if is_erased(value):
        return [at]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)  # type: ignore[assignment]
    else:
        return []
    found: list[str] = []
    for key, item in items:
        found.extend(
            marker_pointers(item, f"{at}/{str(key).replace('~', '~0').replace('/', '~1')}")
        )
    return found


# --- three-valued evaluation ---------------------------------------------------------


def evaluate(node: Node, scope: Scope) -> object:
    """The value of `node` in `scope`, where an unknown result is an `Erased` marker."""
    return _EVALUATORS[type(node)](node, scope)


def _constant(node: Any, _scope: Scope) -> object:
    return None if isinstance(node, Null) else node.value


_ROOTS = ("input", "actor", "event", "process")


def _walk(start: object, keys: tuple[str, ...]) -> object:
    value = start
    for key in keys:
        if type(value) is Erased:
            return value  # a field of an erased value is erased
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _start(path: Path, scope: Scope) -> tuple[object, tuple[str, ...]]:
    head = path.segments[0]
    if head in _ROOTS:
        return getattr(scope, head), path.segments[1:]
    return scope.document, path.segments


def _path(node: Path, scope: Scope) -> object:
    if node.segments == ("now",):
        return scope.now
    start, keys = _start(node, scope)
    return _walk(start, keys)


def _call(node: Call, scope: Scope) -> object:
    (arg,) = node.args
    if node.name == "exists":
        assert isinstance(arg, Path)
        start, keys = _start(arg, scope)
        if arg.segments == ("now",) or not keys:
            return True
        parent = _walk(start, keys[:-1])
        if type(parent) is Erased:
            return parent
        return isinstance(parent, Mapping) and keys[-1] in parent
    if node.name == "duration":
        assert isinstance(arg, String)
        return parse_duration(arg.value)
    value = evaluate(arg, scope)
    if type(value) is Erased:
        return value
    return len(value) if isinstance(value, str | list | Mapping) else None


def _arith(node: Arith, scope: Scope) -> object:
    left, right = evaluate(node.left, scope), evaluate(node.right, scope)
    return earliest(left, right) or arith(node.op, left, right)


def _compare(node: Compare, scope: Scope) -> object:
    left, right = evaluate(node.left, scope), evaluate(node.right, scope)
    return earliest(left, right) or compare(node.op, left, right)


def _member(needle: object, items: list[object], negated: bool) -> object:
    """IN over known and unknown items: a known match decides; else an unknown item leaves
    the answer unknown."""
    if type(needle) is Erased:
        return needle
    if needle is None:
        return False
    if any(type(item) is not Erased and compare("=", needle, item) for item in items):
        return not negated
    return earliest(*items) or negated


def _in_list(node: In, scope: Scope) -> object:
    needle = evaluate(node.needle, scope)
    return _member(needle, [evaluate(item, scope) for item in node.items], node.negated)


def _in_path(node: InPath, scope: Scope) -> object:
    needle, values = evaluate(node.needle, scope), _path(node.path, scope)
    if type(values) is Erased:
        return earliest(needle, values)
    if kind(values) is not Kind.ARRAY:
        return False if type(needle) is not Erased else needle
    assert isinstance(values, list)
    return _member(needle, values, node.negated)


def _is_null(node: IsNull, scope: Scope) -> object:
    value = evaluate(node.operand, scope)
    if type(value) is Erased:
        return value
    return (value is None) is not node.negated


def _not(node: Not, scope: Scope) -> object:
    value = evaluate(node.operand, scope)
    return value if type(value) is Erased else value is not True


def _and(node: And, scope: Scope) -> object:
    values = [evaluate(operand, scope) for operand in node.operands]
    if any(type(value) is not Erased and value is not True for value in values):
        return False
    return earliest(*values) or True


def _or(node: Or, scope: Scope) -> object:
    values = [evaluate(operand, scope) for operand in node.operands]
    if any(value is True for value in values):
        return True
    return earliest(*values) or False


_EVALUATORS: dict[type, Callable[[Any, Scope], object]] = {
    Bool: _constant,
    Number: _constant,
    String: _constant,
    Null: _constant,
    Path: _path,
    Call: _call,
    Arith: _arith,
    Compare: _compare,
    In: _in_list,
    InPath: _in_path,
    IsNull: _is_null,
    Not: _not,
    And: _and,
    Or: _or,
}
