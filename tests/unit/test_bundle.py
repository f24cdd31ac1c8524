"""Offline verification of charter-export/1 bundles: no database, real signatures.

Every tamper is applied to a bundle as an auditor would receive it (JSON text parsed
back) and must be named by seq and code.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from charter.audit.bundle import FORMAT, bundle_json
from charter.audit.evidence import CODES, Problem, VerificationReport
from charter.audit.verify_stored import verify_bundle
from charter.core import ijson
from charter.core.canonical import sha256_hex
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.canonical import version_hash
from tests.unit.chains import PARENT, Chain, family

KEY = SecretKey(bytes(range(32)))
OTHER = SecretKey(bytes(range(1, 33)))


def _file(value: JsonObject) -> Any:
    """The bundle as it reaches an auditor: written as JSON text, read back strictly."""
    return ijson.loads(json.dumps(value, ensure_ascii=False))


def _bundles() -> tuple[Any, Any, Any]:
    parent, child, grandchild = family(KEY)
    return (
        _file(bundle_json(parent.evidence())),
        _file(bundle_json(child.evidence(parent))),
        _file(bundle_json(grandchild.evidence(child, parent))),
    )


@pytest.fixture
def parent() -> Any:
    return _bundles()[0]


@pytest.fixture
def child() -> Any:
    return _bundles()[1]


def _codes(report: VerificationReport) -> set[tuple[int | None, str]]:
    assert {problem.code for problem in report.problems} <= CODES
    return {(problem.seq, problem.code) for problem in report.problems}


def _rehash(event: dict[str, Any]) -> None:
    """Make an edited event's stored hash match its text, as a careful forger would."""
    event["hash"] = sha256_hex(event["envelope_text"].encode("utf-8"))
    event["envelope"] = ijson.loads(event["envelope_text"])


# --- honest bundles ------------------------------------------------------------------------


def test_honest_bundles_verify_with_and_without_replay() -> None:
    for bundle in _bundles():
        for replay in (False, True):
            report = verify_bundle(bundle, replay=replay)
            assert report.to_json() == {"ok": True, "events": report.events, "problems": []}
    assert [verify_bundle(b).events for b in _bundles()] == [3, 1, 1]


def test_the_bundle_has_the_documented_shape(child: Any) -> None:
    assert set(child) == {"format", "process", "events", "workflows", "causes", "actors"}
    assert child["format"] == FORMAT
    assert child["process"]["parent"] == "case-1"
    [event] = child["events"]
    assert {"seq", "hash", "envelope", "signature", "kind", "workflow_version"} <= set(event)
    assert {"envelope_text", "actor_id", "actor_roles", "received_at"} <= set(event)
    assert event["kind"] == "spawn"
    assert event["signature"] is None
    assert event["envelope"]["cause"] in child["causes"]
    for version, definition in child["workflows"].items():
        assert version_hash(definition) == version


def test_the_documented_codes_are_the_codes() -> None:
    text = (Path(__file__).parents[2] / "docs" / "verification.md").read_text()
    assert set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE)) == CODES


def test_a_report_serializes_as_the_api_shape() -> None:
    report = VerificationReport.of(2, [Problem(2, "bad_signature", "x"), Problem(None, "h", "y")])
    assert report.to_json() == {
        "ok": False,
        "events": 2,
        "problems": [
            {"seq": None, "code": "h", "message": "y"},
            {"seq": 2, "code": "bad_signature", "message": "x"},
        ],
    }


# --- events --------------------------------------------------------------------------------


def test_a_changed_envelope_byte_breaks_hash_signature_and_the_next_link(parent: Any) -> None:
    event = parent["events"][1]
    event["envelope_text"] = event["envelope_text"].replace('"note"', '"nore"')
    report = verify_bundle(parent)
    assert {(2, "hash_mismatch"), (2, "bad_signature"), (3, "broken_link")} <= _codes(report)
    assert not report.ok


def test_a_rehashed_forgery_still_fails_its_signature_and_the_next_link(parent: Any) -> None:
    event = parent["events"][1]
    event["envelope_text"] = event["envelope_text"].replace('"input":{}', '"input":{"x":1}')
    _rehash(event)
    assert _codes(verify_bundle(parent)) == {(2, "bad_signature"), (3, "broken_link")}


def test_a_changed_signature_is_named(parent: Any) -> None:
    signature = parent["events"][0]["signature"]
    parent["events"][0]["signature"] = ("0" if signature[5] != "0" else "1").join(
        [signature[:5], signature[6:]]
    )
    assert _codes(verify_bundle(parent)) == {(1, "bad_signature")}


def test_a_signature_by_another_key_is_refused(parent: Any) -> None:
    message = parent["events"][2]["envelope_text"].encode("utf-8")
    parent["events"][2]["signature"] = OTHER.sign(message)
    assert _codes(verify_bundle(parent)) == {(3, "bad_signature")}


def test_a_changed_hash_is_named(parent: Any) -> None:
    parent["events"][1]["hash"] = "0" * 64
    assert _codes(verify_bundle(parent)) == {(2, "hash_mismatch")}


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("actor", OTHER.public_key_hex),
        ("prev_hash", "ab" * 32),
        ("action", "open"),
        ("workflow_path", "tests/other"),
        ("process_id", "case-2"),
    ],
)
def test_a_row_column_that_disagrees_with_the_envelope_is_named(
    parent: Any, column: str, value: str
) -> None:
    parent["events"][1][column] = value
    report = verify_bundle(parent)
    assert _codes(report) == {(2, "field_mismatch")}
    assert column.replace("_", "") in report.problems[0].message.replace("_", "")


def test_an_exported_envelope_that_differs_from_its_text_is_named(parent: Any) -> None:
    parent["events"][0]["envelope"]["input"]["name"] = "Eve"
    assert _codes(verify_bundle(parent)) == {(1, "field_mismatch")}


def test_a_non_canonical_envelope_text_is_named(parent: Any) -> None:
    event = parent["events"][0]
    event["envelope_text"] = json.dumps(json.loads(event["envelope_text"]), indent=1)
    _rehash(event)
    codes = _codes(verify_bundle(parent))
    assert (1, "not_canonical") in codes
    assert (2, "broken_link") in codes


def test_an_unsigned_action_event_is_refused(parent: Any) -> None:
    parent["events"][1]["signature"] = None
    assert _codes(verify_bundle(parent)) == {(2, "unsigned_event")}


def test_an_unsigned_event_is_not_accepted_as_a_genesis_after_seq_1(parent: Any) -> None:
    parent["events"][1]["signature"] = None
    parent["events"][1]["kind"] = "spawn"
    assert (2, "unsigned_event") in _codes(verify_bundle(parent))


def test_an_invalid_envelope_is_named(parent: Any) -> None:
    parent["events"][1]["envelope_text"] = '{"v":2}'
    _rehash(parent["events"][1])
    codes = _codes(verify_bundle(parent))
    assert (2, "bad_envelope") in codes


# --- the chain -------------------------------------------------------------------------------


def test_a_deleted_middle_event_is_a_gap_and_a_broken_link(parent: Any) -> None:
    del parent["events"][1]
    assert _codes(verify_bundle(parent)) == {(3, "seq_gap"), (3, "broken_link")}


def test_swapped_events_break_the_order_and_the_links(parent: Any) -> None:
    events = parent["events"]
    events[1], events[2] = events[2], events[1]
    codes = _codes(verify_bundle(parent))
    assert {(3, "seq_gap"), (2, "seq_order"), (3, "broken_link"), (2, "broken_link")} <= codes


def test_swapped_seq_numbers_break_the_links(parent: Any) -> None:
    events = parent["events"]
    events[1]["seq"], events[2]["seq"] = 3, 2
    events[1], events[2] = events[2], events[1]  # the order a database would return
    codes = _codes(verify_bundle(parent))
    assert {(2, "broken_link"), (3, "broken_link")} <= codes
    assert (None, "head_mismatch") in codes


def test_a_repeated_event_is_named(parent: Any) -> None:
    parent["events"].append(copy.deepcopy(parent["events"][2]))
    codes = _codes(verify_bundle(parent))
    assert (3, "seq_duplicate") in codes


def test_a_first_event_with_a_prev_is_a_broken_link(parent: Any) -> None:
    del parent["events"][0]
    codes = _codes(verify_bundle(parent))
    assert {(2, "seq_gap"), (2, "broken_link")} <= codes


@pytest.mark.parametrize(
    ("field", "value"),
    [("head", "cd" * 32), ("seq", 2), ("seq", 4)],
)
def test_a_process_head_or_seq_that_is_not_the_last_event_is_named(
    parent: Any, field: str, value: JsonValue
) -> None:
    parent["process"][field] = value
    assert _codes(verify_bundle(parent)) == {(None, "head_mismatch")}


def test_a_dropped_tail_event_leaves_the_head_dangling(parent: Any) -> None:
    parent["events"].pop()
    assert (None, "head_mismatch") in _codes(verify_bundle(parent))


# --- replay ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("state", "open"), ("data", {"name": "Eve", "notes": 1}), ("data", {"name": "Ada"})],
)
def test_altered_state_or_data_is_found_by_replay_only(
    parent: Any, field: str, value: JsonValue
) -> None:
    parent["process"][field] = value
    assert verify_bundle(parent).ok  # the chain itself is intact
    report = verify_bundle(parent, replay=True)
    assert _codes(report) == {(None, "replay_mismatch")}
    assert field in report.problems[0].message


def _charter_verify(path: Path, *flags: str) -> tuple[int, Any]:
    """`charter verify --bundle PATH --json` through the installed entry point, offline."""
    env = os.environ | {
        "CHARTER_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none",
        "CHARTER_HOME": str(path.parent / "home"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "charter", "verify", "--bundle", str(path), "--json", *flags],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert not (path.parent / "home").exists(), "verifying a bundle touched CHARTER_HOME"
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(
    ("field", "value"), [("state", "open"), ("data", {"name": "Eve", "notes": 1})]
)
def test_the_cli_replays_a_bundle_by_default(
    parent: Any, tmp_path: Path, field: str, value: JsonValue
) -> None:
    parent["process"][field] = value
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(parent))
    status, report = _charter_verify(path)
    assert status == 1
    assert [(p["seq"], p["code"]) for p in report["problems"]] == [(None, "replay_mismatch")]
    assert report["replayed"] is True
    status, report = _charter_verify(path, "--no-replay")
    assert (status, report["ok"], report["replayed"]) == (0, True, False)
    status, report = _charter_verify(path, "--replay")  # still accepted
    assert (status, report["ok"]) == (1, False)


def test_replay_names_the_event_the_rules_reject(parent: Any) -> None:
    parent["events"][1]["actor_roles"] = ["visitor"]
    assert verify_bundle(parent).ok
    report = verify_bundle(parent, replay=True)
    assert _codes(report) == {(2, "replay_rejected")}
    assert "forbidden_role" in report.problems[0].message


def test_replay_needs_the_recorded_workflow_version(parent: Any) -> None:
    parent["workflows"] = {}
    assert {(1, "missing_workflow")} == _codes(verify_bundle(parent))
    assert (1, "replay_rejected") in _codes(verify_bundle(parent, replay=True))


def test_a_changed_definition_no_longer_hashes_to_its_version(parent: Any) -> None:
    [version] = parent["workflows"]
    parent["workflows"][version]["actions"]["note"]["mutate"] = {"$inc": {"notes": 2}}
    report = verify_bundle(parent, replay=True)
    assert (None, "workflow_hash_mismatch") in _codes(report)
    assert (None, "replay_mismatch") in _codes(report)


# --- spawn geneses -----------------------------------------------------------------------------


def test_a_nested_genesis_resolves_through_its_causes() -> None:
    grandchild = _bundles()[2]
    assert len(grandchild["causes"]) == 4  # the child's genesis and the parent's 3 events
    assert verify_bundle(grandchild, replay=True).ok
    del grandchild["causes"][grandchild["events"][0]["cause_hash"]]
    assert _codes(verify_bundle(grandchild)) == {(1, "bad_cause")}


def test_a_missing_cause_is_named(child: Any) -> None:
    child["causes"] = {}
    report = verify_bundle(child)
    assert _codes(report) == {(1, "bad_cause")}
    assert "not a known event" in report.problems[0].message


def test_a_cause_that_spawns_nothing_is_refused(child: Any) -> None:
    # A forger re-points the genesis at the parent's `open` (same actor, same `at`) and
    # fixes every hash: only the cause's workflow says it never spawned anything.
    genesis = child["events"][0]
    opened = next(e for e in child["causes"].values() if e["seq"] == 1)
    envelope = ijson.loads(genesis["envelope_text"])
    assert isinstance(envelope, dict)
    envelope["cause"] = opened["hash"]
    genesis["envelope_text"] = json.dumps(envelope, separators=(",", ":"), sort_keys=True)
    _rehash(genesis)
    genesis["cause_hash"] = opened["hash"]
    child["process"]["parent_event"] = opened["hash"]
    child["process"]["head"] = genesis["hash"]
    report = verify_bundle(child)
    assert _codes(report) == {(1, "bad_cause")}
    assert "'open' spawns no process" in report.problems[0].message


def test_a_tampered_cause_event_is_refused(child: Any) -> None:
    cause = child["causes"][child["events"][0]["cause_hash"]]
    cause["signature"] = OTHER.sign(cause["envelope_text"].encode("utf-8"))
    report = verify_bundle(child)
    assert _codes(report) == {(1, "bad_cause")}
    assert "signature" in report.problems[0].message


def test_a_cause_of_another_process_is_refused(child: Any) -> None:
    child["process"]["parent"] = "case-9"
    report = verify_bundle(child)
    assert _codes(report) == {(1, "bad_cause")}
    assert "not of the parent process 'case-9'" in report.problems[0].message


def test_a_signed_genesis_is_refused(child: Any) -> None:
    genesis = child["events"][0]
    genesis["signature"] = KEY.sign(genesis["envelope_text"].encode("utf-8"))
    assert _codes(verify_bundle(child)) == {(1, "bad_cause")}


def test_a_genesis_by_another_actor_is_refused() -> None:
    parent = Chain(KEY, "case-7", "tests/parent")
    parent.submit("open", {"name": "Ada"})
    decision = parent.submit("split", {"reason": "x"})
    [spawn] = decision.spawns
    child = parent.spawn(spawn, parent.envelopes[-1], parent.events[-1])
    bundle = _file(bundle_json(child.evidence(parent)))
    genesis = bundle["events"][0]
    genesis["envelope_text"] = genesis["envelope_text"].replace(
        KEY.public_key_hex, OTHER.public_key_hex
    )
    genesis["actor"] = OTHER.public_key_hex
    _rehash(genesis)
    bundle["process"]["head"] = genesis["hash"]
    report = verify_bundle(bundle)
    assert _codes(report) == {(1, "bad_cause")}
    assert "actor" in report.problems[0].message


def test_a_process_row_with_a_parent_needs_a_genesis(parent: Any) -> None:
    parent["process"]["parent"] = "case-0"
    parent["process"]["parent_event"] = "ef" * 32
    assert _codes(verify_bundle(parent)) == {(1, "field_mismatch")}


def test_a_genesis_and_its_process_row_must_name_the_same_cause(child: Any) -> None:
    child["process"]["parent_event"] = "ef" * 32
    assert _codes(verify_bundle(child)) == {(1, "field_mismatch")}


# --- malformed bundles ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda b: b.update(format="charter-export/3"), "bundle.format"),
        (lambda b: b.update(events={}), "bundle.events"),
        (lambda b: b["events"][1].update(seq="2"), "bundle.events[1].seq"),
        (lambda b: b["process"].pop("head"), "bundle.process.head"),
        (lambda b: b["process"].update(created_at="yesterday"), "bundle.process.created_at"),
        (lambda b: b["events"][0].update(actor_roles=[1]), "bundle.events[0].actor_roles"),
        (lambda b: b.update(workflows=[]), "bundle.workflows"),
    ],
)
def test_a_bundle_of_the_wrong_shape_is_one_problem(parent: Any, edit: Any, says: str) -> None:
    edit(parent)
    report = verify_bundle(parent)
    assert _codes(report) == {(None, "malformed_bundle")}
    assert says in report.problems[0].message


def test_not_an_object_is_a_malformed_bundle() -> None:
    assert _codes(verify_bundle([1, 2])) == {(None, "malformed_bundle")}


def test_the_parent_definition_is_what_the_cause_check_reads(child: Any) -> None:
    [parent_version] = [v for v, d in child["workflows"].items() if d == PARENT]
    del child["workflows"][parent_version]
    report = verify_bundle(child)
    assert _codes(report) == {(1, "bad_cause")}
    assert "not in the evidence" in report.problems[0].message


def test_any_changed_character_of_an_envelope_is_caught_even_when_rehashed(parent: Any) -> None:
    text = parent["events"][1]["envelope_text"]
    for index, char in enumerate(text):
        bundle = copy.deepcopy(parent)
        event = bundle["events"][1]
        event["envelope_text"] = text[:index] + ("x" if char != "x" else "y") + text[index + 1 :]
        event["hash"] = sha256_hex(event["envelope_text"].encode("utf-8"))
        event["envelope"] = None  # a forger would drop what no longer parses
        report = verify_bundle(bundle)
        assert {problem.seq for problem in report.problems} >= {2}, (index, report)
