"""The log queue on the engine's real write path (process_event → apply_writes_v1), and
one sequencer tick in process over it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.core.errors import Duplicate
from charter.core.metrics import REGISTRY
from charter.db.database import Database, Role, connect
from charter.tlog import store
from charter.tlog.entry import LogEntry
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import root_of
from charter.tlog.note import Ed25519Signer
from charter.tlog.policy import parse_policy
from charter.tlog.proof import TlogProof, verify_proof
from charter.tlog.sequencer import Sequencer
from tests.integration.world import (
    ONBOARDING,
    World,
    new_process_id,
    onboarding_definition,
    scratch_database,
)

SALT = bytes(range(32))


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    w.deploy(ONBOARDING, onboarding_definition())
    w.actor("ada", "customer")
    with connect(database.url, Role.SEQUENCER) as conn:
        store.enable_queue(conn)  # what a sequencer does when it first leads
        conn.commit()
    return w


def _rows(database: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with database.connection(Role.READER) as conn:
        return conn.execute(sql, params).fetchall()


def test_accepted_events_are_queued_and_one_tick_logs_them(world: World, tmp_path: Path) -> None:
    pids = [new_process_id() for _ in range(3)]
    hashes = [world.submit("ada", "open", pid, None, input_={"name": "Ada"}).hash for pid in pids]
    with pytest.raises(Duplicate):  # a rejected submission queues nothing
        world.submit("ada", "open", pids[0], None, input_={"name": "Ada"})
    queued = _rows(
        world.database,
        "SELECT event_hash, process_id, seq, prev_hash FROM charter.log_pending"
        " WHERE process_id = ANY(%s) ORDER BY queued_at",
        pids,
    )
    assert queued == [(h, pid, 1, None) for h, pid in zip(hashes, pids, strict=True)]

    log = LogDirectory(tmp_path / "log")
    sequencer = Sequencer(world.database.url, log, Ed25519Signer.generate("test/log"), SALT)
    with connect(world.database.url, Role.SEQUENCER) as conn:
        result = sequencer.tick(conn)
        oldest = REGISTRY.get_sample_value("charter_log_pending_oldest_seconds")
        assert oldest is not None
        assert oldest > 0  # the window those events waited in
        sequencer.tick(conn)  # nothing left
        assert REGISTRY.get_sample_value("charter_log_pending_oldest_seconds") == 0
    sequencer.close()
    logged = _rows(
        world.database, "SELECT process_id, seq, event_hash FROM charter.log_entries ORDER BY idx"
    )
    assert result.appended == len(logged) >= 3
    assert {h for *_, h in logged} >= set(hashes)
    assert _rows(world.database, "SELECT count(*) FROM charter.log_pending") == [(0,)]
    checkpoint = log.checkpoint()
    assert checkpoint is not None
    entries = [
        LogEntry.for_event(log_salt=SALT, process_id=p, seq=s, event_hash_hex=h)
        for p, s, h in logged
    ]
    assert checkpoint.size == len(entries)
    assert checkpoint.root == root_of([e.leaf_hash() for e in entries])
    assert log.entries(0, checkpoint.size) == entries


def _published(log: LogDirectory) -> set[str]:
    """Every file of the log directory: what a mirror (rsync, object storage) copies."""
    return {p.relative_to(log.root).as_posix() for p in log.root.rglob("*") if p.is_file()}


@pytest.fixture
def fresh(pg_admin_url: str, template_database: str) -> Iterator[World]:
    """A world of its own: a sequencer starting on a new log directory needs a database
    that recorded nothing logged."""
    with scratch_database(pg_admin_url, template_database) as database:
        w = World(database)
        w.deploy(ONBOARDING, onboarding_definition())
        w.actor("ada", "customer")
        yield w


def test_the_published_directory_holds_tiles_and_checkpoint_only(
    fresh: World, tmp_path: Path
) -> None:
    world = fresh
    world.submit("ada", "open", new_process_id(), None, input_={"name": "Ada"})
    log = LogDirectory(tmp_path / "log", tmp_path / "private")
    sequencer = Sequencer(world.database.url, log, Ed25519Signer.generate("test/log"), SALT)
    with connect(world.database.url, Role.SEQUENCER) as conn:
        assert sequencer.tick(conn).appended >= 1
    sequencer.close()
    files = _published(log)
    assert "checkpoint" in files
    assert all(f == "checkpoint" or f.startswith("tile/") for f in files), files
    assert (tmp_path / "private" / "heads.sqlite").is_file()  # the sequencer's own, apart
    assert LogDirectory(tmp_path / "log").state == tmp_path / "log-state"  # the default


def test_a_state_directory_inside_the_log_is_moved_out_on_start(
    fresh: World, tmp_path: Path
) -> None:
    world = fresh
    # The layout of earlier versions: the sequencer's files under <log>/state/.
    world.submit("ada", "open", new_process_id(), None, input_={"name": "Ada"})
    signer = Ed25519Signer.generate("test/log")
    old = LogDirectory(tmp_path / "log", tmp_path / "log" / "state")
    sequencer = Sequencer(world.database.url, old, signer, SALT)
    with connect(world.database.url, Role.SEQUENCER) as conn:
        sequencer.tick(conn)
    sequencer.close()
    old.record_halt("log_gap", "an old halt")  # cleared by the next start, wherever it is
    (tmp_path / "log" / "state" / "witness-sizes.json").write_text('{"w1": 3}')
    size = old.size()
    world.submit("ada", "open", new_process_id(), None, input_={"name": "Bo"})

    log = LogDirectory(tmp_path / "log")
    sequencer = Sequencer(world.database.url, log, signer, SALT)
    with connect(world.database.url, Role.SEQUENCER) as conn:
        assert sequencer.tick(conn).appended >= 1  # the moved head index is used, as it was
    sequencer.close()
    assert not (tmp_path / "log" / "state").exists()
    assert (log.state / "heads.sqlite").is_file()
    assert (log.state / "witness-sizes.json").read_text() == '{"w1": 3}'
    assert log.halted() is None
    assert log.size() > size
    assert all(f == "checkpoint" or f.startswith("tile/") for f in _published(log))


def test_nothing_is_queued_until_a_log_leads_and_then_everything_is(
    pg_admin_url: str, template_database: str
) -> None:
    with scratch_database(pg_admin_url, template_database) as database:
        world = World(database)
        world.deploy(ONBOARDING, onboarding_definition())
        world.actor("ada", "customer")
        before, after = new_process_id(), new_process_id()
        first = world.submit("ada", "open", before, None, input_={"name": "Ada"}).hash
        queued = "SELECT event_hash FROM charter.log_pending ORDER BY queued_at"
        assert _rows(database, queued) == []  # no log: the queue does not grow
        with connect(database.url, Role.SEQUENCER) as conn:
            assert store.enable_queue(conn) == 1  # the event accepted before, backfilled
            conn.commit()
            assert store.enable_queue(conn) == 0  # once on, on
            conn.commit()
        second = world.submit("ada", "open", after, None, input_={"name": "Bo"}).hash
        assert _rows(database, queued) == [(first,), (second,)]
        with psycopg.connect(database.url) as owner:  # not even the owner turns it off
            for statement in ("DELETE FROM charter.log_queue_on", "TRUNCATE charter.log_queue_on"):
                with pytest.raises(psycopg.Error) as refused:
                    owner.execute(statement)
                assert refused.value.sqlstate == "CHA01"  # append-only
                owner.rollback()


def test_wait_log_answers_with_a_receipt_that_verifies(
    pg_admin_url: str, template_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARTER_LOG_DIR", str(tmp_path / "log"))
    signer = Ed25519Signer.generate("test/receipts")
    policy = parse_policy(f"log {signer.verifier().vkey}\nquorum none\n")
    with scratch_database(pg_admin_url, template_database) as database:
        world = World(database)
        world.deploy(ONBOARDING, onboarding_definition())
        world.actor("ada", "customer")
        log = LogDirectory(tmp_path / "log")
        sequencer = Sequencer(database.url, log, signer, SALT, batch_ms=20)
        stop = threading.Event()
        thread = threading.Thread(target=sequencer.run, args=(stop,))
        thread.start()
        try:
            # wait=log answers null at once while no log directory exists: let the
            # sequencer create it first (on a busy machine its start can lag the POST).
            for _ in range(600):
                if log.exists():
                    break
                time.sleep(0.05)
            with TestClient(create_app(database, engine=world.engine)) as http:
                pid = new_process_id()
                body = world.signed("ada", "open", pid, None, input_={"name": "Ada"}).to_json()
                answer = http.post("/v1/events?wait=log&timeout=20", json=body)
                assert answer.status_code == 201, answer.text
                receipt = answer.json()["log"]
                entry = LogEntry.for_event(
                    log_salt=SALT, process_id=pid, seq=1, event_hash_hex=answer.json()["hash"]
                )
                proof = TlogProof.parse(receipt["proof"])
                assert proof.index == receipt["index"]
                verify_proof(proof, entry.leaf_hash(), policy)

                bad = http.post("/v1/events?wait=soon", json=body)
                assert (bad.status_code, bad.json()["error"]["code"]) == (400, "malformed")
                stop.set()
                thread.join()
                other = world.signed("ada", "open", new_process_id(), None, input_={"name": "B"})
                late = http.post("/v1/events?wait=log&timeout=0", json=other.to_json())
                assert late.status_code == 201
                assert late.json()["log"] is None  # nobody sequences: still accepted
        finally:
            stop.set()
            thread.join()


def test_the_publish_hook_retries_until_published_and_halts_behind_a_witness(
    pg_admin_url: str, template_database: str, tmp_path: Path
) -> None:
    from charter.core.errors.log import CheckpointNotPublished, LogBehindWitness
    from charter.tlog.checkpoint import Checkpoint

    calls: list[int] = []

    def witnesses(note: bytes, checkpoint: Checkpoint, old_size: int) -> bytes:
        calls.append(checkpoint.size)
        if len(calls) == 1:
            raise CheckpointNotPublished("no quorum yet")
        if checkpoint.size > 1:
            raise LogBehindWitness("w1 holds size 9")
        return note

    with scratch_database(pg_admin_url, template_database) as database:
        world = World(database)
        world.deploy(ONBOARDING, onboarding_definition())
        world.actor("ada", "customer")
        world.submit("ada", "open", new_process_id(), None, input_={"name": "Ada"})
        log = LogDirectory(tmp_path / "log")
        signer = Ed25519Signer.generate("test/hook")
        sequencer = Sequencer(database.url, log, signer, SALT, batch_ms=10, publish=witnesses)
        stop = threading.Event()
        result: list[object] = []

        def run() -> None:
            result.append(sequencer.run(stop))

        thread = threading.Thread(target=run)
        thread.start()
        try:
            deadline = 200
            while log.size() < 1 and deadline:  # retried after "no quorum yet"
                time.sleep(0.05)
                deadline -= 1
            assert log.size() == 1
            world.submit("ada", "open", new_process_id(), None, input_={"name": "Bo"})
            thread.join(timeout=30)
        finally:
            stop.set()
            thread.join()
        [halt] = result
        assert isinstance(halt, LogBehindWitness)
        assert log.size() == 1  # the checkpoint a witness refused was never written
        assert log.halted() == {"code": "log_behind_witness", "message": "w1 holds size 9"}
        assert calls[:2] == [1, 1]
