"""Compiling an expression tree into nested closures, once, at parse time.

Evaluating is then a chain of plain calls with no dispatch on node types, which is
what makes a million evaluations of a condition cheap. Closures read only the Scope's
mappings and JSON values; nothing reaches host attributes or runs host code.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

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

Evaluator = Callable[[Scope], object]

_ROOTS: dict[str, Callable[[Scope], Mapping[str, Any]]] = {
    name: operator.attrgetter(name) for name in ("input", "actor", "event", "process")
}
_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def compile_node(node: Node) -> Evaluator:
    """The evaluator of `node` (recursion bounded by the parser's depth limit)."""
    if isinstance(node, Bool | Number | String | Null):
        constant = None if isinstance(node, Null) else node.value
        return lambda _scope: constant
    if isinstance(node, Path):
        return _path(node)
    if isinstance(node, Call):
        return _call(node)
    if isinstance(node, Arith):
        op, left, right = node.op, compile_node(node.left), compile_node(node.right)
        return lambda scope: arith(op, left(scope), right(scope))
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, In):
        return _in_list(node)
    if isinstance(node, InPath):
        return _in_path(node)
    if isinstance(node, IsNull):
        operand, negated = compile_node(node.operand), node.negated
        return lambda scope: (operand(scope) is None) is not negated
    if isinstance(node, Not):
        inner = compile_node(node.operand)
        return lambda scope: inner(scope) is not True
    if isinstance(node, And | Or):
        return _logic(node)
    raise TypeError(f"not an expression node: {node!r}")


def _root(path: Path) -> tuple[Callable[[Scope], Mapping[str, Any]], tuple[str, ...]]:
    head = path.segments[0]
    if head in _ROOTS:
        return _ROOTS[head], path.segments[1:]
    return _document, path.segments


def _document(scope: Scope) -> Mapping[str, Any]:
    return scope.document


def _step(value: object, key: str) -> object:
    if type(value) is dict or isinstance(value, Mapping):
        return value.get(key)
    return None  # a field of a non-object is missing, hence null


def _path(path: Path) -> Evaluator:
    if path.segments == ("now",):
        return _now
    root, rest = _root(path)
    if not rest:
        return root
    first, more = rest[0], rest[1:]
    if not more:
        return lambda scope: root(scope).get(first)

    def walk(scope: Scope) -> object:
        value: object = root(scope).get(first)
        for key in more:
            value = _step(value, key)
        return value

    return walk


def _now(scope: Scope) -> object:
    return scope.now


def _exists(path: Path) -> Evaluator:
    root, rest = _root(path)
    if path.segments == ("now",) or not rest:
        return lambda _scope: True
    parents, last = rest[:-1], rest[-1]

    def exists(scope: Scope) -> object:
        value: object = root(scope)
        for key in parents:
            value = _step(value, key)
        return isinstance(value, Mapping) and last in value

    return exists


def _call(node: Call) -> Evaluator:
    (arg,) = node.args
    if node.name == "exists":
        assert isinstance(arg, Path)
        return _exists(arg)
    if node.name == "duration":
        assert isinstance(arg, String)
        delta = parse_duration(arg.value)  # checked by the parser
        return lambda _scope: delta
    operand = compile_node(arg)

    def length(scope: Scope) -> object:
        value = operand(scope)
        # bool is no container, so str/list/Mapping are exactly the sized JSON kinds.
        return len(value) if isinstance(value, str | list | Mapping) else None

    return length


def _compare(node: Compare) -> Evaluator:
    op, left = node.op, compile_node(node.left)
    if isinstance(node.right, String | Number):
        # Fast path for the common `path op literal`: same-kind values skip the rules.
        literal, cmp = node.right.value, _CMP[op]
        fast: tuple[type, ...] = (str,) if isinstance(node.right, String) else (int, float)

        def against_literal(scope: Scope) -> object:
            value = left(scope)
            if type(value) in fast:
                return cmp(value, literal)
            return compare(op, value, literal)

        return against_literal
    right = compile_node(node.right)
    return lambda scope: compare(op, left(scope), right(scope))


def _in_list(node: In) -> Evaluator:
    needle, negated = compile_node(node.needle), node.negated
    items = tuple(compile_node(item) for item in node.items)

    def member(scope: Scope) -> object:
        value = needle(scope)
        if value is None:
            return False
        return any(compare("=", value, item(scope)) for item in items) is not negated

    return member


def _in_path(node: InPath) -> Evaluator:
    needle, array, negated = compile_node(node.needle), _path(node.path), node.negated

    def member(scope: Scope) -> object:
        value, values = needle(scope), array(scope)
        if value is None or kind(values) is not Kind.ARRAY:
            return False
        assert isinstance(values, list)
        return any(compare("=", value, item) for item in values) is not negated

    return member


def _logic(node: And | Or) -> Evaluator:
    parts = tuple(compile_node(operand) for operand in node.operands)
    if isinstance(node, And):
        if len(parts) == 2:
            first, second = parts
            return lambda scope: first(scope) is True and second(scope) is True
        return lambda scope: all(part(scope) is True for part in parts)
    if len(parts) == 2:
        first, second = parts
        return lambda scope: first(scope) is True or second(scope) is True
    return lambda scope: any(part(scope) is True for part in parts)
