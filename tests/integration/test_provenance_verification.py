"""Automated events fired by the real Firer verify with their provenance: from the database,
over the API and from an exported bundle, offline (docs/wire-format.md and docs/automation.md;
docs/verification.md).

The automation key is rotated half-way, so the evidence must carry the retired key too.
This module's database is its own (the rotation would otherwise leak into other modules).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from charter.api.app import create_app
from charter.audit.evidence import CODES, VerificationReport
from charter.audit.verify_stored import export_bundle, verify_bundle, verify_process
from charter.auth.tokens import create_token
from charter.cli.main import app as cli
from charter.core import ijson
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.db.database import Database, Role, connect
from charter.engine import actors
from charter.engine.reads import Reads
from charter.engine.rules import has_automation_meta
from charter.firing.outcomes import Outcome
from tests.integration.world import World, new_process_id
from tests.unit.chains import AUTOMATED_CHILD_PATH, AUTOMATED_PATH, DEFINITIONS

HASH_CHECK = "CHECK (hash = encode(sha256(convert_to(envelope::text, 'UTF8')), 'hex')) NOT VALID"


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    for path in (AUTOMATED_PATH, AUTOMATED_CHILD_PATH):
        w.deploy(path, DEFINITIONS[path])
    w.actor("ada", "clerk")
    w.actor("automation", "AUTOMATION")
    return w


def _fire_schedule(world: World, pid: str, schedule_id: str, after: timedelta) -> None:
    world.clock.advance(seconds=after.total_seconds())
    row = world.claim_schedule(pid, schedule_id)
    result = world.firer().fire(row)
    assert result.outcome is Outcome.ACCEPTED, result


def _fire_queued(world: World, pid: str, action: str) -> None:
    result = world.fire_queued(pid, action)
    assert result.outcome is Outcome.ACCEPTED, result


def _rotate_automation_key(world: World) -> SecretKey:
    old = world.keys["automation"]
    new = SecretKey.generate()
    with world.database.connection(Role.ENGINE) as conn:
        actors.rotate_key(conn, "automation", new.public_key_hex)
        conn.commit()
    world.keys["automation"] = new
    return old


@pytest.fixture(scope="module")
def automated(world: World) -> tuple[str, str, SecretKey]:
    """A process and its spawned child, each with every kind of work fired by the Firer:
    (process id, child id, the retired automation key)."""
    pid = new_process_id()
    head = world.submit("ada", "open", pid, None, workflow=AUTOMATED_PATH)
    world.submit("ada", "submit", pid, head.hash, workflow=AUTOMATED_PATH)
    _fire_queued(world, pid, "tally")
    _fire_schedule(world, pid, "reminder", timedelta(hours=1))
    _fire_schedule(world, pid, "review", timedelta(days=1))
    retired = _rotate_automation_key(world)
    _fire_schedule(world, pid, "review", timedelta(days=1))  # the same row's next occurrence
    _fire_queued(world, pid, "screen")
    world.submit("ada", "split", pid, Reads(world.database).process(pid).head,
                 workflow=AUTOMATED_PATH)  # fmt: skip
    child = f"{pid}-sub"
    _fire_queued(world, child, "triage")
    _fire_schedule(world, child, "nudge", timedelta(hours=2))
    return pid, child, retired


def _codes(report: VerificationReport) -> set[tuple[int | None, str]]:
    assert {problem.code for problem in report.problems} <= CODES
    return {(problem.seq, problem.code) for problem in report.problems}


def _automated_seqs(world: World, pid: str) -> list[int]:
    seqs = []
    for event in Reads(world.database).events(pid):
        input_ = event.envelope["input"]
        if isinstance(input_, dict) and has_automation_meta(input_):
            seqs.append(event.seq)
    return seqs


def _api(world: World) -> tuple[TestClient, dict[str, str]]:
    app = create_app(world.database, engine=world.engine, settings=Settings())
    with world.database.connection(Role.ENGINE) as conn, conn.transaction():
        token = create_token(conn, scopes=["processes:read"], name="audit", principal="auditor")
    return TestClient(app), {"Authorization": f"Bearer {token}"}


# --- honest automation --------------------------------------------------------------------


def test_fired_events_verify_from_the_database_and_over_the_api(
    world: World, automated: tuple[str, str, SecretKey]
) -> None:
    pid, child, _ = automated
    assert len(_automated_seqs(world, pid)) == 5
    assert len(_automated_seqs(world, child)) == 2
    http, headers = _api(world)
    for process_id in (pid, child):
        report = verify_process(world.database, process_id, replay=True)
        assert report.ok, report.to_json()
        response = http.get(f"/v1/processes/{process_id}/verify?replay=true", headers=headers)
        assert response.status_code == 200
        assert response.json() == report.to_json()


def test_an_export_carries_current_and_retired_automation_keys_and_verifies_offline(
    world: World, automated: tuple[str, str, SecretKey]
) -> None:
    pid, child, retired = automated
    current = world.keys["automation"].public_key_hex
    for process_id in (pid, child):
        bundle: Any = ijson.loads(json.dumps(export_bundle(world.database, process_id)))
        keys = bundle["actors"]["automation"]["keys"]
        assert [key["public_key"] for key in keys] == [retired.public_key_hex, current]
        assert keys[0]["retired_at"] is not None
        assert keys[1]["retired_at"] is None
        assert verify_bundle(bundle, replay=True).ok
        pinned = [retired.public_key_hex, current]
        assert verify_bundle(bundle, replay=True, automation_keys=pinned).ok
    # Pinning only today's key: what the retired key signed can no longer be confirmed.
    bundle = ijson.loads(json.dumps(export_bundle(world.database, pid)))
    report = verify_bundle(bundle, automation_keys=[current])
    assert _codes(report) == {(seq, "provenance_actor") for seq in _automated_seqs(world, pid)[:3]}


def test_the_cli_verifies_an_exported_automated_process_offline_with_pinned_keys(
    world: World,
    automated: tuple[str, str, SecretKey],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pid, _, retired = automated
    runner = CliRunner()
    monkeypatch.setenv("CHARTER_DATABASE_URL", world.database.url)
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))
    exported = runner.invoke(cli, ["export", pid])
    assert exported.exit_code == 0, exported.output
    path = tmp_path / "bundle.json"
    path.write_text(exported.stdout)
    monkeypatch.setenv("CHARTER_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    pins = ["--automation-key", retired.public_key_hex]
    pins += ["--automation-key", world.keys["automation"].public_key_hex]
    result = runner.invoke(cli, ["verify", "--bundle", str(path), *pins])
    assert result.exit_code == 0, result.output
    assert "pinned (2 given with --automation-key)" in result.stdout
    assert not (tmp_path / "home").exists()


# --- a rewritten automated event ------------------------------------------------------------


def _rewrite_last_event(world: World, pid: str, envelope: Envelope, signature: str) -> None:
    """As a superuser holding the automation key: replace the last event and move the head."""
    text = envelope.message().decode("utf-8")
    with connect(world.database.url) as conn:
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute("ALTER TABLE charter.events DROP CONSTRAINT hash_is_envelope_hash")
        conn.execute(
            "UPDATE charter.events SET envelope = %s::json, hash = %s, signature = %s"
            " WHERE process_id = %s AND seq = (SELECT seq FROM charter.processes WHERE id = %s)",
            (text, envelope.hash(), signature, pid, pid),
        )
        conn.execute("UPDATE charter.processes SET head_hash = %s WHERE id = %s",
                     (envelope.hash(), pid))  # fmt: skip
        conn.execute(
            f"ALTER TABLE charter.events ADD CONSTRAINT hash_is_envelope_hash {HASH_CHECK}"
        )
        conn.commit()


def test_a_rewritten_provenance_is_found_from_the_database_the_api_and_the_bundle(
    world: World,
) -> None:
    pid = new_process_id()
    head = world.submit("ada", "open", pid, None, workflow=AUTOMATED_PATH)
    world.submit("ada", "submit", pid, head.hash, workflow=AUTOMATED_PATH)
    _fire_queued(world, pid, "tally")
    [*_, last] = Reads(world.database).events(pid)
    assert last.actor_id == "automation"
    forged_input: Any = json.loads(json.dumps(last.envelope["input"]))
    forged_input["meta"]["automation"]["queued_by_event_hash"] = "e" * 64
    envelope = Envelope.from_json({**last.envelope, "input": forged_input})
    submission = sign(envelope, world.keys["automation"])
    _rewrite_last_event(world, pid, envelope, submission.signature)
    expected = {(last.seq, "provenance_cause_missing")}
    assert _codes(verify_process(world.database, pid, replay=True)) == expected
    http, headers = _api(world)
    body = http.get(f"/v1/processes/{pid}/verify", headers=headers).json()
    assert {(p["seq"], p["code"]) for p in body["problems"]} == expected
    bundle = ijson.loads(json.dumps(export_bundle(world.database, pid)))
    assert _codes(verify_bundle(bundle, replay=True)) == expected
