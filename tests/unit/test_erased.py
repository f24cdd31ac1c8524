"""Replay over erased values: the three-valued reading of expressions agrees with the
engine's two-valued one wherever nothing is erased, never claims a definite answer that
some value of the erased field would contradict, and templates and `mutate` carry a
marker wherever an erased value goes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from charter.dsl import erased
from charter.dsl.erased import Erased, as_value, earliest, marker_pointers, settle
from charter.dsl.expressions import Expression, Scope, parse_condition
from charter.dsl.mutate import apply_action
from charter.dsl.syntax import Node
from charter.dsl.templates import compile_template
from charter.dsl.validate import load_workflow
from tests.unit.test_expression_properties import (
    HEAD,
    IDENTIFIER,
    JSON_VALUES,
    SCOPES,
    SMALL_NAMES,
    paths,
    trees,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MARK: Any = Erased(4)


def _three_valued(scope: Scope) -> Scope:
    return replace(scope, unknowns=[])


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(trees(paths(HEAD, IDENTIFIER)), SCOPES)
def test_without_markers_three_valued_evaluation_is_the_engines(tree: Node, scope: Scope) -> None:
    expression = Expression(tree, "x")
    assert erased.evaluate(tree, scope) == expression._evaluate(scope)
    assert expression.holds(_three_valued(scope)) == expression.holds(scope)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(
    trees(paths(st.sampled_from(["a", "b", "state", "x"]), SMALL_NAMES)),
    SCOPES,
    st.lists(JSON_VALUES, min_size=1, max_size=4),
)
def test_a_definite_answer_over_a_marker_holds_for_every_value_it_may_have_been(
    tree: Node, scope: Scope, candidates: list[Any]
) -> None:
    """`x` (and `input.x`) is erased: whatever the three-valued reading says for sure,
    the engine's own reading says too, whichever value `x` really had."""
    hidden = replace(
        scope,
        document={**scope.document, "x": MARK},
        input={**scope.input, "x": MARK},
        unknowns=[],
    )
    answer = erased.evaluate(tree, hidden)
    if type(answer) is Erased or (isinstance(answer, dict | list) and marker_pointers(answer)):
        return  # unknown, or a container that holds the unknown value as it is
    expression = Expression(tree, "x")
    for value in candidates:
        real = replace(
            scope, document={**scope.document, "x": value}, input={**scope.input, "x": value}
        )
        assert expression._evaluate(real) == answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 'a'", None),
        ("x = 'a' AND state = 'b'", False),  # a false part decides
        ("x = 'a' OR state = 'open'", True),  # a true part decides
        ("x = 'a' OR state = 'b'", None),
        ("NOT x = 'a'", None),
        ("x IS NULL", None),
        ("exists(x.y) AND state = 'open'", None),
        ("state IN ('open', x)", True),
        ("state IN ('b', x)", None),
        ("len(x) > 3", None),
    ],
)
def test_three_valued_cases(text: str, expected: bool | None) -> None:
    unknowns: list[str] = []
    scope = Scope(document={"state": "open", "x": MARK}, now=NOW, unknowns=unknowns)
    condition = parse_condition(text)
    holds = condition.holds(scope)
    if expected is None:
        assert holds is True  # accepted: it was accepted with the real value
        assert unknowns == [text]
    else:
        assert holds is expected
        assert unknowns == []


def test_a_look_alike_value_is_data() -> None:
    scope = Scope(document={"x": {"erased": True}}, now=NOW, unknowns=[])
    assert parse_condition("x = 'a'").holds(scope) is False
    assert scope.unknowns == []


def test_templates_erase_whatever_reads_a_marker() -> None:
    scope = Scope(document={"n": 1}, now=NOW, input={"name": MARK, "city": "Paris"}, unknowns=[])
    render: Any = compile_template("{{ input.name }}").render
    assert render(scope) == MARK
    assert compile_template("Dear {{ input.name }} of {{ input.city }}").render(scope) == MARK
    assert compile_template("{{ input.city }}").render(scope) == "Paris"
    rendered = compile_template({"to": "{{ input.name }}", "n": "{{ n }}"}).render(scope)
    assert rendered == {"to": MARK, "n": 1}
    # Outside replay a template never sees a marker, and renders as always.
    plain = Scope(document={}, now=NOW, input={"name": "Ada"})
    assert compile_template("Dear {{ input.name }}").render(plain) == "Dear Ada"


WORKFLOW = load_workflow(
    {
        "dsl": 2,
        "states": ["s"],
        "roles": ["r"],
        "actions": {
            "go": {"type": "create", "role": "r", "to": "s"},
            "edit": {
                "type": "update",
                "role": "r",
                "from": "*",
                "mutate": {
                    "$set": {"name": "{{ input.name }}", "profile.city": "{{ input.city }}"},
                    "$inc": {"total": "{{ input.amount }}"},
                    "$push": {"names": "{{ input.name }}"},
                    "$merge": {"extra": "{{ input.more }}"},
                },
            },
        },
    }
)


def _edit(document: dict[str, Any], input_: dict[str, Any]) -> dict[str, Any]:
    scope = Scope(document=document, now=NOW, input=input_, unknowns=[])
    return apply_action(WORKFLOW, WORKFLOW.action("edit"), document, scope).new_document


def test_mutate_carries_markers() -> None:
    before = {"state": "s", "total": 3, "names": ["Bo"], "extra": {"k": 1}}
    after = _edit(before, {"name": MARK, "city": "Paris", "amount": MARK, "more": MARK})
    assert after["name"] == MARK
    assert after["total"] == MARK  # a sum with an erased term
    assert after["names"] == ["Bo", MARK]
    assert after["extra"] == MARK  # which keys a merge set is unknown
    assert after["profile"] == {"city": "Paris"}
    # Writing into, adding to or merging into an erased value leaves it erased.
    again = _edit(
        {"state": "s", "total": as_value(Erased(2)), "names": MARK, "extra": MARK, "profile": MARK},
        {"name": "Cy", "city": "Rome", "amount": 5, "more": {"k": 2}},
    )
    assert again["total"] == Erased(2)
    assert again["names"] == MARK
    assert again["extra"] == MARK
    assert again["profile"] == MARK


def test_earliest_settle_and_pointers() -> None:
    assert earliest(1, Erased(9), Erased(3)) == Erased(3)
    assert earliest(1, "a") is None
    document: Any = {"a": Erased(3), "b": [Erased(7), 1], "c": {"d~/e": Erased(erased.WITHHELD)}}
    assert settle(document, 3) == {"a": {"erased": True}, "b": [Erased(7), 1],
                                   "c": {"d~/e": Erased(erased.WITHHELD)}}  # fmt: skip
    assert settle(document) == {"a": {"erased": True}, "b": [{"erased": True}, 1],
                                "c": {"d~/e": {"withheld": True}}}  # fmt: skip
    assert marker_pointers(document) == ["/a", "/b/0", "/c/d~0~1e"]
