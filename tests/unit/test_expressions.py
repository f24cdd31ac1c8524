"""Conditions and template expressions (docs/dsl.md): every operator, rule and error."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType

import pytest

from charter.core.errors.workflows import DslError, ExpressionError, ExpressionLimitError
from charter.core.jsontypes import JsonValue
from charter.dsl.expressions import (
    RESERVED_ROOTS,
    Expression,
    Scope,
    parse_condition,
    parse_expression,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope(
    document={
        "state": "ready",
        "amount": 150,
        "ratio": 1.5,
        "name": "Ada",
        "greek": "αβγ",
        "tags": ["a", "b"],
        "items": [1, 2, 3],
        "matrix": [[1, 2], [3]],
        "obj": {"a": 1, "b": [True, None]},
        "nested": {"x": {"y": 1, "n": None}},
        "nothing": None,
        "flag": True,
        "off": False,
        "empty": "",
        "due": "2026-01-02T00:00:00Z",
        "due_offset": "2026-01-02T01:00:00+01:00",
        "not_a_time": "tomorrow",
        "big": 2**53 - 1,
        "huge": 1e308,
        "in": "keyword field",
    },
    now=NOW,
    input={"amount": 150, "note": None, "at": "2025-12-30T00:00:00Z", "reason": "sla"},
    actor={"id": "ann", "public_key": "ab" * 32, "roles": ["manager", "analyst"]},
    event={"hash": "cd" * 32, "actor": "ab" * 32, "at": "2026-01-01T00:00:00.000Z"},
    process={"id": "customer-1", "workflow": "w/x", "parent": None},
)


def _json(value: JsonValue) -> str:
    # json.dumps tells 1 from 1.0 from true, which == does not.
    return json.dumps(value)


def _value(text: str) -> JsonValue:
    return parse_expression(text).evaluate(SCOPE)


def _check(text: str, expected: JsonValue) -> None:
    assert _json(_value(text)) == _json(expected), text


# --- literals and paths -------------------------------------------------------------

LITERALS = [
    ("'text'", "text"),
    ("''", ""),
    ("'it''s'", "it's"),
    ("''''", "'"),
    ("'two\nlines'", "two\nlines"),
    ("'αβγ'", "αβγ"),
    ("0", 0),
    ("42", 42),
    ("007", 7),
    ("-42", -42),
    ("- 42", -42),
    ("1.5", 1.5),
    ("2e3", 2000.0),
    ("2E-3", 0.002),
    ("1.5e+2", 150.0),
    ("9007199254740991", 2**53 - 1),
    ("-9007199254740991", -(2**53 - 1)),
    ("true", True),
    ("false", False),
    ("null", None),
]


@pytest.mark.parametrize(("text", "expected"), LITERALS)
def test_literals(text: str, expected: JsonValue) -> None:
    _check(text, expected)


PATHS = [
    ("state", "ready"),
    ("nested.x.y", 1),
    ("nested.x", {"y": 1, "n": None}),
    ("nested.x.n", None),
    ("missing", None),
    ("missing.deeper.still", None),
    ("name.length", None),  # a field of a non-object is missing
    ("obj.b", [True, None]),
    ("input.amount", 150),
    ("input.missing", None),
    ("input", {"amount": 150, "note": None, "at": "2025-12-30T00:00:00Z", "reason": "sla"}),
    ("actor.roles", ["manager", "analyst"]),
    ("actor.id", "ann"),
    ("event.hash", "cd" * 32),
    ("event.at", "2026-01-01T00:00:00.000Z"),
    ("process.id", "customer-1"),
    ("process.parent", None),
    ("now", "2026-01-01T00:00:00.000Z"),
    ("state.in", None),  # keywords may follow a dot
    ("_private", None),
    ("__class__", None),  # names are JSON keys, never host attributes
    ("input.__class__", None),
    ("actor.roles.__len__", None),
]


@pytest.mark.parametrize(("text", "expected"), PATHS)
def test_paths(text: str, expected: JsonValue) -> None:
    _check(text, expected)


def test_root_mappings_evaluate_to_plain_dicts() -> None:
    scope = Scope(document={}, now=NOW, input=MappingProxyType({"a": 1}))
    value = parse_expression("input").evaluate(scope)
    assert type(value) is dict
    assert value == {"a": 1}


def test_default_scope_parts_are_empty() -> None:
    scope = Scope(document={"state": "s"}, now=NOW)
    assert parse_expression("input").evaluate(scope) == {}
    assert parse_condition("input.x IS NULL AND actor.roles IS NULL").holds(scope)


def test_scope_refuses_a_naive_now() -> None:
    with pytest.raises(ValueError, match="aware"):
        Scope(document={}, now=datetime(2026, 1, 1))


# --- operators ------------------------------------------------------------------------

OPERATORS = [
    # equality
    ("state = 'ready'", True),
    ("state = 'READY'", False),
    ("state != 'ready'", False),
    ("state <> 'done'", True),
    ("amount = 150", True),
    ("amount = 150.0", True),
    ("ratio = 1.5", True),
    ("flag = true", True),
    ("off = false", True),
    ("flag != false", True),
    ("tags = tags", True),
    ("obj = obj", True),
    ("matrix = matrix", True),
    ("obj.b = obj.b", True),
    ("nested.x = nested.x", True),
    ("tags != items", True),
    ("obj != nested", True),
    ("1 = 1", True),
    ("'a' = 'a'", True),
    # ordering
    ("amount > 100", True),
    ("amount >= 150", True),
    ("amount < 150", False),
    ("amount <= 150", True),
    ("ratio < 2", True),
    ("-1 < 0", True),
    ("'a' < 'b'", True),
    ("'B' < 'a'", True),  # code point order
    ("'é' > 'z'", True),
    ("'' < 'a'", True),
    ("name >= 'Ada'", True),
    # arithmetic
    ("amount + 50", 200),
    ("amount - 200", -50),
    ("1 + 2 - 3 + 4", 4),
    ("10 - (2 + 3)", 5),
    ("1 + 0.5", 1.5),
    ("ratio + ratio", 3.0),
    ("0.1 + 0.2 > 0.3", True),
    ("amount + 1 > 150", True),
    # IN and NOT IN
    ("state IN ('draft', 'ready')", True),
    ("state IN ('draft')", False),
    ("state NOT IN ('draft', 'done')", True),
    ("state NOT IN ('ready')", False),
    ("amount IN (1, 150.0)", True),
    ("1 IN (true)", False),
    ("'manager' IN actor.roles", True),
    ("'owner' IN actor.roles", False),
    ("'owner' NOT IN actor.roles", True),
    ("'manager' NOT IN actor.roles", False),
    ("2 IN items", True),
    ("items IN matrix", False),
    ("obj.b IN (obj.b)", True),
    ("'a' IN (actor.roles)", False),  # a list of one array, not the array
    ("'a' IN tags", True),
    ("1 + 1 IN items", True),
    ("state IN (name, 'x', state)", True),
    # IS NULL
    ("nothing IS NULL", True),
    ("missing IS NULL", True),
    ("nested.x.n IS NULL", True),
    ("state IS NULL", False),
    ("state IS NOT NULL", True),
    ("nothing IS NOT NULL", False),
    ("null IS NULL", True),
    ("now IS NOT NULL", True),
    ("'abc' + 1 IS NULL", True),
    # logic
    ("true AND true", True),
    ("true AND false", False),
    ("false OR true", True),
    ("false OR false", False),
    ("NOT false", True),
    ("NOT true", False),
    ("NOT NOT true", True),
    ("flag AND state = 'ready'", True),
    ("off OR amount > 1", True),
    ("true AND true AND true AND false", False),
    ("false OR false OR false OR true", True),
    # functions
    ("len(name)", 3),
    ("len(greek)", 3),  # code points, not bytes
    ("len(empty)", 0),
    ("len(tags)", 2),
    ("len(obj)", 2),
    ("len(input)", 4),
    ("len(nothing)", None),
    ("len(missing)", None),
    ("len(amount)", None),
    ("len(flag)", None),
    ("len(now)", None),
    ("len(tags) = 2", True),
    ("LEN(name)", 3),
    ("exists(state)", True),
    ("exists(nothing)", True),
    ("exists(missing)", False),
    ("exists(nested.x.n)", True),
    ("exists(nested.x.z)", False),
    ("exists(name.x)", False),
    ("exists(input.note)", True),
    ("exists(input.other)", False),
    ("exists(input)", True),
    ("exists(now)", True),
    ("Exists(state)", True),
    ("duration('48h')", 172_800),
    ("duration('1y')", 31_536_000),
    ("DURATION('1s')", 1),
    ("duration('1h') + duration('30m')", 5400),
    ("duration('1h') - duration('2h')", -3600),
]


@pytest.mark.parametrize(("text", "expected"), OPERATORS)
def test_operators(text: str, expected: JsonValue) -> None:
    _check(text, expected)


TIMES = [
    ("now + duration('48h')", "2026-01-03T00:00:00.000Z"),
    ("duration('48h') + now", "2026-01-03T00:00:00.000Z"),
    ("now - duration('1d')", "2025-12-31T00:00:00.000Z"),
    ("now - input.at", 172_800),
    ("input.at - now", -172_800),
    ("due - now", 86_400),
    ("due - input.at", 259_200),  # RFC 3339 strings in arithmetic are times
    ("due + duration('1h')", "2026-01-02T01:00:00.000Z"),
    ("due_offset - due", 0),
    ("now = now", True),
    ("now > input.at", True),
    ("now < due", True),
    ("now < '2026-01-01T00:00:01Z'", True),
    ("'2026-01-01T00:00:00Z' = now", True),
    ("now = '2026-01-01T01:00:00+01:00'", True),
    ("input.at < now - duration('1d')", True),
    ("now - input.at > duration('47h')", True),
    ("now - input.at >= duration('48h')", True),
    ("now - input.at = 172800", True),  # a duration compares with seconds
    ("now - input.at > 172801", False),
    ("due = '2026-01-02T00:00:00Z'", True),
    ("due = due_offset", False),  # two strings compare as text
    ("now = 'tomorrow'", False),
    ("now > not_a_time", False),
    ("now < not_a_time", False),
    ("now = 1767225600", False),
    ("not_a_time - now", None),
    ("now + now", None),
    ("duration('1h') - now", None),
    ("now + 1", None),
    ("now - '2026-13-01T00:00:00Z'", None),
    ("now + duration('1h') + duration('1h')", "2026-01-01T02:00:00.000Z"),
]


@pytest.mark.parametrize(("text", "expected"), TIMES)
def test_time_arithmetic_and_comparison(text: str, expected: JsonValue) -> None:
    _check(text, expected)


def test_sub_second_durations_render_as_fractional_seconds() -> None:
    scope = Scope(
        document={"start": "2026-01-01T00:00:00.250Z"},
        now=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
    )
    assert parse_expression("now - start").evaluate(scope) == 0.75


def test_now_in_another_zone_renders_as_utc() -> None:
    scope = Scope(document={}, now=datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
    assert parse_expression("now").evaluate(scope) == "2026-01-01T00:00:00.000Z"
    assert parse_condition("now = '2026-01-01T00:00:00Z'").holds(scope)


# --- null and type-mismatch rules ------------------------------------------------------

NULL_RULES = [
    ("nothing = null", False),
    ("null = null", False),
    ("nothing != 'x'", False),
    ("missing = missing", False),
    ("missing != 1", False),
    ("missing < 1", False),
    ("missing >= 1", False),
    ("1 > missing", False),
    ("missing IN ('a', null)", False),
    ("missing NOT IN ('a')", False),
    ("null IN (null)", False),
    ("'a' IN (null, 'a')", True),
    ("'b' NOT IN (null, 'a')", True),
    ("'a' IN missing", False),
    ("'a' NOT IN missing", False),
    ("'a' NOT IN name", False),  # not an array
    ("missing IN tags", False),
    ("NOT missing", True),
    ("NOT (missing = 1)", True),
    ("NOT nothing", True),
    ("missing AND true", False),
    ("missing OR true", True),
    ("missing + 1", None),
    ("1 - missing", None),
    ("now - missing", None),
    ("missing.x.y = 1", False),
]


@pytest.mark.parametrize(("text", "expected"), NULL_RULES)
def test_null_rules(text: str, expected: JsonValue) -> None:
    _check(text, expected)


MISMATCHES = [
    ("amount = '150'", False),
    ("amount != '150'", False),  # every comparison of different kinds is false
    ("amount > '1'", False),
    ("'2' < 10", False),
    ("flag = 1", False),
    ("1 = true", False),
    ("flag != 1", False),
    ("off = 0", False),
    ("flag > false", False),  # no ordering on bool
    ("flag >= true", False),
    ("tags < tags", False),  # no ordering on arrays
    ("obj >= obj", False),
    ("tags = 'a'", False),
    ("obj = tags", False),
    ("items = (1)", False),
    ("duration('1h') = '1h'", False),
    ("duration('1h') > now", False),
    ("'1' + 1", None),
    ("'a' + 'b'", None),
    ("flag + 1", None),
    ("tags + tags", None),
    ("obj - 1", None),
    ("null + 1", None),
    ("duration('1h') + 1", None),
    ("1 + duration('1h')", None),
    ("NOT 5", True),  # only exactly true is true
    ("NOT 'true'", True),
    ("1 AND true", False),
    ("'true' OR false", False),
    ("len(1)", None),
    ("state IN (1, true, null)", False),
]


@pytest.mark.parametrize(("text", "expected"), MISMATCHES)
def test_type_mismatch_rules(text: str, expected: JsonValue) -> None:
    _check(text, expected)


OVERFLOW = [
    ("big + 1", None),
    ("big + 0", 2**53 - 1),
    ("0 - big - 1", None),
    ("0 - big", -(2**53 - 1)),
    ("huge + huge", None),
    ("huge - huge", 0.0),
    ("now + duration('9000y')", None),
    ("now - duration('3000y')", None),
    ("duration('999999y') + duration('999999y') + duration('999999y')", None),
]


@pytest.mark.parametrize(("text", "expected"), OVERFLOW)
def test_overflow_is_null(text: str, expected: JsonValue) -> None:
    _check(text, expected)


def test_huge_document_integer_with_a_float_is_null() -> None:
    scope = Scope(document={"n": 10**400}, now=NOW)
    assert parse_expression("n + 1.5").evaluate(scope) is None
    assert parse_condition("n > 1.5").holds(scope)


def test_equality_is_deep_json_equality() -> None:
    scope = Scope(
        document={
            "a": [1, {"k": [True]}],
            "b": [1.0, {"k": [True]}],
            "c": [1, {"k": [1]}],
            "d": {"x": 1, "y": 2},
            "e": {"y": 2, "x": 1},
            "f": {"x": 1, "z": 2},
        },
        now=NOW,
    )
    cases = {"a = b": True, "a = c": False, "d = e": True, "d = f": False, "a != c": True}
    for text, expected in cases.items():
        assert parse_condition(text).holds(scope) is expected, text


# --- precedence, keywords, printing ------------------------------------------------------

PRECEDENCE = [
    # (input, canonical form, value)
    ("true OR false AND false", "true OR false AND false", True),
    ("(true OR false) AND false", "(true OR false) AND false", False),
    ("NOT true AND false", "NOT true AND false", False),
    ("NOT (true AND false)", "NOT (true AND false)", True),
    ("NOT false OR true", "NOT false OR true", True),
    ("NOT amount = 150", "NOT amount = 150", False),
    ("NOT state IN ('x')", "NOT state IN ('x')", True),
    ("NOT nothing IS NULL", "NOT nothing IS NULL", False),
    ("amount + 1 = 151", "amount + 1 = 151", True),
    ("1 - 2 - 3", "1 - 2 - 3", -4),
    ("1 - (2 - 3)", "1 - (2 - 3)", 2),
    ("(1 - 2) - 3", "1 - 2 - 3", -4),
    ("((state))", "state", "ready"),
    ("a AND (b AND c)", "a AND b AND c", False),
    ("(a OR b) OR c", "a OR b OR c", False),
    ("(amount = 150) = true", "(amount = 150) = true", True),
    ("(1 = 1) IN (true)", "(1 = 1) IN (true)", True),
    ("state IN ('a', 1 = 1)", "state IN ('a', 1 = 1)", False),
    ("len(1 + 1) IS NULL", "len(1 + 1) IS NULL", True),
    ("- 5 - -5", "-5 - -5", 0),
    ("NOT NOT (true)", "NOT NOT true", True),
    ("amount   >=\n  100", "amount >= 100", True),
    ("x <> 1", "x != 1", False),
]


@pytest.mark.parametrize(("text", "canonical", "expected"), PRECEDENCE)
def test_precedence_and_canonical_form(text: str, canonical: str, expected: JsonValue) -> None:
    expression = parse_expression(text)
    assert str(expression) == canonical
    assert parse_expression(canonical) == expression
    _check(text, expected)


@pytest.mark.parametrize(
    "text",
    [
        "state = 'ready' and amount > 100 or not flag",
        "state = 'ready' AND amount > 100 OR NOT flag",
        "state = 'ready' And amount > 100 oR nOt flag",
        "STATE_x is null Or state IS not NULL",
        "state in ('ready') AND state NOT in ('x') and 'a' In tags",
        "TRUE and True and tRuE",
    ],
)
def test_keywords_are_case_insensitive(text: str) -> None:
    assert parse_condition(text).holds(SCOPE)


def test_keyword_case_does_not_change_the_tree() -> None:
    assert parse_expression("a and not b or c is null") == parse_expression(
        "a AND NOT b OR c IS NULL"
    )


def test_paths_are_case_sensitive() -> None:
    assert parse_expression("State").evaluate(SCOPE) is None
    assert parse_expression("State") != parse_expression("state")


def test_keyword_after_a_dot_is_a_field() -> None:
    scope = Scope(document={"a": {"in": 1, "null": 2, "AND": 3}}, now=NOW)
    assert parse_expression("a.in + a.null + a.AND").evaluate(scope) == 6


def test_keyword_prefix_is_a_name() -> None:
    scope = Scope(document={"nullable": 1, "order": 2, "notes": 3, "is_x": 4}, now=NOW)
    assert parse_expression("nullable + order + notes + is_x").evaluate(scope) == 10


# --- Expression object ---------------------------------------------------------------


def test_expression_equality_and_hash_are_structural() -> None:
    first = parse_expression("state='ready'  AND input.amount>100")
    second = parse_expression("(state = 'ready') and (input.amount > 100)")
    assert first == second
    assert hash(first) == hash(second)
    assert first.source != second.source
    assert len({first, second}) == 1
    assert first != parse_expression("state = 'ready' AND input.amount >= 100")
    assert parse_expression("1") != parse_expression("true")
    assert parse_expression("'1'") != parse_expression("1")
    assert first != "state = 'ready' AND input.amount > 100"


def test_expression_is_immutable() -> None:
    expression = parse_expression("state")
    with pytest.raises(AttributeError):
        expression.source = "other"


def test_repr_shows_canonical_form() -> None:
    assert repr(parse_expression("a=1")) == "Expression('a = 1')"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state = 'ready' AND input.amount > 100", {"state", "input.amount"}),
        ("now > input.at", {"now", "input.at"}),
        ("'m' IN actor.roles", {"actor.roles"}),
        ("exists(a.b) OR len(c) > 1", {"a.b", "c"}),
        ("x IN (y, z.w)", {"x", "y", "z.w"}),
        ("duration('1h') = duration('1h')", set()),
        ("1 + 1", set()),
        ("input", {"input"}),
        ("event.hash IS NULL AND process.id = 'p'", {"event.hash", "process.id"}),
    ],
)
def test_references(text: str, expected: set[str]) -> None:
    assert parse_expression(text).references() == frozenset(expected)


def test_reserved_roots() -> None:
    assert frozenset({"input", "actor", "event", "process", "now"}) == RESERVED_ROOTS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state = 'ready'", True),
        ("flag", True),
        ("nothing", False),
        ("name", False),  # a string is not true
        ("amount", False),
        ("'x' IN tags", False),
    ],
)
def test_holds_only_for_exactly_true(text: str, expected: bool) -> None:
    assert parse_condition(text).holds(SCOPE) is expected


def test_evaluate_repeatedly_gives_the_same_answer() -> None:
    condition = parse_condition("state = 'ready' AND input.amount > 100")
    assert [condition.holds(SCOPE) for _ in range(3)] == [True, True, True]
    other = Scope(document={"state": "ready"}, now=NOW, input={"amount": 100})
    assert condition.holds(other) is False


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("'ready'", 1),
        ("42", 1),
        ("  null", 3),
        ("amount + 1", 1),
        ("len(tags)", 1),
        ("duration('1h')", 1),
        ("now", 1),
    ],
)
def test_condition_must_be_able_to_be_a_bool(text: str, column: int) -> None:
    parse_expression(text)  # fine as an expression
    with pytest.raises(ExpressionError, match="true or false") as caught:
        parse_condition(text)
    assert (caught.value.line, caught.value.column) == (1, column)


def test_a_bare_path_is_a_condition() -> None:
    assert parse_condition("flag").holds(SCOPE)
    assert not parse_condition("name").holds(SCOPE)


# --- errors -------------------------------------------------------------------------

ERRORS = [
    # (text, line, column, fragment of the message)
    ("state =", 1, 8, "unexpected end of input; expected an operand"),
    ("state = ", 1, 9, "expected an operand"),
    ("(state = 'a'", 1, 13, "expected ')'"),
    ("state = 'a')", 1, 12, "unexpected ')'"),
    ("state 'a'", 1, 7, "unexpected \"'a'\"; expected an operator"),
    ("a = b = c", 1, 7, "comparisons do not chain"),
    ("a AND OR b", 1, 7, "unexpected 'OR'; expected an operand"),
    ("in = 1", 1, 1, "unexpected 'in'; expected an operand"),
    ("x = Is", 1, 5, "unexpected 'Is'; expected an operand"),
    ("tags.0", 1, 6, "unexpected '0'; expected a field name"),
    ("a = 1 #", 1, 7, "unexpected character '#'"),
    ('a = "x"', 1, 5, "unexpected character '\"'"),
    ("a = 'open", 1, 5, "unterminated text literal"),
    ("", 1, 1, "empty expression"),
    ("   \n  ", 2, 3, "empty expression"),
    ("x IN ()", 1, 7, "unexpected ')'; expected an operand"),
    ("x IN (1,)", 1, 9, "expected an operand"),
    ("-x", 1, 2, "expected a number after '-'"),
    ("a.", 1, 3, "unexpected end of input"),
    ("1.", 1, 2, "unexpected '.'"),
    ("a ! b", 1, 3, "unexpected character '!'"),
    ("state = 'a'\nAND\namount >", 3, 9, "unexpected end of input; expected an operand"),
    ("state = 'a'\n  AND amount > 1\n  OR (x = 1))", 3, 13, "unexpected ')'"),
    ("a = 1\nb = 2", 2, 1, "unexpected 'b'"),
    ("'multi\nline' = 1 +", 2, 12, "unexpected end of input"),
    ("foo(1)", 1, 1, "unknown function foo()"),
    ("a AND\n  bar(x)", 2, 3, "unknown function bar()"),
    ("len()", 1, 1, "len() takes 1 argument, not 0"),
    ("len(a, b)", 1, 1, "len() takes 1 argument, not 2"),
    ("exists(1)", 1, 1, "exists() takes a path"),
    ("exists(a + 1)", 1, 1, "exists() takes a path"),
    ("1 = duration(48)", 1, 5, "duration() takes a text literal"),
    ("duration(x)", 1, 1, "duration() takes a text literal"),
    ("now > \n  duration('0h')", 2, 3, "not a duration: '0h'"),
    ("duration('1.5h')", 1, 1, "not a duration"),
    ("duration('1h', '2h')", 1, 1, "duration() takes 1 argument, not 2"),
    ("now.date", 1, 1, "'now' is a time and has no fields"),
    ("x = 9007199254740992", 1, 5, "outside the I-JSON range"),
    ("x = -99999999999999999999", 1, 6, "outside the I-JSON range"),
    ("x = 1e400", 1, 5, "out of range"),
    ("true.x", 1, 5, "unexpected '.'"),
    ("null(1)", 1, 5, "unexpected '('"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), ERRORS)
def test_syntax_errors_name_line_and_column(
    text: str, line: int, column: int, fragment: str
) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_expression(text)
    error = caught.value
    assert (error.line, error.column) == (line, column), error.message
    assert fragment in error.message
    assert f"(line {line}, column {column})" in error.message
    assert error.code == "invalid_expression"
    assert isinstance(error, DslError)


def test_non_text_is_refused() -> None:
    with pytest.raises(ExpressionError):
        parse_expression(None)  # type: ignore[arg-type]


# --- limits --------------------------------------------------------------------------

LIMITS = [
    "x = '" + "a" * 4100 + "'",
    "(" * 33 + "x" + ")" * 33,
    "len(" * 33 + "x" + ")" * 33,
    "NOT " * 40 + "x",
    "1" + " + 1" * 40,
    "x" + " AND x" * 256,
    "x IN (" + ", ".join(["1"] * 300) + ")",
    "(" * 10_000,
    "(" * 4000,
    "(" * 33,
]


@pytest.mark.parametrize("text", LIMITS, ids=lambda text: f"{text[:12]}..{len(text)}")
def test_limits_are_refused_at_parse_time(text: str) -> None:
    with pytest.raises(ExpressionLimitError):
        parse_expression(text)


def test_largest_accepted_shapes() -> None:
    assert parse_expression("(" * 32 + "x" + ")" * 32) == parse_expression("x")
    assert parse_expression("NOT " * 31 + "x").evaluate(SCOPE) is True  # NOT null is true
    long_and = parse_expression("x" + " AND x" * 200)  # n-ary: stays shallow
    assert long_and.evaluate(SCOPE) is False
    assert parse_expression("x = '" + "a" * 4000 + "'").evaluate(SCOPE) is False


def test_parentheses_inside_text_do_not_count() -> None:
    text = "x = '" + "(" * 100 + "'"
    assert parse_expression(text).evaluate(SCOPE) is False


def test_expression_type_is_exported() -> None:
    assert isinstance(parse_condition("true"), Expression)
