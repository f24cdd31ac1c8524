"""The canonical text of an expression tree: keywords upper case, single spaces,
parentheses only where precedence needs them, so that parsing the text gives the
same tree back.
"""

from __future__ import annotations

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

# Binding strength, loosest first; mirrors the grammar's rule levels.
_OR, _AND, _NOT, _PREDICATE, _SUM, _ATOM = range(1, 7)


def to_text(node: Node) -> str:
    """The canonical printed form of `node`."""
    return _text(node, _OR)


def _precedence(node: Node) -> int:
    if isinstance(node, Or):
        return _OR
    if isinstance(node, And):
        return _AND
    if isinstance(node, Not):
        return _NOT
    if isinstance(node, Compare | In | InPath | IsNull):
        return _PREDICATE
    if isinstance(node, Arith):
        return _SUM
    return _ATOM


def _text(node: Node, weakest: int) -> str:
    """`node` printed where nothing binding looser than `weakest` may stand bare."""
    text = _bare(node)
    return f"({text})" if _precedence(node) < weakest else text


def _bare(node: Node) -> str:
    if isinstance(node, Or):
        return " OR ".join(_text(operand, _AND) for operand in node.operands)
    if isinstance(node, And):
        return " AND ".join(_text(operand, _NOT) for operand in node.operands)
    if isinstance(node, Not):
        return f"NOT {_text(node.operand, _NOT)}"
    if isinstance(node, Compare):
        return f"{_text(node.left, _SUM)} {node.op} {_text(node.right, _SUM)}"
    if isinstance(node, In):
        items = ", ".join(_text(item, _OR) for item in node.items)
        return f"{_text(node.needle, _SUM)} {'NOT IN' if node.negated else 'IN'} ({items})"
    if isinstance(node, InPath):
        keyword = "NOT IN" if node.negated else "IN"
        return f"{_text(node.needle, _SUM)} {keyword} {node.path.dotted}"
    if isinstance(node, IsNull):
        return f"{_text(node.operand, _SUM)} IS {'NOT NULL' if node.negated else 'NULL'}"
    if isinstance(node, Arith):
        # Left-associative: a right operand that is itself a sum needs parentheses.
        return f"{_text(node.left, _SUM)} {node.op} {_text(node.right, _ATOM)}"
    return _atom(node)


def _atom(node: Node) -> str:
    if isinstance(node, Call):
        return f"{node.name}({', '.join(_text(arg, _OR) for arg in node.args)})"
    if isinstance(node, Path):
        return node.dotted
    if isinstance(node, String):
        return "'" + node.value.replace("'", "''") + "'"
    if isinstance(node, Number):
        return repr(node.value)
    if isinstance(node, Bool):
        return "true" if node.value else "false"
    if isinstance(node, Null):
        return "null"
    raise TypeError(f"not an expression node: {node!r}")
