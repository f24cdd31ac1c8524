"""The expression syntax tree: immutable nodes with structural equality.

Each node records its depth and size (not part of equality) as it is built, so the
parser can refuse an oversized expression the moment it appears, without recursion.
`AND` and `OR` are n-ary and flattened: `a AND (b AND c)` and `(a AND b) AND c` are
the same tree, which keeps long conjunctions shallow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_SOURCE_CHARS = 4096
MAX_DEPTH = 32
MAX_NODES = 256

RESERVED_ROOTS: frozenset[str] = frozenset({"input", "actor", "event", "process", "now"})
FUNCTIONS: dict[str, int] = {"len": 1, "exists": 1, "duration": 1}  # name -> arity
COMPARISONS: frozenset[str] = frozenset({"=", "!=", "<", "<=", ">", ">="})
KEYWORDS: frozenset[str] = frozenset({"and", "or", "not", "in", "is", "null", "true", "false"})


@dataclass(frozen=True)
class Node:
    """A node of an expression tree."""

    depth: int = field(init=False, compare=False, repr=False)
    size: int = field(init=False, compare=False, repr=False)

    def children(self) -> tuple[Node, ...]:
        """The direct sub-expressions, left to right."""
        return ()

    def __post_init__(self) -> None:
        kids = self.children()
        object.__setattr__(self, "depth", 1 + max((kid.depth for kid in kids), default=0))
        object.__setattr__(self, "size", 1 + sum(kid.size for kid in kids))


@dataclass(frozen=True)
class Null(Node):
    """The literal `null`."""


@dataclass(frozen=True)
class Bool(Node):
    """The literal `true` or `false`."""

    value: bool


@dataclass(frozen=True)
class Number(Node):
    """A number literal: a finite float or an integer within ±(2^53 - 1)."""

    value: int | float


@dataclass(frozen=True)
class String(Node):
    """A text literal."""

    value: str


@dataclass(frozen=True)
class Path(Node):
    """A dotted path; the first segment picks the scope part (a reserved root or the document)."""

    segments: tuple[str, ...]

    @property
    def dotted(self) -> str:
        """The path as written, e.g. `input.amount`."""
        return ".".join(self.segments)


@dataclass(frozen=True)
class Call(Node):
    """A call of one of FUNCTIONS (checked by the parser)."""

    name: str
    args: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(frozen=True)
class Arith(Node):
    """`left + right` or `left - right`."""

    op: str
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Compare(Node):
    """One of COMPARISONS (`<>` is read as `!=`)."""

    op: str
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class In(Node):
    """`needle [NOT] IN (item, ...)`."""

    needle: Node
    items: tuple[Node, ...]
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.needle, *self.items)


@dataclass(frozen=True)
class InPath(Node):
    """`needle [NOT] IN path`, where the path holds an array."""

    needle: Node
    path: Path
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.needle, self.path)


@dataclass(frozen=True)
class IsNull(Node):
    """`operand IS [NOT] NULL`."""

    operand: Node
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Not(Node):
    """`NOT operand`."""

    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class And(Node):
    """`a AND b AND ...` (two or more operands, none of them an And)."""

    operands: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.operands


@dataclass(frozen=True)
class Or(Node):
    """`a OR b OR ...` (two or more operands, none of them an Or)."""

    operands: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.operands


def conjoin(left: Node, right: Node) -> And:
    """`left AND right`, flattened."""
    return And(_flatten(And, left) + _flatten(And, right))


def disjoin(left: Node, right: Node) -> Or:
    """`left OR right`, flattened."""
    return Or(_flatten(Or, left) + _flatten(Or, right))


def _flatten(kind: type[And] | type[Or], node: Node) -> tuple[Node, ...]:
    return node.operands if isinstance(node, kind) else (node,)


def walk(node: Node) -> list[Node]:
    """Every node of the tree, parent before children (iterative)."""
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(reversed(current.children()))
    return found
