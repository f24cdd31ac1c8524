"""The workflow model built by load_workflow: fields, defaults and the engine's helpers."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import pytest

from charter.core.errors import InvalidInput, UnknownAction
from charter.dsl.expressions import parse_condition
from charter.dsl.model import AUTOMATION, AutoSpec, FieldOp, Workflow
from charter.dsl.templates import compile_template
from charter.dsl.validate import load_workflow

EXAMPLE = Path(__file__).parents[2] / "examples" / "onboarding.json"


@pytest.fixture(scope="module")
def onboarding() -> Workflow:
    return load_workflow(json.loads(EXAMPLE.read_text()))


def test_top_level_fields(onboarding: Workflow) -> None:
    assert onboarding.dsl == 2
    assert onboarding.states[0] == "draft"
    assert onboarding.roles == ("customer", "analyst", "manager", AUTOMATION)
    assert list(onboarding.actions) == [
        "open",
        "submit_onboarding",
        "start_screening",
        "escalate_review",
        "start_review",
        "approve",
        "offboard",
    ]


def test_action_fields(onboarding: Workflow) -> None:
    start = onboarding.action("start_screening")
    assert start.type == "transition"
    assert start.roles == (AUTOMATION,)
    assert start.from_states == ("ready_for_screening",)
    assert start.to == "screening_started"
    assert start.when == parse_condition("state = 'ready_for_screening'")
    assert start.auto == AutoSpec(data=compile_template({}))
    assert start.mutate.set == (
        FieldOp("screening_status", ("screening_status",), compile_template("started")),
    )
    deadline, review = start.schedule
    assert (deadline.id, deadline.action, deadline.delay) == (
        "screening-deadline",
        "escalate_review",
        timedelta(hours=48),
    )
    assert (review.id, review.every, review.delay, review.at) == (
        "periodic-review",
        timedelta(days=365),
        None,
        None,
    )
    assert onboarding.action("offboard").cancel == ("periodic-review", "screening-deadline")
    assert onboarding.action("approve").from_states == ("screening_started", "escalated")


def test_star_and_create_have_no_from_states(onboarding: Workflow) -> None:
    assert onboarding.action("start_review").from_states is None
    assert onboarding.action("start_review").to is None
    assert onboarding.action("open").from_states is None


def test_type_defaults_to_transition() -> None:
    workflow = load_workflow(
        {
            "dsl": 2,
            "states": ["a", "b"],
            "roles": ["r"],
            "actions": {
                "new": {"type": "create", "role": "r", "to": "a"},
                "go": {"role": ["r"], "from": "a", "to": "b"},
            },
        }
    )
    assert workflow.action("go").type == "transition"
    assert workflow.action("go").roles == ("r",)


def test_allows_role(onboarding: Workflow) -> None:
    approve = onboarding.action("approve")
    assert approve.allows_role(["analyst"])
    assert approve.allows_role(["customer", "analyst"])
    assert not approve.allows_role(["customer"])
    assert not approve.allows_role([])
    assert not onboarding.action("start_screening").allows_role(["analyst"])


def test_allows_state(onboarding: Workflow) -> None:
    approve = onboarding.action("approve")
    assert approve.allows_state("escalated")
    assert not approve.allows_state("draft")
    assert not approve.allows_state(None)
    review = onboarding.action("start_review")
    assert all(review.allows_state(s) for s in onboarding.states)
    assert not review.allows_state(None)
    create = onboarding.action("open")
    assert create.allows_state(None)
    assert not create.allows_state("draft")


def test_create_and_auto_actions(onboarding: Workflow) -> None:
    assert [a.name for a in onboarding.create_actions()] == ["open"]
    assert [a.name for a in onboarding.auto_actions()] == ["start_screening"]
    assert onboarding.schedule_ids() == {"screening-deadline", "periodic-review"}


def test_unknown_action(onboarding: Workflow) -> None:
    with pytest.raises(UnknownAction, match="no action 'close'"):
        onboarding.action("close")


def test_check_input(onboarding: Workflow) -> None:
    action = onboarding.action("open")
    action.check_input({"name": "Ada"})
    with pytest.raises(InvalidInput) as caught:
        action.check_input({"nom": "Ada"})
    assert caught.value.context["problems"] == [
        {"pointer": "", "message": "'name' is a required property"}
    ]
    onboarding.action("approve").check_input({"anything": 1})


def test_check_input_lists_every_problem_with_formats() -> None:
    workflow = load_workflow(
        {
            "dsl": 2,
            "states": ["a"],
            "roles": ["r"],
            "actions": {
                "new": {
                    "type": "create",
                    "role": "r",
                    "to": "a",
                    "input": {
                        "type": "object",
                        "properties": {
                            "due": {"type": "string", "format": "date-time"},
                            "n": {"type": "integer", "minimum": 1},
                        },
                    },
                }
            },
        }
    )
    with pytest.raises(InvalidInput) as caught:
        workflow.action("new").check_input({"due": "tomorrow", "n": 0})
    assert caught.value.context["problems"] == [
        {"pointer": "/due", "message": "'tomorrow' is not a 'date-time'"},
        {"pointer": "/n", "message": "0 is less than the minimum of 1"},
    ]
    # The message names every problem too, for clients that show only the message.
    assert caught.value.message == (
        "input /due: 'tomorrow' is not a 'date-time'; /n: 0 is less than the minimum of 1"
    )


def test_the_model_is_frozen(onboarding: Workflow) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        onboarding.action("open").to = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        onboarding.actions["x"] = onboarding.action("open")  # type: ignore[index]
