"""The automation worker as real `charter worker` processes, under concurrency and faults
(docs/automation.md and docs/architecture.md): racing workers, kill -9 mid-batch, a PostgreSQL
restart, a lost
notification, a worker paused inside its batch, a locked process, a graceful SIGTERM,
and the refusal to start without the right key.

Every wait is bounded and every child is killed in `finally`; nothing here asserts on
timing, only on what happened.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from charter.core.crashpoints import ENVIRONMENT_VARIABLE, FIRED_BEFORE_BOOKKEEPING
from charter.core.ed25519 import SecretKey
from charter.db.database import connect
from charter.db.embedded import EmbeddedServer
from charter.db.migrate import migrate
from tests.acceptance.automation_world import (
    SCHEDULED,
    Keys,
    WedgingProxy,
    assert_fired_exactly_once,
    automation_events,
    due_times,
    host_and_port,
    open_processes,
    owner,
    setup_world,
    system_log,
    unfinished,
    wait_until,
    work_rows,
    worker_env,
    worker_pool,
)
from tests.acceptance.processes import charter_env, run_charter
from tests.conftest import create_database, drop_database, unique_name

pytestmark = pytest.mark.slow

RACE_ROWS = 5_000  # half scheduled actions, half automatic-action queue rows
LONG = 600.0  # the bound on any wait: a hang fails, it does not block CI forever


@contextlib.contextmanager
def cloned(admin_url: str, template: str) -> Iterator[str]:
    name = unique_name("charter_t_faults")
    url = create_database(admin_url, name, template=template)
    try:
        yield url
    finally:
        drop_database(admin_url, name)


@pytest.fixture(scope="module")
def due_world(pg_admin_url: str, template_database: str) -> Iterator[tuple[str, Keys]]:
    """A database holding RACE_ROWS due work rows, built once; each race runs on a copy."""
    name = unique_name("charter_t_due")
    url = create_database(pg_admin_url, name, template=template_database)
    try:
        keys = setup_world(url)
        past = datetime.now(UTC) - timedelta(minutes=1)
        open_processes(url, keys, scheduled=[past] * (RACE_ROWS // 2), automatic=RACE_ROWS // 2)
        yield name, keys
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture
def small_world(pg_admin_url: str, template_database: str) -> Iterator[tuple[str, Keys]]:
    """A migrated database of this test's own with the workflows and actors, no work yet."""
    with cloned(pg_admin_url, template_database) as url:
        yield url, setup_world(url)


def _past(count: int) -> list[datetime]:
    """`count` due times in the recent past, oldest first, a tenth of a second apart."""
    return due_times(
        count, start=datetime.now(UTC) - timedelta(seconds=30), spread_seconds=count / 10
    )


def _rows_claimed_by(url: str, worker: str) -> int:
    return sum(1 for row in work_rows(url) if row.claimed_by == worker)


def _lock_waiters(url: str) -> int:
    """Backends waiting for a row lock (a worker blocked on a locked process)."""
    with owner(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def _blocked_statements(url: str) -> list[tuple[str, str]]:
    """(application, statement) of every backend waiting for a lock."""
    with owner(url) as conn:
        rows = conn.execute(
            "SELECT application_name, left(query, 120) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    return [(str(app), str(statement)) for app, statement in rows]


@contextlib.contextmanager
def processes_locked(url: str, limit: int) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Hold `limit` scheduled process rows locked, as a person's event in progress would."""
    conn = psycopg.connect(url, connect_timeout=10)
    try:
        conn.execute(
            "SELECT id FROM charter.processes WHERE workflow_path = %s ORDER BY id LIMIT %s"
            " FOR UPDATE",
            (SCHEDULED, limit),
        )
        yield conn
    finally:
        conn.rollback()
        conn.close()


# --- 1. racing workers ------------------------------------------------------------------


@pytest.mark.parametrize("worker_count", [2, 4])
def test_racing_workers_fire_every_due_row_exactly_once(
    pg_admin_url: str, due_world: tuple[str, Keys], tmp_path: Path, worker_count: int
) -> None:
    template, keys = due_world
    with cloned(pg_admin_url, template) as url:
        assert unfinished(url) == RACE_ROWS
        with worker_pool(tmp_path, url, keys) as pool:
            settings = ["--lease-seconds", "10", "--batch-size", "25", "--concurrency", "4",
                        "--sweep-seconds", "2"]  # fmt: skip
            workers = [
                pool.start(f"race{worker_count}-{i}", *settings) for i in range(worker_count)
            ]
            wait_until(
                lambda: unfinished(url) == 0,
                timeout=LONG,
                what=f"{RACE_ROWS} rows to fire",
                alive=workers,
                interval=1.0,
            )
            codes = [worker.terminate() for worker in workers]
        assert codes == [0] * worker_count, [w.stderr()[-2000:] for w in workers]
        assert_fired_exactly_once(url, expected_rows=RACE_ROWS)
        fired_by = Counter(event.worker for event in automation_events(url))
        # They really raced: more than one worker fired, and nobody else did.
        assert len(fired_by) >= 2, fired_by
        assert set(fired_by) <= {w.name for w in workers}
        totals = sum(int(w.stderr().rsplit("fired ", 1)[1].split()[0]) for w in workers)
        assert totals == RACE_ROWS  # each worker counts what it fired; together, each row once


# --- 2. kill -9 in the middle of a batch ----------------------------------------------------


def test_a_worker_killed_mid_batch_commits_nothing_and_every_row_fires_once_later(
    small_world: tuple[str, Keys], tmp_path: Path
) -> None:
    url, keys = small_world
    open_processes(url, keys, scheduled=_past(3), automatic=2)
    with worker_pool(tmp_path, url, keys) as pool:
        crasher = pool.start(
            "crasher", "--batch-size", "10", "--concurrency", "1",
            env=worker_env(url, keys, **{ENVIRONMENT_VARIABLE: FIRED_BEFORE_BOOKKEEPING}),
        )  # fmt: skip
        assert crasher.popen.wait(timeout=120) == -signal.SIGKILL, crasher.stderr()

        # It died right after its batch's first accepted fire, before the COMMIT: the
        # event, the claims and every log row of the batch went with the transaction.
        assert automation_events(url) == []
        rows = work_rows(url)
        assert len(rows) == 5
        assert all(
            row.status in ("active", "pending") and row.claimed_by is None and row.attempts == 0
            for row in rows
        ), rows
        assert not system_log(url, "kind LIKE 'worker.%%' OR kind = 'event.rejected'")

        survivor = pool.start("survivor", "--sweep-seconds", "1")
        wait_until(lambda: unfinished(url) == 0, timeout=120, what="the rows", alive=[survivor])
        assert survivor.terminate() == 0, survivor.stderr()

    rows = assert_fired_exactly_once(url, expected_rows=5)
    assert {event.worker for event in automation_events(url)} == {"survivor"}
    assert all(row.attempts == 1 for row in rows)


# --- 3. PostgreSQL restarted under load ----------------------------------------------------


def test_a_postgresql_restart_under_load_loses_nothing(tmp_path: Path) -> None:
    # An embedded server of this test's own (a short path: its Unix socket lives there).
    base = Path(f"/tmp/chw-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    pgdata = base / "pgdata"
    server = EmbeddedServer(pgdata)
    try:
        url = server.url
        with connect(url) as conn:
            migrate(conn)
        keys = setup_world(url)
        # A stream: 600 schedules falling due over 30 s, and 200 automatic actions.
        stream = due_times(600, start=datetime.now(UTC) + timedelta(seconds=5), spread_seconds=30)
        open_processes(url, keys, scheduled=stream, automatic=200)
        total = 800
        with worker_pool(tmp_path, url, keys) as pool:
            worker = pool.start(
                "steady", "--lease-seconds", "5", "--concurrency", "4", "--sweep-seconds", "2"
            )
            wait_until(
                lambda: len(automation_events(url)) >= 300,
                timeout=LONG,
                what="the worker to be busy",
                alive=[worker],
            )
            before_restart = len(automation_events(url))
            server.close()  # `pg_ctl stop` (fast): every connection is cut
            with contextlib.suppress(psycopg.OperationalError):
                psycopg.connect(url, connect_timeout=2).close()
                pytest.fail("the server is still up")
            time.sleep(3)  # down for a while, with rows falling due meanwhile
            server = EmbeddedServer(pgdata)
            assert server.url == url
            wait_until(
                lambda: unfinished(url) == 0, timeout=LONG, what="the stream", alive=[worker]
            )
            assert worker.alive()
            assert worker.terminate() == 0, worker.stderr()
        log = worker.stderr()
        assert "listener lost its connection" in log, log[-3000:]
        assert before_restart < total  # the restart hit it mid-stream
        assert_fired_exactly_once(url, expected_rows=total)
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)


# --- 4. a lost notification: the sweep finds the work ----------------------------------


def test_a_notification_lost_on_a_wedged_listener_is_fired_by_the_sweep(
    small_world: tuple[str, Keys], tmp_path: Path
) -> None:
    """The honest way to lose a NOTIFY: the worker talks to PostgreSQL through a proxy
    that, on cue, stops delivering anything to the LISTEN connection while keeping it
    open (a half-open TCP connection after a partition). The listener neither hears
    nor notices, so it never reconnects and never triggers its rescan; the only thing
    left that can find the new row is the safety sweep."""
    url, keys = small_world
    proxy = WedgingProxy(*host_and_port(url))
    try:
        open_processes(url, keys, automatic=1)  # a primer: proves the worker is up and idle
        with worker_pool(tmp_path, url, keys) as pool:
            worker = pool.start("sweeper", "--sweep-seconds", "3",
                                env=worker_env(proxy.url(url), keys))  # fmt: skip
            wait_until(
                lambda: unfinished(url) == 0 and proxy.listener_connections == 1,
                timeout=120,
                what="the primer to fire",
                alive=[worker],
            )
            proxy.wedge_listener()
            (opened,) = open_processes(url, keys, automatic=1, prefix="lost")
            # The NOTIFY was sent to the listener, and dropped on the way.
            wait_until(lambda: proxy.withheld_bytes > 0, timeout=60, what="the NOTIFY")
            wait_until(lambda: unfinished(url) == 0, timeout=120, what="the sweep", alive=[worker])
            # No reconnect happened (so no rescan-on-reconnect): the sweep fired it.
            assert proxy.listener_connections == 1
            assert worker.terminate() == 0, worker.stderr()
    finally:
        proxy.close()
    rows = assert_fired_exactly_once(url, expected_rows=2)
    assert any(row.process_id == opened and row.status == "completed" for row in rows)


# --- 5. a worker paused inside its batch ------------------------------------------------

# Test-only hook run in the child before `charter worker`: at the crash point (an event
# accepted inside the batch, the batch not yet committed) the process stops itself once
# instead of dying, exactly as SIGSTOP from outside would freeze it in that window.
PAUSE_AFTER_FIRING = """
import os, signal
import charter.firing.batch as firing
_paused = []
def _pause(name):
    if name == firing.FIRED_BEFORE_BOOKKEEPING and not _paused:
        _paused.append(name)
        os.kill(os.getpid(), signal.SIGSTOP)
firing.crash_point = _pause
"""


def test_a_worker_paused_inside_its_batch_loses_it_and_records_nothing_late(
    small_world: tuple[str, Keys], tmp_path: Path
) -> None:
    url, keys = small_world
    open_processes(url, keys, scheduled=_past(3))
    with worker_pool(tmp_path, url, keys) as pool:
        sleeper = pool.start(
            "sleeper", "--lease-seconds", "5", "--batch-size", "10", "--concurrency", "1",
            "--verbose", prelude=PAUSE_AFTER_FIRING,
        )  # fmt: skip
        wait_until(sleeper.stopped, timeout=120, what="the worker to pause", alive=[sleeper])
        # Its batch is open: its event and its claims are visible to nobody else.
        assert automation_events(url) == []
        assert _rows_claimed_by(url, "sleeper") == 0

        # Past the lease PostgreSQL ends the paused session (idle in transaction): the
        # batch rolls back, its locks go, and another worker fires every row.
        reclaimer = pool.start("reclaimer", "--lease-seconds", "5", "--sweep-seconds", "1")
        wait_until(lambda: unfinished(url) == 0, timeout=120, what="the reclaimer",
                   alive=[reclaimer])  # fmt: skip
        os.kill(sleeper.pid, signal.SIGCONT)
        wait_until(
            lambda: "a batch failed" in sleeper.stderr(),
            timeout=60,
            what="the resumed worker to find its batch gone",
            alive=[sleeper],
        )
        assert sleeper.terminate() == 0, sleeper.stderr()
        assert reclaimer.terminate() == 0, reclaimer.stderr()

    rows = assert_fired_exactly_once(url, expected_rows=3)
    assert {event.worker for event in automation_events(url)} == {"reclaimer"}
    assert all(row.fire_count == 1 and row.attempts == 1 for row in rows)
    assert not system_log(url, "kind LIKE 'worker.%%' AND detail->>'worker' = 'sleeper'")


def test_a_batch_never_waits_for_a_locked_process_it_skips_its_rows(
    small_world: tuple[str, Keys], tmp_path: Path
) -> None:
    url, keys = small_world
    open_processes(url, keys, scheduled=_past(10))
    with worker_pool(tmp_path, url, keys) as pool:
        # A person's long transaction holds three of the ten processes.
        with processes_locked(url, limit=3):
            worker = pool.start("steady", "--sweep-seconds", "1")
            wait_until(
                lambda: sum(r.status == "exhausted" for r in work_rows(url)) == 7,
                timeout=120,
                what="the seven free rows",
                alive=[worker],
            )
            time.sleep(1.5)  # a sweep or two more: the locked ones are still skipped
            assert _lock_waiters(url) == 0, _blocked_statements(url)
            assert unfinished(url) == 3
        wait_until(lambda: unfinished(url) == 0, timeout=120, what="the last three",
                   alive=[worker])  # fmt: skip
        assert worker.terminate() == 0, worker.stderr()
    assert_fired_exactly_once(url, expected_rows=10)


# --- 6. graceful SIGTERM ----------------------------------------------------------------


# Test-only hook: at the first accepted fire, say so and hold the batch for a while,
# so the test can send SIGTERM while the batch is under way.
HOLD_AFTER_FIRING = """
import sys, time
import charter.firing.batch as firing
_held = []
def _hold(name):
    if name == firing.FIRED_BEFORE_BOOKKEEPING and not _held:
        _held.append(name)
        print("held after firing", file=sys.stderr, flush=True)
        time.sleep(3)
firing.crash_point = _hold
"""


def test_sigterm_finishes_the_firing_under_way_and_releases_the_rest_of_the_batch(
    small_world: tuple[str, Keys], tmp_path: Path
) -> None:
    url, keys = small_world
    open_processes(url, keys, scheduled=_past(10))
    with worker_pool(tmp_path, url, keys) as pool:
        worker = pool.start(
            "stopping", "--batch-size", "10", "--concurrency", "1", prelude=HOLD_AFTER_FIRING
        )
        wait_until(
            lambda: "held after firing" in worker.stderr(),
            timeout=120,
            what="the first fire of the batch",
            alive=[worker],
        )
        worker.popen.send_signal(signal.SIGTERM)
        assert worker.popen.wait(timeout=60) == 0, worker.stderr()

    rows = work_rows(url)
    assert not [row for row in rows if row.claimed_by is not None or row.status == "claimed"]
    done = [row for row in rows if row.status == "exhausted"]
    waiting = [row for row in rows if row.status == "active"]
    # The one firing under way finished and was recorded; the rest went back untouched.
    assert len(done) == 1
    assert len(waiting) == 9
    assert all(row.attempts == 0 and row.fired_event_hash is None for row in waiting)
    assert len(automation_events(url)) == 1
    assert "fired 1" in worker.stderr()


# --- 7. the key check at start -----------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "secret", "expected"),
    [
        ("missing", None, "no automation key: set AUTOMATION_ACTOR_SK"),
        ("malformed", "not-a-key", "AUTOMATION_ACTOR_SK is not a secret key"),
        ("short", "ab" * 31, "AUTOMATION_ACTOR_SK is not a secret key"),
        ("mismatched", SecretKey.generate().hex(), "does not match the automation actor"),
    ],
    ids=["missing", "malformed", "short", "mismatched"],
)
def test_the_worker_refuses_to_start_without_the_matching_key(
    small_world: tuple[str, Keys], tmp_path: Path, case: str, secret: str | None, expected: str
) -> None:
    url, _ = small_world
    env = charter_env(CHARTER_DATABASE_URL=url, CHARTER_HOME=str(tmp_path / case),
                      AUTOMATION_ACTOR_SK=secret)  # fmt: skip
    result = run_charter("worker", env=env, timeout=60)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert expected in lines[0]
    assert "started" not in result.stderr


def test_the_worker_refuses_to_start_when_the_automation_actor_is_not_registered(
    pg_admin_url: str, template_database: str, tmp_path: Path
) -> None:
    with cloned(pg_admin_url, template_database) as url:
        env = charter_env(CHARTER_DATABASE_URL=url, CHARTER_HOME=str(tmp_path),
                          AUTOMATION_ACTOR_SK=SecretKey.generate().hex())  # fmt: skip
        result = run_charter("worker", env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: the automation actor is not registered; `charter up` registers it on first "
        "start, or register it with `charter actors add automation --key-file FILE "
        "--role AUTOMATION`"
    ]
