"""The sequencer as a real process against real PostgreSQL: concurrent writers, kill -9 at each
crash point, restores."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.core.crashpoints import LOG_AFTER_CHECKPOINT, LOG_AFTER_TILES, LOG_BEFORE_DB_COMMIT
from charter.core.ed25519 import SecretKey
from charter.db.database import Role, connect
from charter.tlog.entry import process_key
from tests.acceptance.logworld import LogWorld, append_events, scratch_world
from tests.acceptance.processes import run_charter
from tests.conftest import create_database, drop_database, unique_name

WRITERS = 32


@pytest.fixture
def world(pg_admin_url: str, template_database: str, tmp_path: Path) -> Iterator[LogWorld]:
    with scratch_world(pg_admin_url, template_database, tmp_path / "home", "charter_log") as world:
        yield world


def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


def _write_concurrently(world: LogWorld, processes: list[str], actor: SecretKey, version: str,
                        per_writer: int) -> None:  # fmt: skip
    writers = [
        threading.Thread(
            target=append_events,
            args=(world.url, actor, version, processes, per_writer, seed),
        )
        for seed in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()


def test_concurrent_writers_are_each_logged_once_in_order(world: LogWorld) -> None:
    actor, version, processes = world.seed(40)
    sequencer = world.sequencer()
    try:
        _write_concurrently(world, processes, actor, version, per_writer=20)
        world.wait_drained(sequencer)
    finally:
        code, err = _stop(sequencer)
    assert code == 0, err
    entries = world.check_consistent()
    assert len(entries) == WRITERS * 20
    assert world.log.halted() is None


def test_a_standby_takes_over_when_the_leader_dies(world: LogWorld) -> None:
    actor, version, processes = world.seed(5)
    leader = world.sequencer()
    append_events(world.url, actor, version, processes, 20, seed=1)
    world.wait_drained(leader)
    standby = world.sequencer()
    try:
        leader.kill()
        leader.wait(timeout=60)
        append_events(world.url, actor, version, processes, 20, seed=2)
        world.wait_drained(standby)
    finally:
        code, err = _stop(standby)
    assert code == 0, err
    assert len(world.check_consistent()) == 40


@pytest.mark.parametrize("point", [LOG_AFTER_TILES, LOG_AFTER_CHECKPOINT, LOG_BEFORE_DB_COMMIT])
def test_a_crash_mid_batch_then_restart_is_consistent(world: LogWorld, point: str) -> None:
    actor, version, processes = world.seed(6)
    append_events(world.url, actor, version, processes, 30, seed=3)
    crashing = world.sequencer(CHARTER_CRASH_POINT=point)
    crashing.communicate(timeout=120)
    assert crashing.returncode == -signal.SIGKILL
    append_events(world.url, actor, version, processes, 10, seed=4)
    restarted = world.sequencer()
    try:
        world.wait_drained(restarted)
    finally:
        code, err = _stop(restarted)
    assert code == 0, err
    assert len(world.check_consistent()) == 40


def test_a_restored_backup_halts_the_sequencer_with_db_behind_log(
    world: LogWorld, pg_admin_url: str, tmp_path: Path
) -> None:
    actor, version, processes = world.seed(3)
    sequencer = world.sequencer()
    try:
        append_events(world.url, actor, version, processes, 15, seed=5)
        world.wait_drained(sequencer)
        dump = tmp_path / "before.sql"
        subprocess.run(["pg_dump", "-f", str(dump), world.url], check=True)
        append_events(world.url, actor, version, processes, 10, seed=6)
        _, _, (created_after,) = world.seed(1)  # a process the dump never saw
        append_events(world.url, actor, version, [created_after], 2, seed=7)
        world.wait_drained(sequencer)
    finally:
        code, err = _stop(sequencer)
    assert code == 0, err
    name = unique_name("charter_restored")
    restored = create_database(pg_admin_url, name)
    try:
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), restored],
            check=True,
            capture_output=True,
        )
        halted = run_charter(
            "log", "sequence", env={**world.env(), "CHARTER_DATABASE_URL": restored}
        )
        assert halted.returncode == 3, halted.stderr
        assert "db_behind_log" in halted.stderr
        halt = world.log.halted()
        assert halt is not None
        assert halt["code"] == "db_behind_log"
        with connect(restored) as conn:
            logged = conn.execute(
                "SELECT code FROM system_log WHERE kind = 'log.halted'"
            ).fetchall()
        assert logged == [("db_behind_log",)]

        heads = "SELECT id, seq FROM processes"
        with connect(world.url) as now, connect(restored) as then:
            before: dict[object, object] = {r[0]: r[1] for r in then.execute(heads)}
            moved = {(pid, seq) for pid, seq in now.execute(heads) if pid in before} - set(
                before.items()
            )
        verified = run_charter(
            "verify", "--all", "--jobs", "1", "--log", str(world.settings.directory), "--json",
            env={**world.env(), "CHARTER_DATABASE_URL": restored},
        )  # fmt: skip
        assert moved
        assert verified.returncode == 1, verified.stderr
        failed = json.loads(verified.stdout)["failed"]
        assert {f["process"] for f in failed} == {str(pid) for pid, _ in moved}
        assert all([p["code"] for p in f["problems"]] == ["log_truncated"] for f in failed)
        # The process created after the dump is in the log only: named, with its last seq.
        (missing,) = json.loads(verified.stdout)["missing"]
        assert missing["process_key"] == process_key(world.settings.salt(), created_after).hex()
        assert (missing["code"], missing["last_seq"], missing["entries"]) == (
            "process_missing", 2, 2,
        )  # fmt: skip
    finally:
        drop_database(pg_admin_url, name)


def test_an_event_whose_predecessor_was_never_queued_halts_with_log_gap(world: LogWorld) -> None:
    actor, version, processes = world.seed(1)
    append_events(world.url, actor, version, processes, 3, seed=7)
    with connect(world.url) as conn:  # A1 deletes the queue row of seq 2 before it is logged
        conn.execute("DELETE FROM log_pending WHERE seq = 2")
        conn.commit()
    halted = run_charter("log", "sequence", env=world.env(CHARTER_LOG_GAP_SECONDS="0"))
    assert halted.returncode == 3, halted.stderr
    assert "log_gap" in halted.stderr
    assert world.log.size() == 1  # seq 1 was logged; seq 3 waits behind the gap


def test_a_log_directory_behind_the_database_halts_with_log_behind_db(
    world: LogWorld, tmp_path: Path
) -> None:
    import shutil

    actor, version, processes = world.seed(2)
    old = tmp_path / "old-log"
    shutil.copytree(world.settings.directory, old)
    sequencer = world.sequencer()
    try:
        append_events(world.url, actor, version, processes, 5, seed=8)
        world.wait_drained(sequencer)
    finally:
        code, err = _stop(sequencer)
    assert code == 0, err
    halted = run_charter("log", "sequence", env=world.env(CHARTER_LOG_DIR=str(old)))
    assert halted.returncode == 3, halted.stderr
    assert "log_behind_db" in halted.stderr


@pytest.mark.parametrize("forgery", ["no_such_event", "wrong_seq"])
def test_a_forged_queue_row_halts_with_log_queue_forged(world: LogWorld, forgery: str) -> None:
    # No foreign key stops these rows (migration 0017): the sequencer's own check must.
    actor, version, processes = world.seed(1)
    append_events(world.url, actor, version, processes, 2, seed=9)
    with connect(world.url, Role.ENGINE) as conn:  # the engine role may queue rows
        if forgery == "no_such_event":
            conn.execute(
                "INSERT INTO log_pending (event_hash, process_id, seq, prev_hash)"
                " SELECT %s, process_id, seq + 1, hash FROM events WHERE seq = 2",
                ("f" * 64,),
            )
        else:  # an existing event under another seq: the log would record a false position
            with connect(world.url) as admin:
                admin.execute("DELETE FROM log_pending WHERE seq = 2")
                admin.commit()
            conn.execute(
                "INSERT INTO log_pending (event_hash, process_id, seq, prev_hash)"
                " SELECT hash, process_id, 3, prev_hash FROM events WHERE seq = 2"
            )
        conn.commit()
    halted = run_charter("log", "sequence", env=world.env())
    assert halted.returncode == 3, halted.stderr
    assert "log_queue_forged" in halted.stderr
    halt = world.log.halted()
    assert halt is not None
    assert halt["code"] == "log_queue_forged"
    assert world.log.size() == 0  # the batch that held it was not logged
