"""`charter:erase`: a governed event removes personal values from the disclosures kept
beside a process's events, derives the data again with `{"erased": true}` where they
were, and leaves every chain verifiable, replayable and exportable — and verification
tells an erasure from a value deleted, or restored, outside governance."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import psycopg
import pytest

from charter.audit.verify_stored import export_bundle, verify_bundle, verify_process
from charter.core.disclosures import digests, split_personal
from charter.core.ed25519 import SecretKey
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, connect
from charter.engine.effects import EVENTS_CHANNEL, QUEUE_CHANNEL, SCHEDULES_CHANNEL
from tests.integration.apikit import Harness, bearer, make_harness, new_id

PATH = "tests/erasure"
NAME, DOB = "Ada Lovelace", "1815-12-10"
KYC: dict[str, Any] = {
    "dsl": 2,
    "states": ["applied", "screened", "active", "offboarded"],
    "roles": ["clerk", "analyst", "dpo", "legal"],
    "retention": {"after": "7y", "states": ["offboarded"], "hold_role": ["legal"]},
    "erasure": {
        "role": "dpo",
        "from": "*",
        "when": "state = 'offboarded'",
        "bases": ["art17-1a", "art17-1d"],
    },
    "actions": {
        "apply": {
            "type": "create",
            "role": "clerk",
            "to": "applied",
            "input": {
                "type": "object",
                "required": ["name", "dob", "country"],
                "properties": {
                    "name": {"type": "string", "maxLength": 80, "x-personal": True},
                    "dob": {"type": "string", "pattern": "^[0-9-]{10}$", "x-personal": True},
                    "country": {"type": "string"},
                },
            },
            "mutate": {
                "$set": {
                    "name": "{{ input.name }}",
                    "greeting": "Dear {{ input.name }}",
                    "dob": "{{ input.dob }}",
                    "country": "{{ input.country }}",
                },
                "$push": {"names": "{{ input.name }}"},
            },
        },
        "screen": {
            "role": "analyst",
            "from": "applied",
            "to": "screened",
            "when": "dob < '2008-01-01'",
        },
        "activate": {"role": "analyst", "from": "screened", "to": "active"},
        "offboard": {"role": "clerk", "from": "active", "to": "offboarded"},
        "note": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {"type": "object", "properties": {"text": {}}},
            "mutate": {"$set": {"note": "{{ input.text }}"}},
        },
    },
}
PERSONAL = ("/name", "/dob")
ERASED: Any = {"erased": True}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy(PATH, KYC)
    harness.actor("analyst", "analyst")
    harness.actor("dpo", "dpo")
    harness.actor("legal", "legal")
    yield harness
    harness.http.close()


@dataclass
class Kyc:
    """One onboarding process, driven through the API."""

    h: Harness
    id: str
    head: str = ""

    def act(self, actor: str, action: str, input_: Any = None) -> Any:
        answer: Any = self.h.accept(self.signed(actor, action, input_))
        self.head = str(answer["hash"])
        return answer

    def signed(self, actor: str, action: str, input_: Any = None) -> Any:
        key: SecretKey = self.h.keys[actor]
        clear, disclosed = split_personal(input_ or {}, PERSONAL if action == "apply" else ())
        envelope = self.h.envelope(key, self.id, action, clear, prev=self.head or None,
                                   workflow=PATH)  # fmt: skip
        if disclosed:
            envelope = replace(envelope, v=2, sd=digests(disclosed))
        return sign(envelope, key, [d.text for d in disclosed])

    def refused(self, actor: str, action: str, input_: Any, code: str) -> str:
        response = self.h.post(self.signed(actor, action, input_))
        assert response.status_code in (403, 409, 422), response.text
        error = response.json()["error"]
        assert error["code"] == code, error
        return str(error["message"])


def offboarded(h: Harness, name: str = NAME, dob: str = DOB) -> Kyc:
    kyc = Kyc(h, new_id("kyc"))
    kyc.act("clerk", "apply", {"name": name, "dob": dob, "country": "GB"})
    kyc.act("analyst", "screen")
    kyc.act("analyst", "activate")
    kyc.act("clerk", "note", {"text": "ok"})
    kyc.act("clerk", "offboard")
    return kyc


def erase(kyc: Kyc, **scope: Any) -> Any:
    request: JsonObject = {"basis": "art17-1a", "request": "DSR-2026-0042"}
    if scope:
        request["scope"] = scope
    return kyc.act("dpo", "charter:erase", request)


def _rows(h: Harness, kyc: Kyc) -> list[tuple[str, Any, Any]]:
    with connect(h.database.url) as conn:
        rows = conn.execute(
            "SELECT d.pointer, d.disclosure, d.erased_by FROM charter.event_disclosures d"
            " JOIN charter.events e ON e.hash = d.event_hash WHERE e.process_id = %s"
            " ORDER BY d.pointer", (kyc.id,)).fetchall()  # fmt: skip
    return [(str(p), t, e) for p, t, e in rows]


def _superuser(h: Harness, statement: str, *params: Any) -> None:
    """A change made behind Charter's back, with its triggers off."""
    with connect(h.database.url) as conn, conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(statement, params)


def erasure_of(report: Any) -> Any:
    return report.to_json()["erasure"]


def codes(report: Any) -> list[tuple[int | None, str]]:
    return [(p.seq, p.code) for p in report.problems]


def test_erasure_end_to_end(h: Harness) -> None:
    kyc = offboarded(h)
    answer = erase(kyc)
    data = answer["process"]["data"]
    assert data["name"] == ERASED
    assert data["dob"] == ERASED
    assert data["greeting"] == ERASED  # text built from the name is erased whole
    assert data["names"] == [ERASED]
    assert data["country"] == "GB"
    assert data["note"] == "ok"
    assert answer["process"]["state"] == "offboarded"
    assert answer["seq"] == 6
    rows = _rows(h, kyc)
    assert [(p, t) for p, t, _ in rows] == [("/dob", None), ("/name", None)]
    assert {e for _, _, e in rows} == {answer["hash"]}
    # Events after the erasure are decided on the stored data, and replay agrees.
    kyc.act("clerk", "note", {"text": "closed"})
    report = verify_process(h.database, kyc.id, replay=True)
    assert report.ok, report.problems
    shown: Any = report.to_json()
    assert shown["erasure"]["erased"] == [
        {"seq": 1, "pointer": "/dob", "by_seq": 6, "basis": "art17-1a"},
        {"seq": 1, "pointer": "/name", "by_seq": 6, "basis": "art17-1a"},
    ]
    assert shown["erasure"]["withheld"] == []
    why = {(u["seq"], u["why"]) for u in shown["erasure"]["unverifiable"]}
    assert (2, "dob < '2008-01-01'") in why  # the condition over the erased dob
    assert any(seq == 1 and "/name" in reason for seq, reason in why)  # its schema
    # The erasure is an event of the chain like any other.
    events = h.http.get(f"/v1/processes/{kyc.id}/events", headers=bearer(h.admin)).json()
    assert events["items"][5]["envelope"]["action"] == "charter:erase"
    assert events["items"][5]["envelope"]["input"]["request"] == "DSR-2026-0042"


def test_a_bundle_exported_after_erasure_verifies_offline_and_holds_no_erased_value(
    h: Harness,
) -> None:
    kyc = offboarded(h)
    erase(kyc)
    bundle: Any = export_bundle(h.database, kyc.id)
    text = json.dumps(bundle)
    assert "Lovelace" not in text
    assert DOB not in text
    assert bundle["disclosures_withheld"] is False
    offline = verify_bundle(json.loads(text), replay=True)
    assert offline.ok, offline.problems
    assert len(erasure_of(offline)["erased"]) == 2


def test_an_export_withholding_personal_values_verifies_in_full_and_holds_none(
    h: Harness,
) -> None:
    kyc = offboarded(h)
    full: Any = export_bundle(h.database, kyc.id)
    assert "Lovelace" in json.dumps(full)
    bundle: Any = export_bundle(h.database, kyc.id, withhold_personal=True)
    text = json.dumps(bundle)
    assert "Lovelace" not in text
    assert DOB not in text
    assert bundle["disclosures_withheld"] is True
    data = bundle["process"]["data"]
    withheld = {"withheld": True}
    assert data["name"] == withheld
    assert data["greeting"] == withheld
    assert data["names"] == [withheld]
    assert data["country"] == "GB"
    offline = verify_bundle(json.loads(text), replay=True)
    assert offline.ok, offline.problems
    erasure: Any = erasure_of(offline)
    assert erasure["withheld"] == [{"seq": 1, "pointer": "/dob"}, {"seq": 1, "pointer": "/name"}]
    assert erasure["erased"] == []
    assert any(u["seq"] == 2 for u in erasure["unverifiable"])
    # The API withholds them from a token that may not read personal values.
    reader = h.token("processes:read")
    shown = h.http.get(f"/v1/processes/{kyc.id}/export", headers=bearer(reader)).json()
    assert shown["disclosures_withheld"] is True
    assert "Lovelace" not in json.dumps(shown)
    allowed = h.token("processes:read", "personal:read")
    shown = h.http.get(f"/v1/processes/{kyc.id}/export", headers=bearer(allowed)).json()
    assert shown["disclosures_withheld"] is False
    assert "Lovelace" in json.dumps(shown)


def test_a_withheld_export_after_erasure_shows_both_kinds(h: Harness) -> None:
    kyc = offboarded(h)
    erase(kyc, pointers=["/name"])
    bundle: Any = export_bundle(h.database, kyc.id, withhold_personal=True)
    data = bundle["process"]["data"]
    assert data["name"] == ERASED
    assert data["dob"] == {"withheld": True}
    offline = verify_bundle(bundle, replay=True)
    assert offline.ok, offline.problems


def test_an_erasure_by_scope_takes_only_what_it_names_and_twice_is_nothing(h: Harness) -> None:
    kyc = offboarded(h)
    answer = erase(kyc, pointers=["/dob"])
    assert answer["process"]["data"]["name"] == NAME
    assert answer["process"]["data"]["dob"] == ERASED
    message = kyc.refused("dpo", "charter:erase", {"basis": "art17-1a", "request": "DSR-1",
                          "scope": {"pointers": ["/dob"]}}, "invalid_input")  # fmt: skip
    assert "nothing to erase" in message
    other = offboarded(h)
    kyc.refused("dpo", "charter:erase", {"basis": "art17-1a", "request": "DSR-1",
                "scope": {"events": [other.head]}}, "invalid_input")  # fmt: skip
    second = erase(kyc, events="all", pointers="all")
    assert second["process"]["data"]["name"] == ERASED
    report = verify_process(h.database, kyc.id, replay=True)
    assert report.ok, report.problems
    assert [(e["pointer"], e["by_seq"]) for e in erasure_of(report)["erased"]] == [
        ("/dob", 6),
        ("/name", 7),
    ]


def test_erasure_is_governed(h: Harness) -> None:
    kyc = Kyc(h, new_id("kyc"))
    kyc.act("clerk", "apply", {"name": NAME, "dob": DOB, "country": "GB"})
    kyc.act("analyst", "screen")
    kyc.act("analyst", "activate")
    request = {"basis": "art17-1a", "request": "DSR-2026-0042"}
    kyc.refused("analyst", "charter:erase", request, "forbidden_role")
    kyc.refused("dpo", "charter:erase", request, "condition_failed")  # still active
    kyc.act("clerk", "offboard")
    kyc.refused("dpo", "charter:erase", {**request, "basis": "gdpr"}, "invalid_input")
    kyc.refused("dpo", "charter:erase", {**request, "request": "Ada asked"}, "invalid_input")
    kyc.refused("dpo", "charter:erase", {**request, "note": "x"}, "invalid_input")
    assert all(text is not None for _, text, _ in _rows(h, kyc))  # nothing changed
    process_id, head = h.open_process()
    errand = Kyc(h, process_id, head)
    errand.refused("clerk", "charter:erase", request, "workflow_mismatch")
    erase(kyc)


def test_a_process_under_legal_hold_is_not_erased_until_released(h: Harness) -> None:
    kyc = offboarded(h)
    request = {"basis": "art17-1a", "request": "DSR-2026-0042"}
    kyc.refused("clerk", "charter:hold", {"reason": "LEGAL-17"}, "forbidden_role")
    kyc.refused("legal", "charter:hold", {"reason": "court order"}, "invalid_input")
    kyc.refused("legal", "charter:release", {"reason": "LEGAL-17"}, "condition_failed")
    kyc.act("legal", "charter:hold", {"reason": "LEGAL-17"})
    kyc.refused("legal", "charter:hold", {"reason": "LEGAL-18"}, "condition_failed")
    message = kyc.refused("dpo", "charter:erase", request, "condition_failed")
    assert "legal hold" in message
    assert all(text is not None for _, text, _ in _rows(h, kyc))
    answer = kyc.act("legal", "charter:release", {"reason": "LEGAL-17"})
    assert answer["process"]["data"]["name"] == NAME  # a hold changes no data
    erased = erase(kyc)
    assert erased["process"]["data"]["name"] == ERASED
    report = verify_process(h.database, kyc.id, replay=True)
    assert report.ok, report.problems


def test_a_disclosure_deleted_behind_charters_back_is_disclosure_missing(h: Harness) -> None:
    kyc = offboarded(h)
    _superuser(h, "DELETE FROM charter.event_disclosures WHERE pointer = '/name' AND event_hash"
               " IN (SELECT hash FROM charter.events WHERE process_id = %s)", kyc.id)  # fmt: skip
    assert (1, "disclosure_missing") in codes(verify_process(h.database, kyc.id))


def test_erased_by_a_non_erase_event_is_disclosure_missing(h: Harness) -> None:
    kyc = offboarded(h)
    _superuser(h, "UPDATE charter.event_disclosures SET disclosure = NULL, erased_by = %s"
               " WHERE pointer = '/name' AND event_hash IN (SELECT hash FROM charter.events"
               " WHERE process_id = %s)", kyc.head, kyc.id)  # fmt: skip
    found = codes(verify_process(h.database, kyc.id))
    assert (1, "disclosure_missing") in found


def test_a_disclosure_restored_from_a_backup_is_erasure_incomplete(h: Harness) -> None:
    kyc = offboarded(h)
    [(_, text, _), _] = [row for row in _rows(h, kyc) if row[0] == "/dob"] * 2
    erase(kyc)
    _superuser(h, "UPDATE charter.event_disclosures SET disclosure = %s, erased_by = NULL"
               " WHERE pointer = '/dob' AND event_hash IN (SELECT hash FROM charter.events"
               " WHERE process_id = %s)", text, kyc.id)  # fmt: skip
    assert (6, "erasure_incomplete") in codes(verify_process(h.database, kyc.id))


def test_a_name_put_back_in_clear_in_the_data_is_replay_mismatch(h: Harness) -> None:
    kyc = offboarded(h)
    erase(kyc)
    _superuser(h, "UPDATE charter.processes SET data = jsonb_set(data, '{name}', %s::jsonb)"
               " WHERE id = %s", json.dumps(NAME), kyc.id)  # fmt: skip
    found = codes(verify_process(h.database, kyc.id, replay=True))
    assert (None, "replay_mismatch") in found


def test_an_input_that_looks_erased_is_not_an_erasure(h: Harness) -> None:
    kyc = offboarded(h)
    kyc.act("clerk", "note", {"text": ERASED})
    report = verify_process(h.database, kyc.id, replay=True)
    assert report.ok, report.problems
    shown: Any = report.to_json()
    assert shown["erasure"] == {"erased": [], "withheld": [], "unverifiable": []}
    erase(kyc, pointers=["/dob"])
    report = verify_process(h.database, kyc.id, replay=True)
    assert report.ok, report.problems
    assert [e["pointer"] for e in erasure_of(report)["erased"]] == ["/dob"]


def test_after_erasure_no_erased_value_is_anywhere(h: Harness) -> None:
    name, dob = f"Ada {secrets.token_hex(6)}", "1901-02-03"
    listener = psycopg.connect(h.database.url, autocommit=True)
    for channel in _CHANNELS:
        listener.execute(f"LISTEN {channel}")
    kyc = offboarded(h, name, dob)
    # Refusals that touch the values are logged, without them.
    kyc.refused("dpo", "charter:erase", {"basis": "nope", "request": "DSR-1"}, "invalid_input")
    Kyc(h, new_id("kyc")).refused("clerk", "apply", {"name": name * 9, "dob": dob,
                                  "country": "GB"}, "invalid_input")  # fmt: skip
    erase(kyc)
    payloads = [n.payload for n in listener.notifies(timeout=0.5, stop_after=1000)]
    listener.close()
    assert payloads, "no notification was seen"
    with connect(h.database.url) as conn:
        dumps = [
            str(conn.execute(f"SELECT jsonb_agg(t)::text FROM {table} t").fetchall())
            for table in _TABLES
        ]
    api = h.http.get(f"/v1/processes/{kyc.id}", headers=bearer(h.admin)).text
    api += h.http.get(f"/v1/processes/{kyc.id}/events?disclosures=true",
                      headers=bearer(h.admin)).text  # fmt: skip
    api += h.http.get(f"/v1/processes/{kyc.id}/export", headers=bearer(h.admin)).text
    exported = json.dumps(export_bundle(h.database, kyc.id))
    for text in [*payloads, *dumps, api, exported]:
        assert name not in text
        assert dob not in text
    # The dead row versions that held them are vacuumed, after the commit.
    assert h.engine.vacuum.wait(60)
    assert h.engine.vacuum.runs >= 1
    with connect(h.database.url) as conn:
        vacuumed = conn.execute(
            "SELECT last_vacuum FROM pg_stat_user_tables"
            " WHERE schemaname = 'charter' AND relname = 'event_disclosures'"
        ).fetchone()
    assert vacuumed is not None
    assert vacuumed[0] is not None


_TABLES = (
    "charter.system_log",
    "charter.scheduled_actions",
    "charter.automation_queue",
    "charter.processes",
    "charter.event_disclosures",
    "charter.events",
)
_CHANNELS = (EVENTS_CHANNEL, SCHEDULES_CHANNEL, QUEUE_CHANNEL)
