"""Verification of automated events' provenance (docs/automation.md), offline, over built chains.

Each forgery is signed with the automation key (what a stolen worker key or a rewritten
database could produce), so only the provenance checks can find it; tampered bundles are
edited as an auditor would receive them. Every problem is named by seq and code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from charter.audit.bundle import bundle_json
from charter.audit.evidence import CODES, VerificationReport
from charter.audit.verify_evidence import verify_evidence
from charter.audit.verify_stored import verify_bundle
from charter.cli.main import app
from charter.core import ijson
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonObject
from tests.unit.chains import (
    AUTOMATED_PATH,
    AUTOMATION,
    Chain,
    Signer,
    automated,
    family,
)

KEY = SecretKey(bytes(range(32)))
OTHER = SecretKey(bytes(range(1, 33)))
IMPOSTOR = Signer(OTHER, "automation", ("AUTOMATION",))
RUNNER = CliRunner()

Forge = Callable[[dict[str, Any]], None]


def _file(value: JsonObject) -> Any:
    """The bundle as it reaches an auditor: written as JSON text, read back strictly."""
    return ijson.loads(json.dumps(value, ensure_ascii=False))


def _codes(report: VerificationReport) -> set[tuple[int | None, str]]:
    assert {problem.code for problem in report.problems} <= CODES
    return {(problem.seq, problem.code) for problem in report.problems}


def _opened() -> Chain:
    """open (seq 1, schedules reminder and review) and submit (seq 2, queues tally, screen)."""
    chain = Chain(KEY, "case-f", AUTOMATED_PATH)
    chain.submit("open")
    chain.submit("submit")
    return chain


def _verified(chain: Chain, *causes: Chain) -> set[tuple[int | None, str]]:
    """The problems of `chain`, from its Evidence and from its bundle (they must agree)."""
    direct = verify_evidence(chain.evidence(*causes), replay_state=True)
    offline = verify_bundle(_file(bundle_json(chain.evidence(*causes))), replay=True)
    assert direct == offline
    return _codes(direct)


def _set(key: str, value: Any) -> Forge:
    def forge(meta: dict[str, Any]) -> None:
        meta[key] = value

    return forge


def _drop(key: str) -> Forge:
    def forge(meta: dict[str, Any]) -> None:
        del meta[key]

    return forge


# --- honest automation -------------------------------------------------------------------


def test_every_kind_of_automated_event_verifies_with_its_cause() -> None:
    parent, child = automated(KEY)
    assert _verified(parent) == set()
    assert _verified(child, parent) == set()  # caused by its own genesis: still this chain


def test_the_bundle_lists_the_automation_keys() -> None:
    parent, _ = automated(KEY)
    bundle = _file(bundle_json(parent.evidence()))
    assert bundle["actors"] == {
        "automation": {
            "keys": [
                {
                    "public_key": AUTOMATION.key.public_key_hex,
                    "added_at": "2026-06-18T10:00:00.000Z",
                    "retired_at": None,
                }
            ]
        }
    }


def test_events_without_provenance_are_unaffected_even_without_keys() -> None:
    parent, _, _ = family(KEY)
    bundle = _file(bundle_json(parent.evidence()))
    del bundle["actors"]  # an export written before bundles listed keys
    assert verify_bundle(bundle, replay=True).ok


# --- malformed provenance ---------------------------------------------------------------------

MALFORMED: dict[str, Forge] = {
    "kind-unknown": _set("kind", "manual"),
    "kind-missing": _drop("kind"),
    "field-missing": _drop("scheduled_at"),
    "worker-missing": _drop("worker"),
    "unknown-key": _set("note", "trust me"),
    "auto-field-in-schedule": _set("queued_at", "2026-06-18T10:00:00.000Z"),
    "work_id-not-a-uuid": _set("work_id", "row-1"),
    "work_id-not-canonical": _set("work_id", "{" + "0" * 32 + "}"),
    "hash-uppercase": _set("scheduled_by_event_hash", "A" * 64),
    "actor-short": _set("scheduled_by_actor", "ab" * 16),
    "run_at-not-rfc3339": _set("run_at", "2026-06-19 10:00"),
    "scheduled_at-number": _set("scheduled_at", 1781776800),
    "schedule_id-empty": _set("schedule_id", ""),
    "fired_by_actor": _set("fired_by_actor", "ada"),
    "worker-not-a-string": _set("worker", 7),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_scheduled_provenance_is_named(name: str) -> None:
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"), forge=MALFORMED[name])
    assert _verified(chain) == {(3, "provenance_malformed")}


@pytest.mark.parametrize(
    "forge",
    [_drop("available_state"), _set("available_state", 1), _set("reason", None)],
    ids=["available_state-missing", "available_state-number", "reason-null"],
)
def test_malformed_auto_provenance_is_named(forge: Forge) -> None:
    chain = _opened()
    chain.fire(chain.queue_row(2, "tally"), forge=forge)
    assert _verified(chain) == {(3, "provenance_malformed")}


@pytest.mark.parametrize("value", [None, "scheduled_action", ["x"], 1])
def test_meta_automation_that_is_not_an_object_is_malformed(value: Any) -> None:
    chain = _opened()
    chain.submit("remind", {"meta": {"automation": value}}, signer=AUTOMATION)
    assert _verified(chain) == {(3, "provenance_malformed")}


# --- the actor ------------------------------------------------------------------------------


def test_an_event_signed_by_a_key_that_is_not_the_automation_actors_is_named() -> None:
    # The honest provenance of a real row, fired with another key (the engine would have
    # recorded actor_id `automation` only for an automation key: a forger writes it too).
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"), signer=IMPOSTOR)
    assert _verified(chain) == {(3, "provenance_actor")}


def test_an_event_recorded_for_another_actor_is_named() -> None:
    chain = _opened()
    chain.fire(chain.queue_row(2, "tally"))
    bundle = _file(bundle_json(chain.evidence()))
    bundle["events"][2]["actor_id"] = "ada"
    report = verify_bundle(bundle)
    assert _codes(report) == {(3, "provenance_actor")}
    assert "'ada'" in report.problems[0].message


def test_a_bundle_without_keys_cannot_confirm_its_automated_events_unless_pinned() -> None:
    parent, _ = automated(KEY)
    bundle = _file(bundle_json(parent.evidence()))
    del bundle["actors"]  # an older export: still readable
    report = verify_bundle(bundle)
    assert _codes(report) == {(seq, "provenance_actor") for seq in (3, 4, 5, 6, 7)}
    assert "--automation-key" in report.problems[0].message
    assert verify_bundle(bundle, automation_keys=[AUTOMATION.key.public_key_hex]).ok


def test_a_bundle_listing_no_automation_key_confirms_nothing() -> None:
    parent, _ = automated(KEY)
    bundle = _file(bundle_json(parent.evidence()))
    bundle["actors"] = {}
    assert _codes(verify_bundle(bundle)) == {(seq, "provenance_actor") for seq in range(3, 8)}


def test_a_pinned_key_overrides_the_bundles_own_list() -> None:
    # A forger who re-signs the automated events with their own key and lists that key in
    # the bundle passes unpinned; the auditor's pinned key finds every such event.
    chain = _opened()
    chain.fire(chain.queue_row(2, "tally"), signer=IMPOSTOR)
    chain.fire(chain.scheduled_row(1, "reminder"), signer=IMPOSTOR)
    bundle = _file(bundle_json(chain.evidence()))
    bundle["actors"]["automation"]["keys"][0]["public_key"] = OTHER.public_key_hex
    assert verify_bundle(bundle, replay=True).ok
    pinned = verify_bundle(bundle, automation_keys=[AUTOMATION.key.public_key_hex])
    assert _codes(pinned) == {(3, "provenance_actor"), (4, "provenance_actor")}
    assert verify_bundle(bundle, automation_keys=[OTHER.public_key_hex]).ok


def test_a_retired_automation_key_still_confirms_what_it_signed() -> None:
    parent, _ = automated(KEY)
    bundle = _file(bundle_json(parent.evidence()))
    keys = bundle["actors"]["automation"]["keys"]
    keys[0]["retired_at"] = "2026-06-19T00:00:00.000Z"
    keys.append(
        {"public_key": OTHER.public_key_hex, "added_at": "2026-06-19T00:00:00.000Z",
         "retired_at": None}
    )  # fmt: skip
    assert verify_bundle(bundle).ok


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda b: b.update(actors=[]), "bundle.actors"),
        (lambda b: b["actors"]["automation"].update(keys={}), "bundle.actors['automation'].keys"),
        (lambda b: b["actors"].update(ada=1), "bundle.actors['ada']"),
        (
            lambda b: b["actors"]["automation"]["keys"][0].update(public_key=5),
            "bundle.actors['automation'].keys[0].public_key",
        ),
        (
            lambda b: b["actors"]["automation"]["keys"][0].update(added_at="yesterday"),
            "bundle.actors['automation'].keys[0].added_at",
        ),
    ],
)
def test_an_actors_member_of_the_wrong_shape_is_a_malformed_bundle(edit: Any, says: str) -> None:
    parent, _ = automated(KEY)
    bundle = _file(bundle_json(parent.evidence()))
    edit(bundle)
    report = verify_bundle(bundle)
    assert _codes(report) == {(None, "malformed_bundle")}
    assert says in report.problems[0].message


# --- the cause ------------------------------------------------------------------------------


def test_a_cause_that_is_not_in_the_chain_is_named() -> None:
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"), forge=_set("scheduled_by_event_hash", "e" * 64))
    assert _verified(chain) == {(3, "provenance_cause_missing")}


def test_a_cause_in_the_parent_process_is_not_this_chains_cause() -> None:
    # The child's work is caused by its own genesis; naming the parent's spawning event
    # (which the bundle carries in `causes`) is not how the engine records it.
    parent, _ = automated(KEY)
    split = parent.events[-1]
    child = parent.spawn(parent.decisions[-1].spawns[0], parent.envelopes[-1], split)
    child.fire(
        child.queue_row(1, "triage"),
        forge=lambda meta: meta.update(queued_by_event_hash=split.hash, queued_by_action="split"),
    )
    report = verify_evidence(child.evidence(parent))
    assert _codes(report) == {(2, "provenance_cause_missing")}
    assert f"an event of {parent.process_id!r}" in report.problems[0].message


def test_a_cause_at_a_later_seq_is_named() -> None:
    # A hash chain cannot point forward, so this takes reordered events: the queueing
    # event moved after the event it caused (the links break too, and say so).
    chain = _opened()
    chain.fire(chain.queue_row(2, "tally"))
    bundle = _file(bundle_json(chain.evidence()))
    events = bundle["events"]
    events[1]["seq"], events[2]["seq"] = 3, 2
    events[1], events[2] = events[2], events[1]
    codes = _codes(verify_bundle(bundle, replay=False))
    assert (2, "provenance_cause_order") in codes
    assert (2, "broken_link") in codes


@pytest.mark.parametrize(
    "forge",
    [_set("scheduled_by_action", "submit"), _set("scheduled_by_actor", OTHER.public_key_hex)],
    ids=["action", "actor"],
)
def test_a_cause_with_another_action_or_actor_is_named(forge: Forge) -> None:
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"), forge=forge)
    assert _verified(chain) == {(3, "provenance_cause_mismatch")}


def test_an_auto_action_naming_the_wrong_queueing_action_is_named() -> None:
    chain = _opened()
    chain.fire(chain.queue_row(2, "tally"), forge=_set("queued_by_action", "open"))
    assert _verified(chain) == {(3, "provenance_cause_mismatch")}


def test_a_schedule_id_the_cause_does_not_declare_is_named() -> None:
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"), forge=_set("schedule_id", "nightly"))
    report = verify_evidence(chain.evidence())
    assert _codes(report) == {(3, "provenance_undeclared")}
    assert "'nightly'" in report.problems[0].message


def test_a_schedule_fired_as_another_action_is_named() -> None:
    # `review` is scheduled by `open` too, but as schedule `review`, not `reminder`.
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"), action="review")
    assert _verified(chain) == {(3, "provenance_undeclared")}


def test_a_schedule_hung_on_an_event_that_schedules_nothing_is_named() -> None:
    chain = _opened()
    submit = chain.events[1]
    chain.fire(
        chain.scheduled_row(1, "reminder"),
        forge=lambda meta: meta.update(
            scheduled_by_event_hash=submit.hash, scheduled_by_action="submit"
        ),
    )
    assert _verified(chain) == {(3, "provenance_undeclared")}


def test_an_auto_provenance_on_an_action_that_is_not_automatic_is_named() -> None:
    chain = _opened()
    chain.fire(chain.queue_row(2, "tally"), action="remind")
    report = verify_evidence(chain.evidence())
    assert _codes(report) == {(3, "provenance_undeclared")}
    assert "'remind' is not an automatic action" in report.problems[0].message


# --- repeats --------------------------------------------------------------------------------


def test_a_scheduled_occurrence_fired_twice_is_named() -> None:
    chain = _opened()
    reminder = chain.scheduled_row(1, "reminder")
    chain.fire(reminder)
    chain.fire(reminder)
    report = verify_evidence(chain.evidence())
    assert _codes(report) == {(4, "provenance_duplicate")}
    assert "already fired at seq 3" in report.problems[0].message


def test_a_queue_row_fired_twice_is_named_even_by_another_worker() -> None:
    chain = _opened()
    tally = chain.queue_row(2, "tally")
    chain.fire(tally)
    chain.fire(tally, forge=_set("worker", "worker-2"))
    assert _verified(chain) == {(4, "provenance_duplicate")}


def test_occurrences_of_a_recurring_schedule_are_not_duplicates() -> None:
    chain = _opened()
    for run_at in ("2026-06-19T10:00:00.000Z", "2026-06-20T10:00:00.000Z"):
        chain.fire(chain.scheduled_row(1, "review", run_at=run_at))
    assert _verified(chain) == set()


def test_the_same_instant_written_differently_is_the_same_occurrence() -> None:
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "reminder"))
    chain.fire(chain.scheduled_row(1, "reminder"), forge=_set("run_at", "2026-06-18T11:00:00Z"))
    assert _verified(chain) == {(4, "provenance_duplicate")}


def test_firings_of_one_row_that_disagree_about_it_are_named() -> None:
    chain = _opened()
    chain.fire(chain.scheduled_row(1, "review"))
    later = chain.scheduled_row(1, "review", run_at="2026-06-20T10:00:00.000Z")
    chain.fire(later, forge=_set("scheduled_at", "2026-06-18T09:00:00.000Z"))
    report = verify_evidence(chain.evidence())
    assert _codes(report) == {(4, "provenance_inconsistent")}
    assert "fired at seq 3 with a different scheduled_at" in report.problems[0].message


def test_a_queue_row_reusing_a_schedules_work_id_is_named() -> None:
    chain = _opened()
    review = chain.scheduled_row(1, "review")
    chain.fire(review)
    chain.fire(chain.queue_row(2, "tally"), forge=_set("work_id", str(review.id)))
    assert _verified(chain) == {(4, "provenance_inconsistent")}


def test_one_work_id_reused_for_another_schedule_is_named() -> None:
    chain = _opened()
    reminder = chain.scheduled_row(1, "reminder")
    chain.fire(reminder)
    chain.fire(chain.scheduled_row(1, "review"), forge=_set("work_id", str(reminder.id)))
    report = verify_evidence(chain.evidence())
    assert _codes(report) == {(4, "provenance_inconsistent")}
    assert "schedule_id" in report.problems[0].message


# --- the CLI ----------------------------------------------------------------------------------


def _write(tmp_path: Path, bundle: Any, name: str = "bundle.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(bundle))
    return str(path)


def test_cli_says_whose_keys_it_trusted_and_takes_pinned_ones(tmp_path: Path) -> None:
    parent, _ = automated(KEY)
    path = _write(tmp_path, _file(bundle_json(parent.evidence())))
    result = RUNNER.invoke(app, ["verify", "--bundle", path])
    assert result.exit_code == 0, result.output
    assert "as the bundle itself lists them" in result.stdout
    assert "ok (8 events verified)" in result.stdout
    result = RUNNER.invoke(app, ["verify", "--bundle", path, "--json"])
    assert json.loads(result.stdout) == {
        "ok": True, "events": 8, "problems": [], "replayed": True, "automation_keys": "bundle",
    }  # fmt: skip
    real = AUTOMATION.key.public_key_hex
    result = RUNNER.invoke(app, ["verify", "--bundle", path, "--automation-key", real.upper()])
    assert result.exit_code == 0, result.output
    assert "pinned (1 given with --automation-key)" in result.stdout
    wrong = ["--automation-key", OTHER.public_key_hex]
    result = RUNNER.invoke(app, ["verify", "--bundle", path, *wrong, "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["automation_keys"] == "pinned"
    assert {p["code"] for p in report["problems"]} == {"provenance_actor"}
    result = RUNNER.invoke(app, ["verify", "--bundle", path, *wrong, "--automation-key", real])
    assert result.exit_code == 0, result.output


def test_cli_refuses_a_pinned_key_that_is_not_a_key(tmp_path: Path) -> None:
    parent, _ = automated(KEY)
    path = _write(tmp_path, _file(bundle_json(parent.evidence())))
    result = RUNNER.invoke(app, ["verify", "--bundle", path, "--automation-key", "abc"])
    assert result.exit_code == 2
    result = RUNNER.invoke(app, ["verify", "case-a", "--automation-key", KEY.public_key_hex])
    assert result.exit_code == 2
