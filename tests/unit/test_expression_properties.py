"""Properties of the expression language, checked on generated trees, text and scopes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from charter.core.errors.workflows import ExpressionError, ExpressionLimitError
from charter.core.jsontypes import JsonValue
from charter.dsl.expressions import Expression, Scope, parse_condition, parse_expression
from charter.dsl.printer import to_text
from charter.dsl.syntax import (
    KEYWORDS,
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

IDENTIFIER = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
HEAD = IDENTIFIER.filter(lambda name: name.lower() not in KEYWORDS and name != "now")
_NOW = datetime(2026, 1, 1, tzinfo=UTC)
SMALL_NAMES = st.sampled_from(["a", "b", "state", "x", "in"])


def paths(head: st.SearchStrategy[str], field: st.SearchStrategy[str]) -> st.SearchStrategy[Path]:
    """Paths the parser accepts: no keyword first, `now` alone, a reserved root or not."""
    rooted = st.tuples(
        st.one_of(head, st.sampled_from(["input", "actor", "event", "process"])),
        st.lists(field, max_size=3),
    ).map(lambda parts: Path((parts[0], *parts[1])))
    return st.one_of(rooted, st.just(Path(("now",))))


def leaves(path_strategy: st.SearchStrategy[Path]) -> st.SearchStrategy[Node]:
    integers = st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
    floats = st.floats(allow_nan=False, allow_infinity=False)
    durations = st.tuples(st.integers(1, 10_000), st.sampled_from("smhdwy")).map(
        lambda pair: Call("duration", (String(f"{pair[0]}{pair[1]}"),))
    )
    return st.one_of(
        st.builds(Null),
        st.builds(Bool, st.booleans()),
        st.builds(Number, st.one_of(integers, floats)),
        st.builds(String, st.text(max_size=8)),
        path_strategy,
        path_strategy.map(lambda path: Call("exists", (path,))),
        durations,
    )


def trees(path_strategy: st.SearchStrategy[Path]) -> st.SearchStrategy[Node]:
    """Every node type, combined the way the parser builds them (AND/OR flattened)."""

    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        ops = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
        return st.one_of(
            st.builds(Arith, st.sampled_from(["+", "-"]), children, children),
            st.builds(Compare, ops, children, children),
            st.builds(
                In, children, st.lists(children, min_size=1, max_size=3).map(tuple), st.booleans()
            ),
            st.builds(InPath, children, path_strategy, st.booleans()),
            st.builds(IsNull, children, st.booleans()),
            st.builds(Not, children),
            st.builds(conjoin, children, children),
            st.builds(disjoin, children, children),
            children.map(lambda child: Call("len", (child,))),
        )

    return st.recursive(leaves(path_strategy), extend, max_leaves=24).filter(
        lambda node: (
            node.depth <= MAX_DEPTH
            and node.size <= MAX_NODES
            and len(to_text(node)) <= MAX_SOURCE_CHARS
        )
    )


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(trees(paths(HEAD, IDENTIFIER)))
def test_printed_form_parses_back_to_the_same_tree(tree: Node) -> None:
    expression = Expression(tree, "")
    text = str(expression)
    again = parse_expression(text)
    assert again == expression
    assert str(again) == text  # the canonical form is a fixed point


# Grammar-shaped pieces reach far more parser states than arbitrary characters.
GRAMMAR_PIECES = st.lists(
    st.sampled_from(
        [
            *"()',.=!<>+- \n\tabnotrulsixe0123456789_",
            *[" AND ", " OR ", "NOT ", " IN ", " IS ", "NULL", "len(", "exists(", "duration("],
            *["'1h'", "now", "1e5", "2.5", "<>", ">=", "''"],
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=1500)
@given(st.one_of(st.text(max_size=80), GRAMMAR_PIECES))
def test_any_text_parses_or_raises_an_expression_error(text: str) -> None:
    try:
        expression = parse_expression(text)
    except (ExpressionError, ExpressionLimitError):
        return
    assert parse_expression(str(expression)) == expression


JSON_VALUES: st.SearchStrategy[JsonValue] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**60), max_value=2**60),
        st.floats(),  # NaN and infinities too: evaluation must still not raise
        st.text(max_size=6),
        st.sampled_from(
            ["2026-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "x"]
        ),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(SMALL_NAMES, children, max_size=3)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(SMALL_NAMES, JSON_VALUES, max_size=5)
SCOPES = st.builds(
    Scope,
    document=OBJECTS,
    now=st.datetimes(timezones=st.just(UTC)),
    input=OBJECTS,
    actor=OBJECTS,
    event=OBJECTS,
    process=OBJECTS,
)

CONDITIONS = [
    parse_condition(text)
    for text in [
        "state = 'ready' AND input.a > 100",
        "a = b",
        "a != b OR a < b OR a <= b OR a > b OR a >= b",
        "a IN (b, 1, 'x', null, true) OR a NOT IN (state, x.a)",
        "a IN b OR x NOT IN input.in",
        "a IS NULL OR b.a.b IS NOT NULL",
        "now - a > duration('1h') OR a + duration('1y') < now",
        "a - b = 1 OR a + b > x",
        "now + a = b OR a - now < b",
        "len(a) > len(b) OR len(state) = 0",
        "exists(a.b) AND NOT exists(input.x.a)",
        "actor.a = event.b OR process.state = input.state",
        "NOT a AND NOT (b OR x)",
        "a + 9007199254740991 > 0 OR a - 1e308 - 1e308 < 0",
    ]
]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(SCOPES)
def test_fixed_conditions_never_raise(scope: Scope) -> None:
    for condition in CONDITIONS:
        assert isinstance(condition.holds(scope), bool)
        json.dumps(condition.evaluate(scope))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(trees(paths(SMALL_NAMES.filter(lambda name: name != "in"), SMALL_NAMES)), SCOPES)
def test_generated_expressions_never_raise(tree: Node, scope: Scope) -> None:
    expression = Expression(tree, "")
    value = expression.evaluate(scope)
    json.dumps(value)  # JSON, including times and durations converted
    assert isinstance(expression.holds(scope), bool)


def test_deeply_nested_documents_do_not_exhaust_the_stack() -> None:
    deep: JsonValue = 1
    other: JsonValue = 1
    for _ in range(50_000):
        deep, other = [deep], [other]
    scope = Scope(document={"a": deep, "b": other, "x": {"a": deep}}, now=_NOW)
    assert parse_condition("a = b").holds(scope)
    assert parse_condition("a IN (b)").holds(scope)
    assert parse_condition("b IN x.a").holds(scope) is False
    assert parse_expression("len(a)").evaluate(scope) == 1


@pytest.mark.parametrize(
    "text",
    [
        "(" * 10_000,
        "(" * 10_000 + "x" + ")" * 10_000,
        "NOT " * 10_000 + "x",
        "NOT " * 1_000 + "x",
        "NOT (" * 800 + "x" + ")" * 800,
        "-" * 10_000 + "1",
        "1" + " + 1" * 1_000,
        "1" + " - 1" * 800,
        "x" + " OR NOT x" * 400,
        "len(" * 10_000 + "x" + ")" * 10_000,
        "x IN (" * 600 + "1" + ")" * 600,
        "a" + ".a" * 5_000,
        "'" * 10_001,
        "x = " + "'x' " * 2_000,
    ],
    ids=lambda text: f"{text[:10]}..{len(text)}",
)
def test_pathological_nesting_is_a_limit_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ExpressionLimitError):
        parse_expression(text)
