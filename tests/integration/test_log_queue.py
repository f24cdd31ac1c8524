"""The log queue on the engine's real write path (process_event → apply_writes_v1), and
one sequencer tick in process over it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from charter.core.errors import Duplicate
from charter.db.database import Database, Role, connect
from charter.tlog.entry import LogEntry
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import root_of
from charter.tlog.note import Ed25519Signer
from charter.tlog.sequencer import Sequencer
from tests.integration.world import ONBOARDING, World, new_process_id, onboarding_definition

SALT = bytes(range(32))


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    w.deploy(ONBOARDING, onboarding_definition())
    w.actor("ada", "customer")
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
