"""Workflow warnings (charter.dsl.lint): a cycle of automatic actions without `when`
deploys, but is reported, by `charter workflows validate` and by the deploy API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from charter.cli.main import app
from charter.dsl.lint import workflow_warnings
from charter.dsl.validate import load_workflow

RUNNER = CliRunner()
WIDE = {"COLUMNS": "300"}


def _workflow(**actions: Any) -> dict[str, Any]:
    return {
        "dsl": 2,
        "states": ["a", "b", "c"],
        "roles": ["user", "AUTOMATION"],
        "actions": {
            "open": {"type": "create", "role": "user", "to": "a"},
            # People can reach every state, so none is unreachable.
            "to_b": {"role": "user", "from": "*", "to": "b"},
            "to_c": {"role": "user", "from": "*", "to": "c"},
            **actions,
        },
    }


def _auto(**fields: Any) -> dict[str, Any]:
    return {"role": "AUTOMATION", "auto": True, **fields}


def _warnings(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(w.pointer, w.message) for w in workflow_warnings(load_workflow(doc))]


def test_two_transitions_that_enable_each_other_are_a_cycle() -> None:
    doc = _workflow(
        flip=_auto(**{"from": "a", "to": "b"}),
        flop=_auto(**{"from": "b", "to": "a"}),
        done=_auto(**{"from": "b", "to": "c", "when": "input.x = 1"}),
    )
    [(pointer, message)] = _warnings(doc)
    assert pointer == "/actions/flip/auto"
    assert "flip, flop" in message
    assert "state(s) a, b" in message
    assert "cascade limit" in message


def test_a_longer_cycle_through_three_states_and_a_star_source() -> None:
    doc = _workflow(
        one=_auto(**{"from": "a", "to": "b"}),
        two=_auto(**{"from": "b", "to": "c"}),
        back=_auto(**{"from": "*", "to": "a"}),
    )
    [(pointer, message)] = _warnings(doc)
    assert pointer == "/actions/back/auto"
    assert "back, one, two" in message


def test_two_updates_in_the_same_state_feed_each_other() -> None:
    doc = _workflow(
        ping=_auto(type="update", **{"from": "c"}),
        pong=_auto(type="update", **{"from": "*"}),
        go=_auto(**{"from": "a", "to": "c", "when": "state = 'a' AND input.go = true"}),
    )
    [(pointer, message)] = _warnings(doc)
    assert pointer == "/actions/ping/auto"
    assert "ping, pong" in message
    # `pong` loops on a and b too, but alone there: an action never re-queues itself.
    assert "state(s) c" in message


@pytest.mark.parametrize(
    "actions",
    [
        # One automatic update alone is never re-queued by its own firing.
        {"tick": _auto(type="update", **{"from": "*"})},
        # A `when` guards the cycle: the author decided when it stops.
        {
            "flip": _auto(**{"from": "a", "to": "b"}),
            "flop": _auto(**{"from": "b", "to": "a", "when": "flips < 3"}),
        },
        # A person closes the loop: not automatic.
        {
            "flip": _auto(**{"from": "a", "to": "b"}),
            "back": {"role": "user", "from": "b", "to": "a"},
        },
        # A chain that ends.
        {"one": _auto(**{"from": "a", "to": "b"}), "two": _auto(**{"from": "b", "to": "c"})},
    ],
)
def test_no_warning_without_an_unguarded_automatic_cycle(actions: dict[str, Any]) -> None:
    assert _warnings(_workflow(**actions)) == []


def test_the_shipped_examples_have_no_warnings() -> None:
    for example in (Path(__file__).parents[2] / "examples").glob("*.json"):
        assert _warnings(json.loads(example.read_text())) == [], example


def test_validate_prints_warnings_and_still_exits_0(tmp_path: Path) -> None:
    target = tmp_path / "loop.json"
    target.write_text(
        json.dumps(
            _workflow(
                flip=_auto(**{"from": "a", "to": "b"}), flop=_auto(**{"from": "b", "to": "a"})
            )
        )
    )
    result = RUNNER.invoke(app, ["workflows", "validate", str(target)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert f"{target}: ok" in result.stdout
    assert "workflow warnings" in result.stdout
    assert "/actions/flip/auto" in result.stdout
    assert "1 warning(s)" in result.stdout
