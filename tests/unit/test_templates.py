"""Templates (docs/dsl.md): whole values, interpolation, structures and problems."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from charter.core.errors.workflows import DslError, TemplateError
from charter.core.jsontypes import JsonValue
from charter.dsl.expressions import Scope
from charter.dsl.templates import MAX_TEMPLATE_DEPTH, compile_template, template_problems

SCOPE = Scope(
    document={"state": "draft", "reviews": 2, "tags": ["a", "b"]},
    now=datetime(2026, 1, 1, 12, tzinfo=UTC),
    input={
        "name": "Ada",
        "amount": 150,
        "ratio": 0.5,
        "ok": True,
        "note": None,
        "list": [1, "x", None, {"k": "é"}],
        "obj": {"b": 1, "a": [True]},
        "due": "2026-02-01T00:00:00Z",
    },
    event={"hash": "ab" * 32, "actor": "cd" * 32, "at": "2026-01-01T12:00:00.000Z"},
    process={"id": "customer-1"},
)


def _render(value: JsonValue) -> JsonValue:
    return compile_template(value).render(SCOPE)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ input.name }}", "Ada"),
        ("{{input.name}}", "Ada"),
        ("{{   input.amount\n}}", 150),
        ("{{ input.ratio }}", 0.5),
        ("{{ input.ok }}", True),
        ("{{ input.note }}", None),
        ("{{ input.missing }}", None),
        ("{{ input.list }}", [1, "x", None, {"k": "é"}]),
        ("{{ input.obj }}", {"b": 1, "a": [True]}),
        ("{{ reviews + 1 }}", 3),
        ("{{ state = 'draft' }}", True),
        ("{{ now }}", "2026-01-01T12:00:00.000Z"),
        ("{{ now + duration('1d') }}", "2026-01-02T12:00:00.000Z"),
        ("{{ input.due - now }}", 2_635_200),
        ("{{ event.hash }}", "ab" * 32),
        ("{{ process.id }}", "customer-1"),
        ("{{ 'a}}b' }}", "a}}b"),
    ],
)
def test_whole_template_keeps_the_json_type(template: str, expected: JsonValue) -> None:
    result = _render(template)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Hello {{ input.name }}!", "Hello Ada!"),
        ("{{ input.name }} ", "Ada "),
        (" {{ input.name }}", " Ada"),
        ("[{{ input.note }}]", "[]"),
        ("n={{ input.amount }}", "n=150"),
        ("r={{ input.ratio }}", "r=0.5"),
        ("ok={{ input.ok }}/{{ NOT input.ok }}", "ok=true/false"),
        ("l={{ input.list }}", 'l=[1,"x",null,{"k":"é"}]'),
        ("o={{ input.obj }}", 'o={"b":1,"a":[true]}'),
        ("at {{ now }}", "at 2026-01-01T12:00:00.000Z"),
        ("{{ input.name }}{{ input.amount }}", "Ada150"),
        ("{{ input.name }} and {{ state }}", "Ada and draft"),
        ("{{ input.note }}{{ input.note }}", ""),
        ("x }} y", "x }} y"),
        ("{{ 'it''s' }} ok", "it's ok"),
        ("{{ 'a}}b' }}c", "a}}bc"),
        ("100% {{ 'sure' }} }}", "100% sure }}"),
    ],
)
def test_interpolation_writes_text(template: str, expected: str) -> None:
    assert _render(template) == expected


@pytest.mark.parametrize("constant", ["plain", "", "{ single }", "}} {", 0, 1.5, True, None])
def test_constants_render_unchanged(constant: JsonValue) -> None:
    assert _render(constant) == constant
    assert compile_template(constant).references() == frozenset()


def test_templates_recurse_into_arrays_and_objects_but_not_keys() -> None:
    template: JsonValue = {
        "name": "{{ input.name }}",
        "{{ input.name }}": "key stays",
        "nested": {
            "list": ["{{ input.amount }}", "n{{ input.amount }}", 3, None, {"k": "{{ now }}"}]
        },
        "empty": {},
        "none": [],
    }
    assert _render(template) == {
        "name": "Ada",
        "{{ input.name }}": "key stays",
        "nested": {"list": [150, "n150", 3, None, {"k": "2026-01-01T12:00:00.000Z"}]},
        "empty": {},
        "none": [],
    }


def test_each_render_returns_fresh_containers() -> None:
    template = compile_template({"list": [1, {"a": 2}], "value": "{{ input.name }}"})
    first, second = template.render(SCOPE), template.render(SCOPE)
    assert first == second
    assert isinstance(first, dict)
    assert isinstance(second, dict)
    assert first is not second
    assert first["list"] is not second["list"]


def test_references_collect_every_placeholder() -> None:
    template = compile_template(
        {"a": "{{ input.name }}", "b": ["x {{ event.hash }} {{ now }}", {"c": "{{ state }}"}]}
    )
    assert template.references() == frozenset({"input.name", "event.hash", "now", "state"})


def test_equality_follows_the_value() -> None:
    assert compile_template({"a": "{{ x }}", "b": 1}) == compile_template({"b": 1, "a": "{{ x }}"})
    assert hash(compile_template(["{{ x }}"])) == hash(compile_template(["{{ x }}"]))
    assert compile_template(1) != compile_template(True)
    assert compile_template("{{ x }}") != compile_template("{{ y }}")


PROBLEMS = [
    ("{{ }}", [("", "empty placeholder")]),
    ("{{}}", [("", "empty placeholder")]),
    ("{{ x = }}", [("", "unexpected end of input; expected an operand")]),
    ("a {{ x", [("", "is never closed")]),
    ("{{ 'a}} ", [("", "is never closed")]),
    ("{{ foo(1) }}", [("", "unknown function foo()")]),
    ("{{ duration('0s') }}", [("", "not a duration")]),
    ("ok {{ x }} then {{ ) }}", [("", "at character 17: unexpected ')'")]),
    ("{{ " + "(" * 40 + "x" + ")" * 40 + " }}", [("", "nested more than")]),
]


@pytest.mark.parametrize(("template", "expected"), PROBLEMS)
def test_problems_of_a_string(template: str, expected: list[tuple[str, str]]) -> None:
    problems = template_problems(template)
    assert [pointer for pointer, _ in problems] == [pointer for pointer, _ in expected]
    for (_, message), (_, fragment) in zip(problems, expected, strict=True):
        assert fragment in message


def test_every_problem_is_reported_with_its_pointer() -> None:
    value: JsonValue = {
        "good": "{{ input.name }}",
        "bad": "{{ = }}",
        "list": ["fine", "{{ x IN () }}", {"deep": ["{{ len() }}"]}],
        "a/b": "{{ ) }}",
        "m~n": "x {{ y",
        "two": "{{ ( }} and {{ ] }}",
    }
    problems = template_problems(value)
    assert [pointer for pointer, _ in problems] == [
        "/bad",
        "/list/1",
        "/list/2/deep/0",
        "/a~1b",
        "/m~0n",
        "/two",
        "/two",
    ]
    with pytest.raises(TemplateError) as caught:
        compile_template(value)
    error = caught.value
    assert error.problems == problems
    assert isinstance(error, DslError)
    assert error.code == "invalid_template"
    assert error.to_dict()["problems"] == [{"pointer": p, "message": m} for p, m in problems]


def test_valid_values_have_no_problems() -> None:
    assert template_problems({"a": ["{{ x }}", "y {{ z }}"], "b": 1}) == []


def test_excessive_nesting_is_a_problem_not_a_recursion_error() -> None:
    value: JsonValue = "{{ x }}"
    for _ in range(5_000):
        value = [value]
    problems = template_problems(value)
    assert len(problems) == 1
    pointer, message = problems[0]
    assert pointer == "/0" * (MAX_TEMPLATE_DEPTH + 1)
    assert f"deeper than {MAX_TEMPLATE_DEPTH}" in message


def test_interpolating_a_deep_value_does_not_exhaust_the_stack() -> None:
    deep: JsonValue = 1
    for _ in range(20_000):
        deep = [deep]
    scope = Scope(document={"deep": deep}, now=SCOPE.now)
    text = compile_template("v={{ deep }}").render(scope)
    assert text == "v=" + "[" * 20_000 + "1" + "]" * 20_000
