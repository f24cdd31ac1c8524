"""Plans: validation, templates in step inputs, and the allowlist/limits policy."""

from __future__ import annotations

import pytest

from charter.automations.plan import InvalidPlan, parse_plan, parse_policy
from charter.core.jsontypes import JsonObject, JsonValue


def _plan(*inputs: JsonValue) -> JsonObject:
    return {
        "version": 1,
        "steps": [
            {"id": f"s{i}", "actionId": "http.request", "input": value}
            for i, value in enumerate(inputs)
        ],
    }


def test_step_inputs_render_run_input_and_earlier_outputs() -> None:
    plan = parse_plan(
        _plan({"url": "https://x.example/{{ input.payload.id }}", "n": "{{ steps.s0.count }}"})
    )
    [step] = plan.steps
    rendered = step.render_input({"payload": {"id": "42"}}, {"s0": {"count": 3}})
    assert rendered == {"url": "https://x.example/42", "n": 3}
    # A missing value is null, never an error; plain values are constants.
    assert step.render_input({}, {}) == {"url": "https://x.example/", "n": None}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            {"x": "{{ event.hash }}"},
            "/steps/0/input: {{ event.hash }} reads neither input nor steps",
        ),
        ({"x": "{{ now }}"}, "/steps/0/input: {{ now }} reads neither input nor steps"),
        ({"x": "{{ input. }}"}, "/steps/0/input/x: "),
        ({"x": ["{{ }}"]}, "/steps/0/input/x/0: "),
    ],
)
def test_bad_templates_are_plan_problems(value: JsonValue, problem: str) -> None:
    with pytest.raises(InvalidPlan) as info:
        parse_plan(_plan(value))
    assert any(p.startswith(problem) for p in info.value.context["problems"]), info.value.context


def test_policy_allows_exact_ids_and_prefixes() -> None:
    policy = parse_policy(["http.*", "charter.submit"], {"stepTimeoutSeconds": 1.5})
    assert policy.allows("http.request")
    assert policy.allows("charter.submit")
    assert not policy.allows("charter.other")
    assert not policy.allows("httpx.request")
    assert policy.step_timeout_seconds == 1.5
    assert parse_policy(None, None).allows("anything.goes")
