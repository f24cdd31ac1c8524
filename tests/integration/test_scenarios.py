"""Scenario tests (docs/testing.md) on a real PostgreSQL: scenario files passing and
failing with the message of each kind of expectation, `expect_error`, occurrences fired
one by one at their own virtual times, spawned children and several processes,
scenarios sharing a database, and the Python API."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from charter.core.errors import ForbiddenRole, WrongState
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import parse_rfc3339
from charter.db.database import Database
from charter.engine.reads import Reads
from charter.testing import Expectation, Scenario, ScenarioDatabase, ScenarioError
from charter.testing import scenario as scenario_module
from charter.testing.runner import ScenarioResult, run_spec
from charter.testing.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
START = "2026-06-18T10:00:00Z"
ACTORS = {"alice": ["customer"], "ann": ["analyst"], "max": ["manager"]}

YEARLY: JsonObject = {
    "dsl": 2,
    "states": ["active"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "active",
                 "schedule": [{"id": "review", "action": "review", "every": "1y", "count": 3,
                               "data": {}}]},
        "review": {"type": "update", "role": "AUTOMATION", "from": "*",
                   "mutate": {"$inc": {"reviews": 1}, "$push": {"at": "{{ now }}"}}},
    },
}  # fmt: skip
KYC: JsonObject = {
    "dsl": 2,
    "states": ["pending", "cleared"],
    "roles": ["analyst", "AUTOMATION"],
    "actions": {
        "start": {"type": "create", "role": "AUTOMATION", "to": "pending",
                  "mutate": {"$set": {"subject": "{{ input.name }}"}}},
        "clear": {"role": "analyst", "from": "pending", "to": "cleared"},
    },
}  # fmt: skip
PARENT: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "mutate": {"$set": {"name": "{{ input.name }}"}},
                 "spawn": [{"workflow": "tests/kyc", "process": "{{ process.id }}-kyc",
                            "action": "start", "data": {"name": "{{ input.name }}"}}]},
    },
}  # fmt: skip
SOUND_DEADLINE: JsonObject = {
    "dsl": 2,
    "states": ["open", "done"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "deadline", "action": "finish", "in": "1h", "data": {}}]},
        "finish": {"role": "AUTOMATION", "from": "open", "to": "done"},
    },
}  # fmt: skip
# A deadline whose action spawns into a workflow that is not deployed.
BROKEN_DEADLINE: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "deadline", "action": "split", "in": "1h", "data": {}}]},
        "split": {"type": "update", "role": "AUTOMATION", "from": "open",
                  "spawn": [{"workflow": "tests/nowhere", "process": "{{ process.id }}-x",
                             "action": "open", "data": {}}]},
    },
}  # fmt: skip
HOURLY: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "tick", "action": "tick", "every": "1h", "data": {}}]},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*",
                 "mutate": {"$inc": {"ticks": 1}}},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def scenarios(database: Database) -> ScenarioDatabase:
    return ScenarioDatabase(database)


@pytest.fixture
def onboarding_dir(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "onboarding.json", tmp_path / "onboarding.json")
    return tmp_path


def run(
    directory: Path, steps: list[Any], scenarios: ScenarioDatabase, **top: Any
) -> ScenarioResult:
    doc = {"workflow": "onboarding.json", "start": START, "actors": ACTORS, "steps": steps}
    path = directory / "case.scenario.json"
    path.write_text(json.dumps(doc | top))
    return run_spec(load_spec(path, "case.scenario.json"), scenarios)


OPENED = [
    {"act": "alice", "action": "open", "input": {"name": "Ada"}},
    {"act": "alice", "action": "submit_onboarding"},
]


def test_the_shipped_scenarios_pass(scenarios: ScenarioDatabase) -> None:
    files = sorted((EXAMPLES / "scenarios").glob("*.scenario.json"))
    results = [run_spec(load_spec(path), scenarios) for path in files]
    assert [r.line() for r in results] == [f"PASS {path}" for path in files]


def test_a_passing_scenario_reports_its_run(
    onboarding_dir: Path, scenarios: ScenarioDatabase
) -> None:
    steps = [*OPENED, {"advance": "48h"}, {"expect": {"state": "escalated"}}]
    result = run(onboarding_dir, steps, scenarios)
    assert result.passed
    assert (result.steps, result.ran, result.failure) == (4, 4, None)
    assert result.started == "2026-06-18T10:00:00.000Z"
    assert result.ended == "2026-06-20T10:00:00.000Z"
    assert result.process is not None
    assert result.process.startswith("case-")
    assert result.events == {result.process: 4}
    assert result.to_json()["status"] == "pass"


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        ({"state": "escalated"},
         'expected state "escalated", got "screening_started"'),
        ({"data": {"name": "Bob", "screening_status": "started"}},
         'expected data.name to be "Bob", got "Ada"'),
        ({"data": {"escalation": "screening-sla"}},
         'expected data.escalation to be "screening-sla", got no such field'),
        ({"timers": ["screening-deadline"]},
         "expected timers [screening-deadline], got [periodic-review, screening-deadline]"),
        ({"queue": ["start_screening"]}, "expected queue [start_screening], got []"),
        ({"events": 2}, "expected 2 events, got 3: [open, submit_onboarding, start_screening]"),
        ({"events": ["open", "submit_onboarding"]},
         "expected events [open, submit_onboarding], "
         "got [open, submit_onboarding, start_screening]"),
        ({"last_error": "wrong_state"}, 'expected last error "wrong_state", got none'),
        ({"state": "draft", "events": 1},
         'expected state "draft", got "screening_started"; '
         "expected 1 events, got 3: [open, submit_onboarding, start_screening]"),
        ({"process": "elsewhere", "state": "draft"},
         "process 'elsewhere': expected the process to exist, got no such process"),
    ],
)  # fmt: skip
def test_each_failed_expectation_names_the_step_and_the_difference(
    onboarding_dir: Path, scenarios: ScenarioDatabase, expect: JsonObject, message: str
) -> None:
    result = run(onboarding_dir, [*OPENED, {"expect": expect}, {"advance": "1y"}], scenarios)
    assert result.line() == f"FAIL case.scenario.json: step 3: {message}"
    assert result.ran == 3  # the steps after a failure do not run
    assert result.ended == "2026-06-18T10:00:00.000Z"
    assert result.to_json()["failure"] == {"step": 3, "pointer": "/steps/2", "message": message}


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"act": "ann", "action": "approve"},
         "expected ann's approve to be accepted, got wrong_state: "),
        ({"act": "alice", "action": "approve", "expect_error": "wrong_state"},
         "expected alice's approve to be refused with wrong_state, got forbidden_role: "),
        ({"act": "alice", "action": "submit_onboarding", "expect_error": "wrong_state"},
         "expected alice's submit_onboarding to be refused with wrong_state, got accepted"),
        ({"act": "alice", "action": "open", "process": "elsewhere",
          "expect_error": "wrong_state"},
         "expected alice's open on 'elsewhere' to be refused with wrong_state, got "
         "invalid_input: "),
    ],
)  # fmt: skip
def test_acts_are_accepted_or_refused_as_the_step_says(
    onboarding_dir: Path, scenarios: ScenarioDatabase, step: JsonObject, message: str
) -> None:
    result = run(onboarding_dir, [OPENED[0], step], scenarios)
    assert result.failure is not None
    assert result.failure.step == 2
    assert result.failure.message.startswith(message)


def test_an_expected_refusal_passes_and_is_the_last_error(
    onboarding_dir: Path, scenarios: ScenarioDatabase
) -> None:
    steps = [
        OPENED[0],
        {"act": "ann", "action": "approve", "expect_error": "wrong_state"},
        {"expect": {"state": "draft", "events": 1, "last_error": "wrong_state"}},
        {"act": "alice", "action": "approve", "expect_error": "forbidden_role"},
        {"expect": {"last_error": "forbidden_role"}},
    ]
    assert run(onboarding_dir, steps, scenarios).passed


def test_yearly_reviews_fire_one_by_one_at_their_own_times(scenarios: ScenarioDatabase) -> None:
    """`every: 1y`, `count: 3`, five years at once: three reviews, each on its anniversary
    (a worker woken after the five years would fire once, for all of them)."""
    began = time.perf_counter()
    scenario = Scenario(YEARLY, actors={"alice": ["customer"]}, start=START, database=scenarios)
    scenario.act("alice", "open")
    scenario.advance("5y")
    seconds = time.perf_counter() - began
    print(f"five years of yearly reviews: {seconds * 1000:.0f} ms")  # measured, not asserted
    assert scenario.data()["reviews"] == 3
    assert scenario.events() == ["open", "review", "review", "review"]
    assert scenario.timers() == set()
    start = parse_rfc3339(START)
    year = timedelta(days=365)
    expected = [start + year * n for n in (1, 2, 3)]
    fired_at = [
        parse_rfc3339(str(e.envelope["at"]))
        for e in Reads(scenarios.database).events(scenario.process_id)[1:]
    ]
    assert fired_at == expected
    stamps = scenario.data()["at"]
    assert isinstance(stamps, list)
    assert [parse_rfc3339(str(s)) for s in stamps] == expected
    assert scenario.now == start + 5 * year


def test_a_spawn_that_cannot_happen_undoes_only_itself(scenarios: ScenarioDatabase) -> None:
    """docs/automation.md: the batch is fired again event by event, "so that only the
    refused event is undone" — a deadline of another process due at the same time fires."""
    broken = Scenario(BROKEN_DEADLINE, actors={"alice": ["customer"]}, start=START,
                      database=scenarios)  # fmt: skip
    sound = Scenario(SOUND_DEADLINE, actors={"alice": ["customer"]}, start=START,
                     database=scenarios)  # fmt: skip
    for scenario in (broken, sound):
        scenario.act("alice", "open")
    broken.advance("1h")  # both deadlines are due now: one batch
    assert sound.state() == "done"


def test_spawned_children_and_other_processes_are_named(
    tmp_path: Path, scenarios: ScenarioDatabase
) -> None:
    (tmp_path / "parent.json").write_text(json.dumps(PARENT))
    (tmp_path / "kyc.json").write_text(json.dumps(KYC))
    doc: dict[str, Any] = {
        "workflow": "parent.json",
        "workflows": {"tests/kyc": "kyc.json"},
        "process": "case-1",
        "actors": {"alice": ["customer"], "ann": ["analyst"]},
        "steps": [
            {"act": "alice", "action": "open", "input": {"name": "Ada"}},
            {"expect": {"process": "case-1-kyc", "state": "pending", "data": {"subject": "Ada"}}},
            {"act": "ann", "action": "clear", "process": "case-1-kyc"},
            {"expect": {"process": "case-1-kyc", "state": "cleared", "events": ["start", "clear"]}},
            {"act": "alice", "action": "open", "input": {"name": "Bo"}, "process": "case-2"},
            {"expect": {"process": "case-2-kyc", "data": {"subject": "Bo"}}},
            {"expect": {"state": "open", "data": {"name": "Ada"}, "events": 1}},
        ],
    }
    path = tmp_path / "family.scenario.json"
    path.write_text(json.dumps(doc))
    result = run_spec(load_spec(path), scenarios)
    assert result.line() == f"PASS {path}"
    assert result.process == "case-1"
    assert result.events == {"case-1": 1, "case-1-kyc": 2, "case-2": 1, "case-2-kyc": 1}
    doc["process"] = "case-3"
    doc["steps"] = [doc["steps"][0], {"expect": {"process": "case-3-kyc", "state": "cleared"}}]
    path.write_text(json.dumps(doc))
    failed = run_spec(load_spec(path, "family.scenario.json"), scenarios)
    assert failed.line() == (
        "FAIL family.scenario.json: step 2: process 'case-3-kyc': "
        'expected state "cleared", got "pending"'
    )


def test_a_process_of_another_scenario_is_not_touched(
    onboarding_dir: Path, scenarios: ScenarioDatabase
) -> None:
    first = run(onboarding_dir, [OPENED[0]], scenarios, process="shared-name")
    assert first.passed
    second = run(onboarding_dir, [OPENED[0]], scenarios, process="shared-name")
    assert second.line() == (
        "FAIL case.scenario.json: step 1: process 'shared-name' was made by another scenario "
        "of this database: give each scenario's processes names of their own"
    )


def test_work_left_by_another_scenario_does_not_set_the_pace(
    scenarios: ScenarioDatabase,
) -> None:
    """An hourly timer left behind fires only at the times another scenario visits."""
    left = Scenario(HOURLY, actors={"alice": ["customer"]}, start=START, database=scenarios)
    left.act("alice", "open")
    later = Scenario(YEARLY, actors={"alice": ["customer"]}, start=START, database=scenarios)
    later.act("alice", "open")
    later.advance("2y")
    assert later.data()["reviews"] == 2
    # Fired at the two reviews' times and at the end (coalesced), not 17520 times.
    assert left.events().count("tick") <= 3


def test_a_runaway_schedule_stops_the_step(
    scenarios: ScenarioDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scenario_module, "MAX_FIRES_PER_STEP", 20)
    scenario = Scenario(HOURLY, actors={"alice": ["customer"]}, start=START, database=scenarios)
    scenario.act("alice", "open")
    with pytest.raises(ScenarioError, match="more than 20 automated events in one step"):
        scenario.advance("1y")


def test_the_python_api(scenarios: ScenarioDatabase) -> None:
    scenario = Scenario(
        EXAMPLES / "onboarding.json", actors=ACTORS, start=START, database=scenarios
    )
    accepted = scenario.act("alice", "open", {"name": "Ada"})
    assert accepted.process.state == "draft"
    with pytest.raises(WrongState):
        scenario.act("ann", "approve")
    assert scenario.last_error == "wrong_state"
    scenario.act("alice", "submit_onboarding")
    assert scenario.state() == "screening_started"
    assert scenario.timers() == {"screening-deadline", "periodic-review"}
    assert scenario.advance("48h") == datetime(2026, 6, 20, 10, tzinfo=UTC)
    assert scenario.data() == {"name": "Ada", "screening_status": "started",
                               "escalation": "screening-sla"}  # fmt: skip
    assert scenario.events()[-1] == "escalate_review"
    scenario.expect(state="escalated", timers={"periodic-review"}, last_error="wrong_state")
    scenario.expect(Expectation(data={"escalation": "screening-sla"}))
    with pytest.raises(AssertionError, match='expected state "active", got "escalated"'):
        scenario.expect(state="active")
    with pytest.raises(ForbiddenRole):
        scenario.act("alice", "approve")
    with pytest.raises(ScenarioError, match="unknown actor 'zoe'"):
        scenario.act("zoe", "approve")
    with pytest.raises(ScenarioError, match="time only moves forward"):
        scenario.advance(timedelta(0))


def test_a_scenario_without_a_database_makes_its_own() -> None:
    """A throwaway embedded PostgreSQL, gone when the scenario closes."""
    with Scenario(YEARLY, actors={"alice": ["customer"]}, start=START) as scenario:
        scenario.act("alice", "open")
        scenario.advance("1y")
        assert scenario.data()["reviews"] == 1
        directory = Path(str(conninfo_to_dict(scenario.database.database.url)["host"]))
        assert directory.exists()
    assert not directory.exists()


def test_a_database_with_an_automation_actor_is_refused(scenarios: ScenarioDatabase) -> None:
    with pytest.raises(ScenarioError, match="automation actor already"):
        ScenarioDatabase(scenarios.database)
