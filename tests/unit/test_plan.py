"""Plans: validation, templates in step inputs, and the allowlist/limits policy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from charter.automations.plan import answer_condition, parse_plan, parse_policy
from charter.core import ijson
from charter.core.errors.automations import InvalidPlan
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


def test_a_step_may_opt_in_to_retrying_target_answers() -> None:
    raw: JsonObject = {
        "id": "s",
        "actionId": "http.request",
        "input": {},
        "retry": {"on": ["http_429"]},
    }
    [step] = parse_plan({"version": 1, "steps": [raw]}).steps
    assert step.retries("http_429")
    assert not step.retries("http_5xx")
    assert not step.retries(None)
    assert step.to_json() == raw  # stored in the snapshot as given
    [plain] = parse_plan(_plan({})).steps
    assert not plain.retries("http_5xx")
    assert "retry" not in plain.to_json()


@pytest.mark.parametrize(
    ("retry", "problems"),
    [
        (None, ['/steps/0/retry: must be an object like {"on": ["http_5xx"]}']),
        (["http_5xx"], ['/steps/0/retry: must be an object like {"on": ["http_5xx"]}']),
        ({}, ["/steps/0/retry/on: must be a non-empty list of ['http_5xx', 'http_429']"]),
        ({"on": []}, ["/steps/0/retry/on: must be a non-empty list of ['http_5xx', 'http_429']"]),
        (
            {"on": "http_5xx"},
            ["/steps/0/retry/on: must be a non-empty list of ['http_5xx', 'http_429']"],
        ),
        (
            {"on": ["http_5xx"], "attempts": 3},
            ["/steps/0/retry: unknown keys ['attempts']"],
        ),
        (
            {"on": ["http_500", 5]},
            [
                "/steps/0/retry/on/0: unknown condition 'http_500' (known: http_5xx, http_429)",
                "/steps/0/retry/on/1: unknown condition 5 (known: http_5xx, http_429)",
            ],
        ),
        (
            {"on": ["http_429", "http_5xx", "http_429"]},
            ["/steps/0/retry/on/2: duplicate condition 'http_429'"],
        ),
    ],
)
def test_bad_retry_values_are_plan_problems(retry: JsonValue, problems: list[str]) -> None:
    step: JsonObject = {"id": "s", "actionId": "http.request", "input": {}, "retry": retry}
    with pytest.raises(InvalidPlan) as info:
        parse_plan({"version": 1, "steps": [step]})
    assert info.value.context["problems"] == problems


def test_answer_conditions() -> None:
    assert [answer_condition(s) for s in (429, 500, 503, 599)] == [
        "http_429",
        "http_5xx",
        "http_5xx",
        "http_5xx",
    ]
    assert [answer_condition(s) for s in (200, 400, 404, 428, 600)] == [None] * 5


def test_the_plans_and_steps_in_docs_machines_md_are_valid() -> None:
    text = (Path(__file__).parents[2] / "docs" / "machines.md").read_text()
    documents = [
        ijson.loads(block) for block in re.findall(r"^```json\n(.*?)^```", text, re.M | re.S)
    ]
    checked = 0
    for document in documents:
        assert isinstance(document, dict)
        if "actionId" in document:  # a single step
            document = {"version": 1, "steps": [document]}
        if "steps" in document:
            parse_plan({k: document[k] for k in ("version", "steps")})
            checked += 1
    assert checked >= 3
