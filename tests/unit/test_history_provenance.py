"""`charter history` names the cause of automated and spawned events."""

from __future__ import annotations

from charter.cli.processes import provenance
from charter.core.jsontypes import JsonObject

CAUSE = "c0ffee" * 10 + "abcd"


def _event(input_: JsonObject, kind: str = "action", **envelope: str) -> JsonObject:
    return {"kind": kind, "envelope": {"action": "x", "input": input_, **envelope}}


def test_an_actors_own_event_has_no_provenance() -> None:
    assert provenance(_event({"name": "Ada"})) == ""
    assert provenance(_event({"meta": {"note": 1}})) == ""


def test_a_scheduled_firing_names_the_scheduling_event() -> None:
    meta: JsonObject = {
        "automation": {"kind": "scheduled_action", "scheduled_by_event_hash": CAUSE}
    }
    assert provenance(_event({"meta": meta})) == f"scheduled_action ← {CAUSE[:12]}"


def test_an_auto_action_names_the_queueing_event() -> None:
    meta: JsonObject = {"automation": {"kind": "auto_action", "queued_by_event_hash": CAUSE}}
    assert provenance(_event({"meta": meta})) == f"auto_action ← {CAUSE[:12]}"


def test_a_spawn_genesis_names_its_parent_event() -> None:
    assert provenance(_event({}, kind="spawn", cause=CAUSE)) == f"spawn ← {CAUSE[:12]}"


def test_a_migration_names_its_ticket() -> None:
    event = _event({"state": "delivered", "reason": "OPS-42"}, action="charter:migrate")
    assert provenance(event) == "migration OPS-42"
