"""Scenario files are read strictly (docs/testing.md): every problem is reported with its
file and JSON pointer, and what `expect` compares is said in one sentence per difference."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.core.unset import UNSET
from charter.testing.expectations import Expectation, Observed, mismatches, same_json
from charter.testing.spec import Act, Advance, Expect, SpecError, conflicts, load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ACTORS = {"alice": ["customer"], "ann": ["analyst"]}


def write_spec(tmp_path: Path, doc: Any, name: str = "case.scenario.json") -> Path:
    shutil.copy(EXAMPLES / "onboarding.json", tmp_path / "onboarding.json")
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def spec_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "workflow": "onboarding.json",
        "start": "2026-06-18T10:00:00Z",
        "actors": ACTORS,
        "steps": [{"act": "alice", "action": "open", "input": {"name": "Ada"}}],
    }
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def problems(tmp_path: Path, doc: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as refused:
        load_spec(write_spec(tmp_path, doc))
    assert all(p.file.endswith("case.scenario.json") for p in refused.value.problems)
    assert refused.value.code == "malformed"
    return [(p.pointer, p.message) for p in refused.value.problems]


def test_a_spec_is_read_into_its_steps(tmp_path: Path) -> None:
    steps = [
        {"act": "alice", "action": "open", "input": {"name": "Ada"}, "process": "case-1"},
        {"act": "ann", "action": "approve", "expect_error": "wrong_state"},
        {"advance": "48h"},
        {"expect": {"state": "escalated", "data": {"escalation": "screening-sla"},
                    "timers": ["periodic-review"], "queue": [], "events": 4,
                    "last_error": None}},
        {"expect": {"events": ["open"], "process": "case-1", "last_error": "wrong_state"}},
    ]  # fmt: skip
    spec = load_spec(write_spec(tmp_path, spec_doc(steps=steps, process="main-1")))
    assert spec.process == "main-1"
    assert spec.actors == {"alice": ("customer",), "ann": ("analyst",)}
    assert spec.workflow.file == tmp_path / "onboarding.json"
    act, refused, advance, expect, other = spec.steps
    assert act == Act("/steps/0", "alice", "open", {"name": "Ada"}, "case-1")
    assert isinstance(refused, Act)
    assert refused.expect_error == "wrong_state"
    assert refused.input == {}
    assert advance == Advance("/steps/2", "48h", timedelta(hours=48))
    assert isinstance(expect, Expect)
    assert expect.expectation == Expectation(
        state="escalated",
        data={"escalation": "screening-sla"},
        timers=frozenset({"periodic-review"}),
        queue=(),
        events=4,
        last_error=None,
    )
    assert isinstance(other, Expect)
    assert other.expectation.events == ("open",)
    assert other.expectation.process == "case-1"


def test_start_is_optional(tmp_path: Path) -> None:
    assert load_spec(write_spec(tmp_path, spec_doc(start=None))).start is None


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("[1]", [("", "a scenario file is a JSON object")]),
        ('{"a": 1, "a": 2}', [("", "not I-JSON: duplicate object key 'a'")]),
        (
            {"steps": [{"advance": "1h"}]},
            [("", "missing 'actors'"), ("", "missing 'workflow'")],
        ),
        (
            spec_doc(extra=1),
            [
                (
                    "/extra",
                    "unknown key 'extra' (allowed: actors, description, process, "
                    "start, steps, workflow, workflows)",
                )
            ],
        ),
        (
            spec_doc(workflow=3),
            [
                (
                    "/workflow",
                    "must be a string (the path of a workflow file, relative to this file)",
                )
            ],
        ),
        (spec_doc(start="tomorrow"), [("/start", "not an RFC 3339 timestamp: 'tomorrow'")]),
        (
            spec_doc(process="no spaces"),
            [("/process", "must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}")],
        ),
        (spec_doc(actors=[]), [("/actors", "must be an object: actor id → list of roles")]),
        (spec_doc(actors={"alice": "customer"}), [("/actors/alice", "must be a list of roles")]),
        (
            spec_doc(actors={"alice": ["customer", "clerk"]}),
            [
                (
                    "/actors/alice/1",
                    "unknown role 'clerk': the workflows declare "
                    "['analyst', 'customer', 'manager']",
                )
            ],
        ),
        (
            spec_doc(actors={"alice": ["AUTOMATION"]}),
            [("/actors/alice/0", "AUTOMATION is held by the automation actor alone")],
        ),
        (
            spec_doc(actors={"automation": []}, steps=[{"advance": "1h"}]),
            [
                (
                    "/actors/automation",
                    "the automation actor is the scenario's own: it fires "
                    "timers and automatic actions",
                )
            ],
        ),
        (spec_doc(steps=[]), [("/steps", "must be a non-empty list of steps")]),
        (
            spec_doc(steps=[{"advance": "1h", "expect": {"state": "x"}}]),
            [
                (
                    "/steps/0",
                    'a step has exactly one of "act", "advance" and "expect" '
                    "(found advance, expect)",
                )
            ],
        ),
        (
            spec_doc(steps=[{"act": "bob", "action": "open"}]),
            [("/steps/0/act", "unknown actor 'bob': /actors declares ['alice', 'ann']")],
        ),
        (
            spec_doc(steps=[{"act": "alice", "action": "open", "inputs": {}}]),
            [
                (
                    "/steps/0/inputs",
                    "unknown key 'inputs' (allowed: act, action, expect_error, input, process)",
                )
            ],
        ),
        (
            spec_doc(steps=[{"act": "alice", "action": "open", "input": []}]),
            [("/steps/0/input", "must be an object (the event's input)")],
        ),
        (
            spec_doc(steps=[{"act": "alice", "action": "open", "expect_error": "nope"}]),
            [("/steps/0/expect_error", "unknown error code 'nope' (docs/design.md lists them)")],
        ),
        (spec_doc(steps=[{"act": "alice"}]), [("/steps/0", "missing 'action'")]),
        (
            spec_doc(steps=[{"advance": "2 days"}]),
            [
                (
                    "/steps/0/advance",
                    "not a duration: '2 days' (expected <integer><unit>: a "
                    "positive whole number then one of s m h d w y, e.g. 48h)",
                )
            ],
        ),
        (
            spec_doc(steps=[{"expect": {}}]),
            [
                (
                    "/steps/0/expect",
                    "expects nothing: name state, data, timers, queue, events or last_error",
                )
            ],
        ),
        (
            spec_doc(steps=[{"expect": {"state": "draft", "status": "x"}}]),
            [
                (
                    "/steps/0/expect/status",
                    "unknown key 'status' (allowed: data, events, "
                    "last_error, process, queue, state, timers)",
                )
            ],
        ),
        (
            spec_doc(steps=[{"expect": {"data": ["name"]}}]),
            [
                (
                    "/steps/0/expect",
                    "expects nothing: name state, data, timers, queue, events or last_error",
                ),
                ("/steps/0/expect/data", "must be an object (matched as a subset of the data)"),
            ],
        ),
        (
            spec_doc(steps=[{"expect": {"timers": ["a", "a"]}}]),
            [("/steps/0/expect/timers", "lists a name twice")],
        ),
        (
            spec_doc(steps=[{"expect": {"timers": "a"}}]),
            [
                (
                    "/steps/0/expect",
                    "expects nothing: name state, data, timers, queue, events or last_error",
                ),
                ("/steps/0/expect/timers", "must be a list of names"),
            ],
        ),
        (
            spec_doc(steps=[{"expect": {"events": -1}}]),
            [("/steps/0/expect/events", "a count of events is not negative")],
        ),
        (
            spec_doc(steps=[{"expect": {"events": True}}]),
            [
                (
                    "/steps/0/expect",
                    "expects nothing: name state, data, timers, queue, events or last_error",
                ),
                ("/steps/0/expect/events", "must be a list of names or a count"),
            ],
        ),
        (
            spec_doc(steps=[{"expect": {"last_error": 3}}]),
            [("/steps/0/expect/last_error", "must be a string (an error code)")],
        ),
    ],
)
def test_malformed_specs_name_the_pointer(
    tmp_path: Path, doc: Any, expected: list[tuple[str, str]]
) -> None:
    assert problems(tmp_path, doc) == sorted(expected)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    doc = spec_doc(
        actors={"alice": ["customer"], "bo b": []},
        steps=[{"act": "carol", "action": "open"}, {"advance": "soon"}, {"wait": 1}],
    )
    assert [pointer for pointer, _ in problems(tmp_path, doc)] == [
        "/actors/bo b",
        "/steps/0/act",
        "/steps/1/advance",
        "/steps/2",
    ]


def test_the_workflow_file_must_exist_and_be_valid(tmp_path: Path) -> None:
    assert problems(tmp_path, spec_doc(workflow="missing.json")) == [
        ("/workflow", "cannot read missing.json: No such file or directory")
    ]
    (tmp_path / "broken.json").write_text(json.dumps({"dsl": 2, "states": [], "roles": []}))
    found = problems(tmp_path, spec_doc(workflow="broken.json"))
    assert found
    assert all(pointer == "/workflow" for pointer, _ in found)
    assert found[0][1].startswith("broken.json is not a valid workflow: ")


def test_more_workflows_are_named_by_path(tmp_path: Path) -> None:
    doc = spec_doc(workflows={"kyc/person": "onboarding.json", "bad path": "onboarding.json"})
    assert problems(tmp_path, doc) == [
        ("/workflows/bad path", "a workflow path is names joined by '/' "
                                "([A-Za-z0-9][A-Za-z0-9._:-]{0,127})"),
    ]  # fmt: skip
    spec = load_spec(write_spec(tmp_path, spec_doc(workflows={"kyc/person": "onboarding.json"})))
    assert spec.workflows["kyc/person"].file == tmp_path / "onboarding.json"


def test_two_files_giving_one_path_two_definitions_conflict(tmp_path: Path) -> None:
    first = load_spec(
        write_spec(tmp_path, spec_doc(workflows={"kyc": "onboarding.json"}), "a.json")
    )
    other = json.loads((EXAMPLES / "onboarding.json").read_text()) | {"description": "changed"}
    (tmp_path / "other.json").write_text(json.dumps(other))
    second = load_spec(write_spec(tmp_path, spec_doc(workflows={"kyc": "other.json"}), "b.json"))
    assert conflicts([first, first]) == []
    [found] = conflicts([first, second])
    assert (found.file, found.pointer) == (second.file, "/workflows/kyc")
    assert found.message == f"{first.file} deploys another definition at 'kyc' in the same run"


def test_the_shipped_scenarios_are_well_formed() -> None:
    files = sorted((EXAMPLES / "scenarios").glob("*.scenario.json"))
    assert len(files) >= 4
    for path in files:
        assert load_spec(path).steps


# --- what expect compares ----------------------------------------------------------------

OBSERVED = Observed(
    state="escalated",
    data={"name": "Ada", "escalation": "screening-sla", "reviews": 2, "meta": {"tier": 1}},
    timers=frozenset({"periodic-review"}),
    queue=("start_screening",),
    events=("open", "submit_onboarding"),
    last_error="wrong_state",
)


@pytest.mark.parametrize(
    ("expectation", "message"),
    [
        (Expectation(state="active"), 'expected state "active", got "escalated"'),
        (Expectation(data={"reviews": 3}), 'expected data.reviews to be 3, got 2'),
        (Expectation(data={"score": 1}), "expected data.score to be 1, got no such field"),
        (Expectation(data={"meta": {"tier": 2}}), "expected data.meta.tier to be 2, got 1"),
        (Expectation(data={"name": {"first": "Ada"}}),
         'expected data.name to be an object, got "Ada"'),
        (Expectation(data={"reviews": True}), "expected data.reviews to be true, got 2"),
        (Expectation(timers=frozenset()), "expected timers [], got [periodic-review]"),
        (Expectation(queue=()), "expected queue [], got [start_screening]"),
        (Expectation(events=3), "expected 3 events, got 2: [open, submit_onboarding]"),
        (Expectation(events=("open",)), "expected events [open], got [open, submit_onboarding]"),
        (Expectation(last_error=None), 'expected last error none, got "wrong_state"'),
        (Expectation(last_error="forbidden_role"),
         'expected last error "forbidden_role", got "wrong_state"'),
    ],
)  # fmt: skip
def test_each_expectation_says_what_it_expected_and_got(
    expectation: Expectation, message: str
) -> None:
    assert mismatches(expectation, OBSERVED) == [message]


def test_what_holds_is_no_mismatch() -> None:
    holds = Expectation(
        state="escalated",
        data={"reviews": 2.0, "meta": {}},
        timers=frozenset({"periodic-review"}),
        queue=("start_screening",),
        events=2,
        last_error="wrong_state",
    )
    assert mismatches(holds, OBSERVED) == []
    assert mismatches(Expectation(events=("open", "submit_onboarding")), OBSERVED) == []
    assert Expectation().last_error is UNSET


def test_json_equality_keeps_booleans_apart_from_numbers() -> None:
    assert same_json(1, 1.0)
    assert not same_json(True, 1)
    assert not same_json(0, False)
    assert same_json([1, {"a": None}], [1.0, {"a": None}])
    assert not same_json({"a": 1}, {"a": 1, "b": 2})
    assert not same_json("1", 1)
