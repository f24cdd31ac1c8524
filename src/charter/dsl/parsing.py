"""Text to syntax tree: lark's LALR parser with the tree built inline, node by node.

The builder runs as lark reduces (no tree walk afterwards, so no recursion), checks
each node against the depth and size limits as it appears, and turns semantic slips
(unknown function, wrong arity, bad duration, out-of-range number) into positioned
ExpressionErrors. Parenthesis depth is checked on the raw text before lark sees it.
"""

from __future__ import annotations

import math
from functools import cache
from importlib.resources import files
from typing import Any, TypeVar, cast

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from charter.core.errors.workflows import DurationError, ExpressionError, ExpressionLimitError
from charter.dsl.durations import parse_duration
from charter.dsl.operations import MAX_SAFE_INTEGER
from charter.dsl.syntax import (
    FUNCTIONS,
    MAX_DEPTH,
    MAX_NODES,
    MAX_SOURCE_CHARS,
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
    Path,
    String,
    conjoin,
    disjoin,
)

N = TypeVar("N", bound=Node)

# LPAR and MINUS are left out: after an operand they mean a call or a subtraction.
_OPERAND_START = frozenset({"NAME", "NUMBER", "STRING", "TRUE", "FALSE", "NULL"})
_OPERATORS = frozenset({"COMPARE", "PLUS", "IN", "IS"})


def parse_tree(text: str) -> Node:
    """Parse `text` into a tree; ExpressionError or ExpressionLimitError otherwise."""
    if not isinstance(text, str):
        raise ExpressionError("an expression must be text")
    if len(text) > MAX_SOURCE_CHARS:
        raise ExpressionLimitError(
            f"expression is {len(text)} characters long; the limit is {MAX_SOURCE_CHARS}"
        )
    _check_parentheses(text)
    try:
        # The inline builder turns every reduction into a node; lark's stub says Tree.
        return cast(Node, _parser().parse(text))
    except UnexpectedInput as err:
        raise _syntax_error(text, err) from None


@cache
def _parser() -> Lark:
    grammar = files("charter.dsl").joinpath("expressions.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", transformer=_Builder())


def _check_parentheses(text: str) -> None:
    """Refuse parentheses nested deeper than MAX_DEPTH (quotes skipped: `''` toggles twice)."""
    depth, quoted = 0, False
    for char in text:
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
            if depth > MAX_DEPTH:
                raise ExpressionLimitError(f"parentheses nested more than {MAX_DEPTH} deep")
        elif char == ")":
            depth -= 1


def _syntax_error(text: str, err: UnexpectedInput) -> ExpressionError:
    if isinstance(err, UnexpectedCharacters):
        char = text[err.pos_in_stream or 0]
        what = "unterminated text literal" if char == "'" else f"unexpected character {char!r}"
        return ExpressionError(what, line=err.line, column=err.column)
    if isinstance(err, UnexpectedToken) and _chained_comparison(err):
        message = f"unexpected {str(err.token)!r}; comparisons do not chain, join them with AND"
        return ExpressionError(message, **_at(err.token))
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        found = f"unexpected {str(err.token)!r}"
        line, column = err.token.line or 1, err.token.column or 1
    else:
        found = "empty expression" if not text.strip() else "unexpected end of input"
        line, column = _end_position(text)
    expected = err.expected if isinstance(err, UnexpectedToken | UnexpectedEOF) else set()
    return ExpressionError(found + _hint(set(expected)), line=line, column=column)


def _chained_comparison(err: UnexpectedToken) -> bool:
    return err.token.type == "COMPARE" and not err.expected & _OPERAND_START


def _hint(expected: set[str]) -> str:
    if expected == {"NUMBER"}:
        return "; expected a number after '-'"
    if expected == {"FIELD"}:
        return "; expected a field name"
    if expected & _OPERAND_START:
        return "; expected an operand"
    if expected & _OPERATORS:
        return "; expected an operator"
    if "RPAR" in expected:
        return "; expected ')'"
    return ""


def _end_position(text: str) -> tuple[int, int]:
    line = text.count("\n") + 1
    return line, len(text) - (text.rfind("\n") + 1) + 1


def _checked(node: N) -> N:
    if node.depth > MAX_DEPTH:
        raise ExpressionLimitError(f"expression nested more than {MAX_DEPTH} deep")
    if node.size > MAX_NODES:
        raise ExpressionLimitError(f"expression has more than {MAX_NODES} parts")
    return node


def _at(token: Token) -> dict[str, int]:
    return {"line": token.line or 1, "column": token.column or 1}


class _Builder(Transformer[Token, Node]):
    """Callbacks lark runs on each reduction; `children` hold nodes and kept tokens."""

    def or_(self, children: list[Any]) -> Node:
        return _checked(disjoin(children[0], children[2]))

    def and_(self, children: list[Any]) -> Node:
        return _checked(conjoin(children[0], children[2]))

    def not_(self, children: list[Any]) -> Node:
        return _checked(Not(children[1]))

    def compare(self, children: list[Any]) -> Node:
        left, op, right = children
        return _checked(Compare("!=" if op == "<>" else str(op), left, right))

    def in_list(self, children: list[Any]) -> Node:
        return _checked(In(children[0], tuple(children[2])))

    def not_in_list(self, children: list[Any]) -> Node:
        return _checked(In(children[0], tuple(children[3]), negated=True))

    def in_path(self, children: list[Any]) -> Node:
        return _checked(InPath(children[0], children[2]))

    def not_in_path(self, children: list[Any]) -> Node:
        return _checked(InPath(children[0], children[3], negated=True))

    def is_null(self, children: list[Any]) -> Node:
        return _checked(IsNull(children[0]))

    def is_not_null(self, children: list[Any]) -> Node:
        return _checked(IsNull(children[0], negated=True))

    def arith(self, children: list[Any]) -> Node:
        left, op, right = children
        return _checked(Arith(str(op), left, right))

    def string(self, children: list[Any]) -> Node:
        return String(str(children[0])[1:-1].replace("''", "'"))

    def number(self, children: list[Any]) -> Node:
        return Number(_number(children[0]))

    def negative(self, children: list[Any]) -> Node:
        return Number(-_number(children[1]))

    def true(self, children: list[Any]) -> Node:
        return Bool(True)

    def false(self, children: list[Any]) -> Node:
        return Bool(False)

    def null(self, children: list[Any]) -> Node:
        return Null()

    def items(self, children: list[Any]) -> list[Node]:
        return list(children)

    def path(self, children: list[Any]) -> Node:
        if children[0] == "now" and len(children) > 1:
            raise ExpressionError("'now' is a time and has no fields", **_at(children[0]))
        return _checked(Path(tuple(str(token) for token in children)))

    def call(self, children: list[Any]) -> Node:
        name_token, args = children[0], tuple(children[1] or ())
        name = str(name_token).lower()
        if name not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            message = f"unknown function {name_token!s}() (known: {known})"
            raise ExpressionError(message, **_at(name_token))
        if len(args) != FUNCTIONS[name]:
            raise ExpressionError(
                f"{name}() takes {FUNCTIONS[name]} argument, not {len(args)}", **_at(name_token)
            )
        _check_argument(name, args[0], name_token)
        return _checked(Call(name, args))


def _check_argument(name: str, arg: Node, at: Token) -> None:
    if name == "exists" and not isinstance(arg, Path):
        raise ExpressionError("exists() takes a path, e.g. exists(input.note)", **_at(at))
    if name == "duration":
        if not isinstance(arg, String):
            message = "duration() takes a text literal, e.g. duration('48h')"
            raise ExpressionError(message, **_at(at))
        try:
            parse_duration(arg.value)
        except DurationError as err:
            raise ExpressionError(f"duration(): {err.message}", **_at(at)) from None


def _number(token: Token) -> int | float:
    text = str(token)
    if any(mark in text for mark in ".eE"):
        value = float(text)
        if not math.isfinite(value):
            raise ExpressionError(f"number {text} is out of range", **_at(token))
        return value
    # Compare lengths first: int() of a very long digit string is slow.
    if len(text.lstrip("0")) > 16 or int(text) > MAX_SAFE_INTEGER:
        raise ExpressionError(
            f"integer {text} is outside the I-JSON range ±(2^53 - 1)", **_at(token)
        )
    return int(text)
