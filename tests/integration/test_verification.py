"""Verification of engine-written chains, tampered with as a superuser would (docs/wire-format.md).

Every process here is written by `Engine.process_event` with real keys (the 10,000-event
one through `Store`, signed the same way). Tampering commits through an owner connection
with triggers off (`session_replication_role = replica`) and the hash CHECK constraint
dropped for the statement and restored NOT VALID, so the tampered row stays while later
inserts are checked again. This module's database is its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from charter.audit.evidence import CODES, VerificationReport
from charter.audit.verify_pool import verify_processes
from charter.audit.verify_stored import export_bundle, verify_bundle, verify_process
from charter.cli import verify as verify_cli
from charter.core import ijson
from charter.core.envelope import Envelope, sign
from charter.core.errors import UnknownProcess
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role, connect
from charter.engine.store import Store
from tests.integration.world import World, new_process_id
from tests.unit.chains import DEFINITIONS, PARENT_PATH

HASH_CHECK = "CHECK (hash = encode(sha256(convert_to(envelope::text, 'UTF8')), 'hex')) NOT VALID"


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    for path, definition in DEFINITIONS.items():
        w.deploy(path, definition)
    w.actor("ada", "clerk")
    return w


def _family(world: World) -> tuple[str, str, str]:
    """A parent with 4 events (the last spawned a child, whose genesis spawned a grandchild)."""
    pid = new_process_id()
    head = world.submit("ada", "open", pid, None, input_={"name": "Ada"}, workflow=PARENT_PATH)
    head = world.submit("ada", "note", pid, head.hash, workflow=PARENT_PATH)
    head = world.submit("ada", "note", pid, head.hash, workflow=PARENT_PATH)
    world.submit("ada", "split", pid, head.hash, input_={"reason": "kyc"}, workflow=PARENT_PATH)
    return pid, f"{pid}-child", f"{pid}-child-g"


def _tamper(database: Database, statement: str, *params: Any) -> None:
    """Commit `statement` as a superuser, with triggers and the hash CHECK out of the way."""
    with connect(database.url) as conn:
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute("ALTER TABLE charter.events DROP CONSTRAINT hash_is_envelope_hash")
        conn.execute(statement, params)
        conn.execute(
            f"ALTER TABLE charter.events ADD CONSTRAINT hash_is_envelope_hash {HASH_CHECK}"
        )
        conn.commit()


def _text(database: Database, pid: str, seq: int) -> str:
    with database.connection(Role.READER) as conn:
        row = conn.execute(
            "SELECT envelope::text FROM charter.events WHERE process_id = %s AND seq = %s",
            (pid, seq),
        ).fetchone()
    assert row is not None
    return str(row[0])


def _codes(report: VerificationReport) -> set[tuple[int | None, str]]:
    assert {problem.code for problem in report.problems} <= CODES
    return {(problem.seq, problem.code) for problem in report.problems}


# --- honest chains ---------------------------------------------------------------------------


def test_engine_written_chains_verify_and_replay(world: World) -> None:
    pid, child, grandchild = _family(world)
    for process_id, events in ((pid, 4), (child, 1), (grandchild, 1)):
        for replay in (False, True):
            report = verify_process(world.database, process_id, replay=replay)
            assert report.to_json() == {"ok": True, "events": events, "problems": []}


def test_an_unknown_process_is_an_error(world: World) -> None:
    with pytest.raises(UnknownProcess):
        verify_process(world.database, "no-such-process")
    with pytest.raises(UnknownProcess):
        export_bundle(world.database, "no-such-process")


def test_an_export_verifies_offline_and_a_flipped_byte_is_caught(world: World) -> None:
    pid, child, grandchild = _family(world)
    for process_id in (pid, child, grandchild):
        text = json.dumps(export_bundle(world.database, process_id))
        assert verify_bundle(ijson.loads(text), replay=True).ok
    bundle: Any = ijson.loads(json.dumps(export_bundle(world.database, pid)))
    text = bundle["events"][2]["envelope_text"]
    bundle["events"][2]["envelope_text"] = text.replace('"note"', '"nose"')
    assert {(3, "hash_mismatch"), (3, "bad_signature"), (4, "broken_link")} <= _codes(
        verify_bundle(bundle)
    )


# --- tampered events -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"action":"note"', '"action":"nope"'),
        ('"at":"2026-06-18T10:00:00.000Z"', '"at":"2026-06-18T10:00:01.000Z"'),
        ('"input":{}', '"input":{"n":1}'),
        ('"v":1', '"v":2'),
        ('"input":{}', '"input": {}'),
        ('"prev":"', '"prev":"0'),  # one more byte: no longer 64 hex
    ],
)
def test_a_changed_envelope_byte_is_named(world: World, old: str, new: str) -> None:
    pid, _, _ = _family(world)
    assert old in _text(world.database, pid, 2)
    _tamper(
        world.database,
        "UPDATE charter.events SET envelope = replace(envelope::text, %s, %s)::json "
        "WHERE process_id = %s AND seq = 2",
        old,
        new,
        pid,
    )
    codes = _codes(verify_process(world.database, pid))
    assert (2, "hash_mismatch") in codes
    assert codes & {(2, "bad_signature"), (2, "bad_envelope")}
    assert (3, "broken_link") in codes


def test_a_changed_actor_byte_in_the_envelope_is_named(world: World) -> None:
    pid, _, _ = _family(world)
    actor = world.keys["ada"].public_key_hex
    forged = actor[:10] + ("0" if actor[10] != "0" else "1") + actor[11:]
    _tamper(
        world.database,
        "UPDATE charter.events SET envelope = replace(envelope::text, %s, %s)::json "
        "WHERE process_id = %s AND seq = 3",
        actor,
        forged,
        pid,
    )
    codes = _codes(verify_process(world.database, pid))
    assert {(3, "hash_mismatch"), (3, "bad_signature"), (3, "field_mismatch")} <= codes


def test_a_rehashed_envelope_still_fails_its_signature(world: World) -> None:
    pid, _, _ = _family(world)
    forged = _text(world.database, pid, 2).replace('"input":{}', '"input":{"n":1}')
    _tamper(
        world.database,
        "UPDATE charter.events SET envelope = %s::json, "
        "hash = encode(sha256(convert_to(%s, 'UTF8')), 'hex') WHERE process_id = %s AND seq = 2",
        forged,
        forged,
        pid,
    )
    assert _codes(verify_process(world.database, pid)) == {(2, "bad_signature"), (3, "broken_link")}


def test_a_changed_signature_is_named(world: World) -> None:
    pid, _, _ = _family(world)
    _tamper(
        world.database,
        "UPDATE charter.events SET signature = "
        "CASE WHEN left(signature, 1) = 'a' THEN 'b' ELSE 'a' END || substr(signature, 2) "
        "WHERE process_id = %s AND seq = 3",
        pid,
    )
    assert _codes(verify_process(world.database, pid)) == {(3, "bad_signature")}


def test_a_changed_hash_is_named(world: World) -> None:
    pid, _, _ = _family(world)
    _tamper(
        world.database,
        "UPDATE charter.events SET hash = repeat('0', 64) WHERE process_id = %s AND seq = 2",
        pid,
    )
    assert _codes(verify_process(world.database, pid)) == {(2, "hash_mismatch")}


@pytest.mark.parametrize("column", ["actor", "prev_hash", "action"])
def test_a_changed_row_column_is_named(world: World, column: str) -> None:
    pid, _, _ = _family(world)
    _tamper(
        world.database,
        f"UPDATE charter.events SET {column} = CASE WHEN {column} = 'note' THEN 'open' "
        f"ELSE repeat('e', 64) END WHERE process_id = %s AND seq = 3",
        pid,
    )
    report = verify_process(world.database, pid)
    assert _codes(report) == {(3, "field_mismatch")}
    assert column in report.problems[0].message


def test_a_deleted_middle_event_is_named(world: World) -> None:
    pid, _, _ = _family(world)
    _tamper(world.database, "DELETE FROM charter.events WHERE process_id = %s AND seq = 2", pid)
    report = verify_process(world.database, pid)
    assert _codes(report) == {(3, "seq_gap"), (3, "broken_link")}
    assert report.events == 3


def test_swapped_events_are_named(world: World) -> None:
    pid, _, _ = _family(world)
    # Three steps: the (process_id, seq) key is checked row by row.
    for old, new in ((2, 1000), (3, 2), (1000, 3)):
        _tamper(
            world.database,
            "UPDATE charter.events SET seq = %s WHERE process_id = %s AND seq = %s",
            new,
            pid,
            old,
        )
    codes = _codes(verify_process(world.database, pid))
    assert {(2, "broken_link"), (3, "broken_link"), (4, "broken_link")} <= codes


# --- tampered process rows -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("head_hash = repeat('d', 64)", {(None, "head_mismatch")}),
        ("seq = 3", {(None, "head_mismatch")}),
        ("workflow_path = 'tests/other'", {(1, "field_mismatch")}),
    ],
)
def test_a_changed_process_row_is_named(
    world: World, assignment: str, expected: set[tuple[int | None, str]]
) -> None:
    pid, _, _ = _family(world)
    _tamper(world.database, f"UPDATE charter.processes SET {assignment} WHERE id = %s", pid)
    assert expected <= _codes(verify_process(world.database, pid))


@pytest.mark.parametrize(
    "assignment",
    ["state = 'open'", """data = '{"name": "Eve", "notes": 2}'""", """data = data - 'notes'"""],
)
def test_changed_state_or_data_is_found_by_replay(world: World, assignment: str) -> None:
    pid, _, _ = _family(world)
    _tamper(world.database, f"UPDATE charter.processes SET {assignment} WHERE id = %s", pid)
    assert verify_process(world.database, pid).ok  # the chain is intact; the row is not
    report = verify_process(world.database, pid, replay=True)
    assert _codes(report) == {(None, "replay_mismatch")}


def test_a_deleted_tail_event_leaves_the_head_dangling(world: World) -> None:
    pid, _, _ = _family(world)
    _tamper(world.database, "DELETE FROM charter.events WHERE process_id = %s AND seq = 4", pid)
    assert _codes(verify_process(world.database, pid)) == {(None, "head_mismatch")}


# --- spawn causes ----------------------------------------------------------------------------


def test_a_replaced_cause_in_the_envelope_is_named(world: World) -> None:
    pid, child, _ = _family(world)
    genesis = _text(world.database, child, 1)
    with world.database.connection(Role.READER) as conn:
        row = conn.execute(
            "SELECT hash FROM charter.events WHERE process_id = %s AND seq = 1", (pid,)
        ).fetchone()
    assert row is not None
    opened = str(row[0])
    cause = json.loads(genesis)["cause"]
    forged = genesis.replace(cause, opened)
    # A careful forger fixes the stored hash, the cause column and the process row too.
    _tamper(
        world.database,
        "UPDATE charter.events SET envelope = %s::json, cause_hash = %s, "
        "hash = encode(sha256(convert_to(%s, 'UTF8')), 'hex') WHERE process_id = %s",
        forged,
        opened,
        forged,
        child,
    )
    _tamper(
        world.database,
        "UPDATE charter.processes SET parent_event_hash = %s, "
        "head_hash = encode(sha256(convert_to(%s, 'UTF8')), 'hex') WHERE id = %s",
        opened,
        forged,
        child,
    )
    report = verify_process(world.database, child)
    assert _codes(report) == {(1, "bad_cause")}
    assert "'open' spawns no process" in report.problems[0].message


def test_a_replaced_cause_column_is_named(world: World) -> None:
    _, child, grandchild = _family(world)
    _tamper(
        world.database,
        "UPDATE charter.events SET cause_hash = repeat('c', 64) WHERE process_id = %s",
        grandchild,
    )
    assert _codes(verify_process(world.database, grandchild)) == {(1, "field_mismatch")}
    assert verify_process(world.database, child).ok


def test_a_tampered_parent_event_breaks_its_childrens_causes(world: World) -> None:
    pid, child, grandchild = _family(world)
    _tamper(
        world.database,
        "UPDATE charter.events SET signature = repeat('a', 128) WHERE process_id = %s AND seq = 4",
        pid,
    )
    assert _codes(verify_process(world.database, pid)) == {(4, "bad_signature")}
    for process_id in (child, grandchild):
        report = verify_process(world.database, process_id)
        assert _codes(report) == {(1, "bad_cause")}
        assert "signature" in report.problems[0].message


# --- the CLI ---------------------------------------------------------------------------------


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("verify")(verify_cli.verify)
    app.command("export")(verify_cli.export)
    return app


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, world: World, tmp_path: Path) -> None:
    monkeypatch.setenv("CHARTER_DATABASE_URL", world.database.url)
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))


@pytest.mark.usefixtures("cli_env")
def test_cli_verify_one_process(world: World) -> None:
    pid, _, _ = _family(world)
    runner = CliRunner()
    result = runner.invoke(_cli(), ["verify", pid, "--replay"])
    assert result.exit_code == 0, result.output
    assert f"{pid}: ok (4 events verified)" in result.stdout
    result = runner.invoke(_cli(), ["verify", pid, "--json"])
    assert json.loads(result.stdout) == {"ok": True, "events": 4, "problems": []}
    _tamper(
        world.database,
        "UPDATE charter.events SET signature = repeat('b', 128) WHERE process_id = %s AND seq = 2",
        pid,
    )
    result = runner.invoke(_cli(), ["verify", pid])
    assert result.exit_code == 1
    assert "bad_signature" in result.stdout
    assert "1 problem(s) in 4 events" in result.stdout
    result = runner.invoke(_cli(), ["verify", pid, "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problems"][0]["seq"] == 2


@pytest.mark.usefixtures("cli_env")
def test_cli_verify_all_summarizes_and_lists_failures(world: World) -> None:
    good, _, _ = _family(world)
    bad, _, _ = _family(world)
    _tamper(world.database, "UPDATE charter.processes SET seq = 2 WHERE id = %s", bad)
    runner = CliRunner()
    result = runner.invoke(_cli(), ["verify", "--all", "--json"])
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    failed = {entry["process"] for entry in summary["failed"]}
    assert bad in failed
    assert good not in failed
    assert summary["ok"] == summary["processes"] - len(failed)
    result = runner.invoke(_cli(), ["verify", "--all"])
    assert result.exit_code == 1
    assert bad in result.stdout
    assert f"{summary['processes']} process(es)" in result.stdout
    assert "verifying" in result.stderr  # the progress bar


@pytest.mark.usefixtures("cli_env")
def test_cli_verify_all_in_worker_processes_prints_what_one_process_prints(world: World) -> None:
    edited, _, _ = _family(world)
    broken, child, _ = _family(world)
    _tamper(world.database, "UPDATE charter.processes SET seq = 2 WHERE id = %s", broken)
    _tamper(
        world.database,
        "UPDATE charter.processes SET head_hash = repeat('d', 64) WHERE id = %s",
        child,
    )
    # Only replay finds this one.
    _tamper(
        world.database, "UPDATE charter.processes SET data = data - 'notes' WHERE id = %s", edited
    )
    runner = CliRunner()
    for extra in (["--json"], [], ["--replay", "--json"]):
        alone = runner.invoke(_cli(), ["verify", "--all", "--jobs", "1", *extra])
        pooled = runner.invoke(_cli(), ["verify", "--all", "--jobs", "3", *extra])
        assert alone.exit_code == pooled.exit_code == 1, pooled.output
        assert pooled.stdout == alone.stdout
    failed = [entry["process"] for entry in json.loads(pooled.stdout)["failed"]]
    assert {broken, child, edited} <= set(failed)


def test_verify_processes_keeps_the_order_given(world: World) -> None:
    ids = [pid for family in (_family(world), _family(world)) for pid in family]
    _tamper(world.database, "UPDATE charter.processes SET seq = 9 WHERE id = %s", ids[4])
    in_order = list(reversed(ids))
    pooled = list(verify_processes(world.database, in_order, jobs=2))
    assert pooled == [verify_process(world.database, pid) for pid in in_order]
    assert [report.ok for report in pooled] == [True, False, True, True, True, True]


def test_cli_jobs_needs_all_and_is_documented() -> None:
    runner = CliRunner()
    assert runner.invoke(_cli(), ["verify", "x", "--jobs", "2"]).exit_code == 2
    assert runner.invoke(_cli(), ["verify", "--bundle", "b.json", "--jobs", "2"]).exit_code == 2
    assert runner.invoke(_cli(), ["verify", "--all", "--jobs", "0"]).exit_code == 2
    help_text = runner.invoke(_cli(), ["verify", "--help"]).stdout
    assert "--jobs" in help_text
    assert "worker processes" in help_text


def test_cli_usage_needs_exactly_one_subject() -> None:
    runner = CliRunner()
    assert runner.invoke(_cli(), ["verify"]).exit_code == 2
    assert runner.invoke(_cli(), ["verify", "x", "--all"]).exit_code == 2


def test_cli_bundle_is_verified_offline(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid, child, _ = _family(world)
    runner = CliRunner()
    bundles = {}
    with monkeypatch.context() as env:
        env.setenv("CHARTER_DATABASE_URL", world.database.url)
        for process_id in (pid, child):
            result = runner.invoke(_cli(), ["export", process_id])
            assert result.exit_code == 0, result.output
            bundles[process_id] = tmp_path / f"{process_id}.json"
            bundles[process_id].write_text(result.stdout)
    # No database from here on: an unreachable URL, and no embedded server either.
    monkeypatch.setenv("CHARTER_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))
    for path in bundles.values():
        result = runner.invoke(_cli(), ["verify", "--bundle", str(path), "--replay"])
        assert result.exit_code == 0, result.output
        assert "ok" in result.stdout
    assert not (tmp_path / "home").exists()
    tampered = tmp_path / "tampered.json"
    bundle = json.loads(bundles[pid].read_text())
    signature = bundle["events"][1]["signature"]  # a different first digit, always
    bundle["events"][1]["signature"] = ("1" if signature[0] == "0" else "0") + signature[1:]
    tampered.write_text(json.dumps(bundle))
    result = runner.invoke(_cli(), ["verify", "--bundle", str(tampered), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problems"] == [
        {
            "seq": 2,
            "code": "bad_signature",
            "message": json.loads(result.stdout)["problems"][0]["message"],
        }
    ]
    result = runner.invoke(_cli(), ["verify", "--bundle", str(tampered)])
    assert result.exit_code == 1
    assert "bad_signature" in result.stdout
    tampered.write_bytes(bundles[pid].read_bytes()[:-10])
    result = runner.invoke(_cli(), ["verify", "--bundle", str(tampered)])
    assert result.exit_code == 1
    assert "malformed_bundle" in result.stdout
    result = runner.invoke(_cli(), ["verify", "--bundle", str(tmp_path / "missing.json")])
    assert result.exit_code == 2


# --- scale -----------------------------------------------------------------------------------

BIG = 10_000


def _analyze(database: Database) -> None:
    # This module's database was cloned with empty tables, so the chain triggers' cached
    # plans scan `events`: appends slow down quadratically until statistics exist.
    with connect(database.url, autocommit=True) as conn:
        conn.execute("ANALYZE charter.events")
        conn.execute("ANALYZE charter.processes")


@pytest.mark.slow  # about 25 s on 2 cores, nearly all of it writing the 20,000 rows
def test_a_process_with_10000_events_verifies(world: World) -> None:
    """Signed like any client event; written through Store so the build takes seconds."""
    pid = new_process_id()
    key = world.keys["ada"]
    at = format_rfc3339(world.clock.now())
    with world.database.connection(Role.ENGINE) as conn:
        version = Store(conn).current_workflow_version(PARENT_PATH)
        assert version is not None
        store = Store(conn)
        store.insert_process(process_id=pid, workflow_path=PARENT_PATH, state="open")
        prev: str | None = None
        for seq in range(1, BIG + 1):
            action = "open" if seq == 1 else "note"
            envelope = Envelope(
                v=1,
                process=pid,
                workflow=PARENT_PATH,
                action=action,
                input={"name": "Ada"} if seq == 1 else {},
                prev=prev,
                actor=key.public_key_hex,
                at=at,
            )
            prev = envelope.hash()
            store.insert_event(
                process_id=pid,
                seq=seq,
                event_hash=prev,
                prev_hash=envelope.prev,
                kind="action",
                envelope_text=envelope.message().decode("utf-8"),
                signature=sign(envelope, key).signature,
                actor=key.public_key_hex,
                actor_id="ada",
                actor_roles=["clerk"],
                action=action,
                workflow_path=PARENT_PATH,
                workflow_version=version,
            )
            data: JsonObject = {"name": "Ada", "notes": seq - 1} if seq > 1 else {"name": "Ada"}
            store.advance_process(process_id=pid, state="open", data=data, head_hash=prev, seq=seq)
            if seq % 1000 == 0:
                conn.commit()
            if seq == 1000:
                _analyze(world.database)
        conn.commit()
    report = verify_process(world.database, pid, replay=True)
    assert report.to_json() == {"ok": True, "events": BIG, "problems": []}
    _tamper(
        world.database,
        "UPDATE charter.events SET signature = repeat('a', 128) WHERE process_id = %s AND seq = %s",
        pid,
        BIG // 2,
    )
    assert _codes(verify_process(world.database, pid)) == {(BIG // 2, "bad_signature")}
