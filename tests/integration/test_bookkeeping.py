"""The worker's SECURITY DEFINER bookkeeping functions (migration 0007; docs/automation.md):
claims with leases and SKIP LOCKED, results per lane, lease tokens, and proof that they
touch nothing but work rows."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from psycopg.rows import dict_row

from charter.auth.tokens import create_token
from charter.core.errors import CharterError, IntegrityViolation, LeaseLost, PermissionDenied
from charter.db.database import Database, Role, connect
from charter.db.queries import query
from charter.engine.work import QueueRow, ScheduledRow, WorkRow
from charter.firing.bookkeeping import Bookkeeping
from tests.integration.world import World, new_process_id, scratch_database

MANY = "tests/many"
LEASE = 30


def _many_world(database: Database) -> World:
    world = World(database)
    world.deploy(
        MANY,
        {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [{"id": "tick", "action": "tick", "in": "1h",
                                       "data": {"n": 1}}]},
                "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
                "touch": {"type": "update", "role": "AUTOMATION", "from": "*", "auto": True},
            },
        },
    )  # fmt: skip
    world.actor("ada", "customer")
    world.actor("automation", "AUTOMATION")
    return world


@pytest.fixture
def world(pg_admin_url: str, template_database: str) -> Iterator[World]:
    """A world of its own per test: batch claims take every due row in the database."""
    with scratch_database(pg_admin_url, template_database) as database:
        yield _many_world(database)


def _open(world: World, count: int) -> list[tuple[str, str]]:
    """`count` processes, each with one `tick` schedule (in 1h) and one `touch` queue row;
    returns (process id, opening event hash), a second apart."""
    opened = []
    for _ in range(count):
        pid = new_process_id()
        opened.append((pid, world.submit("ada", "open", pid, None, workflow=MANY).hash))
        world.clock.advance(seconds=1)
    return opened


def _books(conn: Any, world: World, worker: str = "w1") -> Bookkeeping:
    return Bookkeeping(conn, worker, now=world.clock.now())


def _claim_scheduled(world: World, worker: str = "w1", limit: int = 100) -> list[ScheduledRow]:
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        return _books(conn, world, worker).claim_scheduled(lease_seconds=LEASE, limit=limit)


def _claim_queue(world: World, worker: str = "w1", limit: int = 100) -> list[QueueRow]:
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        return _books(conn, world, worker).claim_queue(lease_seconds=LEASE, limit=limit)


def _row(world: World, row: WorkRow) -> dict[str, Any]:
    table = "scheduled_actions" if isinstance(row, ScheduledRow) else "automation_queue"
    with world.database.connection(Role.READER) as conn, conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(f"SELECT * FROM charter.{table} WHERE id = %s", (row.id,)).fetchone()
    assert found is not None
    return found


def _work_tables(world: World) -> list[tuple[Any, ...]]:
    with world.database.connection(Role.READER) as conn:
        return conn.execute(
            "SELECT t::text FROM charter.scheduled_actions t UNION ALL"
            " SELECT t::text FROM charter.automation_queue t ORDER BY 1"
        ).fetchall()


def _call(world: World, action: Callable[[Bookkeeping], object], worker: str = "w1") -> object:
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        return action(_books(conn, world, worker))


def _assert_lease_cleared(row: dict[str, Any]) -> None:
    assert row["claimed_by"] is None
    assert row["lease_expires_at"] is None
    assert row["lease_token"] is None


# --- claims ---------------------------------------------------------------------------------


def test_claim_batch_takes_only_due_rows_up_to_the_limit_under_a_lease(world: World) -> None:
    opened = _open(world, 5)
    assert _claim_scheduled(world) == []  # nothing is due for an hour
    world.clock.advance(hours=1, seconds=-3)  # the first three are due, the last two not
    now = world.clock.now()
    claimed = _claim_scheduled(world, limit=2)
    assert [r.process_id for r in claimed] == [pid for pid, _ in opened[:2]]  # oldest first
    for row in claimed:
        assert row.status == "claimed"
        assert row.claimed_by == "w1"
        assert row.lease_expires_at == now + timedelta(seconds=LEASE)
        assert row.lease_token is not None
        assert row.run_at <= now
    assert len({r.lease_token for r in claimed}) == 2
    [third] = _claim_scheduled(world, limit=10)
    assert third.process_id == opened[2][0]
    assert _claim_scheduled(world) == []
    # Queue rows are claimable at once, in queue order.
    queue = _claim_queue(world, limit=4)
    assert [r.process_id for r in queue] == [pid for pid, _ in opened[:4]]
    assert all(r.status == "claimed" and r.claimed_by == "w1" for r in queue)
    assert [r.process_id for r in _claim_queue(world)] == [opened[4][0]]


def test_claim_single_takes_an_active_row_once(world: World) -> None:
    [(pid, _)] = _open(world, 1)
    [sched] = _work_ids(world, "scheduled_actions", pid)
    [queued] = _work_ids(world, "automation_queue", pid)
    # A single claim takes only a due row: nobody fires a deadline before it.
    assert _call(world, lambda b: b.claim_scheduled_one(sched, lease_seconds=LEASE)) is None
    world.clock.advance(hours=48)
    first = _call(world, lambda b: b.claim_scheduled_one(sched, lease_seconds=LEASE))
    assert isinstance(first, ScheduledRow)
    assert (first.status, first.claimed_by) == ("claimed", "w1")
    assert _call(world, lambda b: b.claim_scheduled_one(sched, lease_seconds=LEASE), "w2") is None
    q = _call(world, lambda b: b.claim_queue_one(queued, lease_seconds=LEASE))
    assert isinstance(q, QueueRow)
    assert q.status == "claimed"
    assert _call(world, lambda b: b.claim_queue_one(queued, lease_seconds=LEASE), "w2") is None
    unknown = uuid.uuid4()
    assert _call(world, lambda b: b.claim_scheduled_one(unknown, lease_seconds=LEASE)) is None
    assert _call(world, lambda b: b.claim_queue_one(unknown, lease_seconds=LEASE)) is None


def _work_ids(world: World, table: str, pid: str) -> list[str]:
    with world.database.connection(Role.READER) as conn:
        rows = conn.execute(
            f"SELECT id FROM charter.{table} WHERE process_id = %s", (pid,)
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_skip_locked_two_connections_claim_disjoint_rows(world: World) -> None:
    _open(world, 6)
    world.clock.advance(hours=2)
    now = world.clock.now()
    with (
        connect(world.database.url, Role.WORKER) as first,
        connect(world.database.url, Role.WORKER) as second,
    ):
        # A blocking claim would wait on the first one's locks: fail fast instead of hang.
        second.execute("SET lock_timeout = '2s'")
        second.commit()
        # Both transactions stay open while the other claims.
        a = Bookkeeping(first, "w1", now=now).claim_scheduled(lease_seconds=LEASE, limit=3)
        b = Bookkeeping(second, "w2", now=now).claim_scheduled(lease_seconds=LEASE, limit=10)
        qa = Bookkeeping(first, "w1", now=now).claim_queue(lease_seconds=LEASE, limit=2)
        qb = Bookkeeping(second, "w2", now=now).claim_queue(lease_seconds=LEASE, limit=10)
        first.commit()
        second.commit()
    assert len(a) == 3
    assert len(b) == 3
    assert {r.id for r in a}.isdisjoint({r.id for r in b})
    assert (len(qa), len(qb)) == (2, 4)
    assert {r.id for r in qa}.isdisjoint({r.id for r in qb})
    with world.database.connection(Role.READER) as conn:
        holders = conn.execute(
            "SELECT claimed_by, count(*) FROM charter.scheduled_actions GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert holders == [("w1", 3), ("w2", 3)]


def test_racing_claimers_never_share_a_row(world: World) -> None:
    _open(world, 40)
    world.clock.advance(hours=2)
    got: dict[str, list[uuid.UUID]] = {}
    barrier = threading.Barrier(4)

    def claim(worker: str) -> None:
        barrier.wait()
        mine: list[uuid.UUID] = []
        while rows := _claim_scheduled(world, worker, limit=3):
            mine.extend(r.id for r in rows)
        got[worker] = mine

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [work_id for rows in got.values() for work_id in rows]
    assert len(everything) == 40
    assert len(set(everything)) == 40


# --- results, per lane ----------------------------------------------------------------------


def _record_firing(world: World, row: WorkRow, event_hash: str) -> str:
    """As the engine records a firing in the fired event's transaction (here the event is
    any real one: bookkeeping only checks that the firing is recorded)."""
    with connect(world.database.url) as owner:
        owner.execute(
            "INSERT INTO charter.automation_firings (work_id, kind, occurrence, process_id,"
            " event_hash) VALUES (%s, %s, %s, %s, %s)",
            (row.id, row.kind, row.occurrence, row.process_id, event_hash),
        )
        owner.commit()
    return event_hash


def _claimed_pair(world: World) -> tuple[ScheduledRow, QueueRow, str]:
    [(pid, opened)] = _open(world, 1)
    world.clock.advance(hours=1)
    [sched] = _claim_scheduled(world)
    [queued] = _claim_queue(world)
    assert sched.process_id == queued.process_id == pid
    return sched, queued, opened


def test_complete_scheduled_exhausts_a_one_shot(world: World) -> None:
    sched, _, event_hash = _claimed_pair(world)
    _record_firing(world, sched, event_hash)
    _call(world, lambda b: b.complete(sched, event_hash, None))
    row = _row(world, sched)
    assert (row["status"], row["fire_count"], row["attempts"]) == ("exhausted", 1, 1)
    assert row["last_attempt_result"] == "accepted"
    assert row["last_attempt_error"] is None
    assert row["last_attempt_at"] == row["last_fired_at"] == world.clock.now()
    assert row["last_fired_event_hash"] == event_hash
    assert row["run_at"] == sched.run_at
    _assert_lease_cleared(row)
    assert row["claimed_at"] is None


def test_complete_scheduled_with_a_next_run_goes_back_to_active(world: World) -> None:
    sched, _, event_hash = _claimed_pair(world)
    _record_firing(world, sched, event_hash)
    following = sched.run_at + timedelta(days=1)
    _call(world, lambda b: b.complete(sched, event_hash, following))
    row = _row(world, sched)
    assert (row["status"], row["run_at"], row["fire_count"], row["attempts"]) == (
        "active", following, 1, 1,
    )  # fmt: skip
    _assert_lease_cleared(row)


def test_skip_scheduled_one_shot_is_skipped_recurring_goes_on(world: World) -> None:
    sched, _, _ = _claimed_pair(world)
    _call(world, lambda b: b.skip(sched, "wrong_state: not now", None))
    row = _row(world, sched)
    assert (row["status"], row["attempts"], row["fire_count"]) == ("skipped", 1, 0)
    assert (row["last_attempt_result"], row["last_attempt_error"]) == (
        "skipped", "wrong_state: not now",
    )  # fmt: skip
    assert row["last_fired_event_hash"] is None
    _assert_lease_cleared(row)
    # A recurring row is skipped for this occurrence only.
    world.clock.advance(seconds=1)
    again, _, _ = _claimed_pair(world)
    following = again.run_at + timedelta(hours=1)
    _call(world, lambda b: b.skip(again, "condition_failed", following))
    row = _row(world, again)
    assert (row["status"], row["run_at"], row["last_attempt_result"]) == (
        "active", following, "skipped",
    )  # fmt: skip


def test_fail_scheduled(world: World) -> None:
    sched, _, _ = _claimed_pair(world)
    _call(world, lambda b: b.fail(sched, "x" * 3000))
    row = _row(world, sched)
    assert (row["status"], row["attempts"], row["last_attempt_result"]) == ("failed", 1, "failed")
    assert row["last_attempt_error"] == "x" * 2000  # kept concise
    _assert_lease_cleared(row)


def test_retry_scheduled_reschedules_the_same_occurrence(world: World) -> None:
    sched, _, _ = _claimed_pair(world)
    retry_at = world.clock.now() + timedelta(seconds=8)
    _call(world, lambda b: b.retry(sched, retry_at, "database_unavailable"))
    row = _row(world, sched)
    # The occurrence (run_at) stays; only not_before moves, so the occurrence key and
    # the recurrence grid are unchanged.
    fields = ("status", "run_at", "not_before", "attempts", "fire_count")
    assert tuple(row[f] for f in fields) == ("active", sched.run_at, retry_at, 1, 0)
    assert (row["last_attempt_result"], row["last_attempt_error"]) == (
        "transient_error", "database_unavailable",
    )  # fmt: skip
    _assert_lease_cleared(row)
    assert _claim_scheduled(world) == []  # not before retry_at
    world.clock.advance(seconds=8)
    assert [r.id for r in _claim_scheduled(world)] == [sched.id]


def test_release_scheduled_gives_the_row_back_untouched(world: World) -> None:
    sched, _, _ = _claimed_pair(world)
    assert _call(world, lambda b: b.release(sched)) is True
    row = _row(world, sched)
    assert (row["status"], row["attempts"], row["last_attempt_result"]) == ("active", 0, None)
    assert row["run_at"] == sched.run_at
    _assert_lease_cleared(row)
    assert _call(world, lambda b: b.release(sched)) is False  # a second release: not ours


def test_complete_queue(world: World) -> None:
    _, queued, event_hash = _claimed_pair(world)
    _record_firing(world, queued, event_hash)
    _call(world, lambda b: b.complete(queued, event_hash, None))
    row = _row(world, queued)
    assert (row["status"], row["attempts"], row["last_attempt_result"]) == (
        "completed", 1, "accepted",
    )  # fmt: skip
    assert row["fired_event_hash"] == event_hash
    assert row["completed_at"] == row["last_attempt_at"] == world.clock.now()
    _assert_lease_cleared(row)


def test_skip_and_fail_queue(world: World) -> None:
    _, queued, _ = _claimed_pair(world)
    _call(world, lambda b: b.skip(queued, "wrong_state: moved on", None))
    row = _row(world, queued)
    assert (row["status"], row["attempts"], row["last_attempt_result"], row["last_error"]) == (
        "skipped", 1, "skipped", "wrong_state: moved on",
    )  # fmt: skip
    assert row["fired_event_hash"] is None
    _assert_lease_cleared(row)
    world.clock.advance(seconds=1)
    _, other, _ = _claimed_pair(world)
    _call(world, lambda b: b.fail(other, "internal"))
    row = _row(world, other)
    assert (row["status"], row["attempts"], row["last_attempt_result"], row["last_error"]) == (
        "failed", 1, "failed", "internal",
    )  # fmt: skip
    _assert_lease_cleared(row)


def test_retry_queue_waits_until_retry_at(world: World) -> None:
    _, queued, _ = _claimed_pair(world)
    retry_at = world.clock.now() + timedelta(seconds=4)
    _call(world, lambda b: b.retry(queued, retry_at, "serialization_conflict"))
    row = _row(world, queued)
    assert (row["status"], row["not_before"], row["attempts"], row["last_attempt_result"]) == (
        "pending", retry_at, 1, "transient_error",
    )  # fmt: skip
    assert row["queued_at"] == queued.queued_at  # the occurrence is unchanged
    _assert_lease_cleared(row)
    assert _claim_queue(world) == []
    world.clock.advance(seconds=4)
    assert [r.id for r in _claim_queue(world)] == [queued.id]


def test_release_queue(world: World) -> None:
    _, queued, _ = _claimed_pair(world)
    assert _call(world, lambda b: b.release(queued)) is True
    row = _row(world, queued)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    _assert_lease_cleared(row)


# --- held rows: the batched path, with no lease ------------------------------------------------


def test_rows_locked_in_a_batch_are_recorded_without_a_token_in_that_transaction(
    world: World,
) -> None:
    [(_, opened)] = _open(world, 1)
    world.clock.advance(hours=1)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        books = _books(conn, world)
        queued, sched = books.lock_due(limit=10)
        assert (queued.status, sched.status) == ("pending", "active")  # no claim written
        assert queued.lease_token is None
        assert sched.lease_token is None
        _record_firing(world, sched, opened)
        books.complete(sched, opened, None)
        books.skip(queued, "wrong_state: moved on", None)
    assert (_row(world, sched)["status"], _row(world, queued)["status"]) == (
        "exhausted", "skipped",
    )  # fmt: skip


def test_locked_rows_are_invisible_to_other_lockers_and_claimers(world: World) -> None:
    _open(world, 2)
    world.clock.advance(hours=1)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        held = _books(conn, world).lock_due(limit=2)
        assert len(held) == 2
        with world.database.connection(Role.WORKER) as other, other.transaction():
            others = _books(other, world, "w2").lock_due(limit=10)
            assert {r.id for r in others}.isdisjoint({r.id for r in held})
        assert not {r.id for r in _claim_queue(world, "w3")} & {r.id for r in held}


def test_one_limit_covers_both_lanes_queue_first(world: World) -> None:
    opened = _open(world, 3)  # per process: a ready queue row and a due scheduled action
    world.clock.advance(hours=1)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        held = _books(conn, world).lock_due(limit=4)
        assert [row.kind for row in held] == [QueueRow.kind] * 3 + [ScheduledRow.kind]
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        held = _books(conn, world).lock_due(limit=2)  # the queue uses the whole limit
        assert [row.kind for row in held] == [QueueRow.kind] * 2
        with world.database.connection(Role.WORKER) as other, other.transaction():
            # The third process is free: both its rows; the others' are held with them.
            rest = _books(other, world, "w2").lock_due(limit=10)
            assert {row.process_id for row in rest} == {opened[2][0]}
            assert sorted(row.kind for row in rest) == [QueueRow.kind, ScheduledRow.kind]


def test_tokenless_bookkeeping_needs_a_due_unclaimed_row(world: World) -> None:
    sched, queued, event_hash = _claimed_pair(world)  # claimed under a lease
    later = world.clock.now() + timedelta(hours=1)
    for row in (sched, queued):
        for attempt in _every_result(replace(row, lease_token=None), event_hash, later):
            with pytest.raises(LeaseLost):
                _call(world, attempt)
    [(_, fresh)] = _open(world, 1)  # due in an hour: not yet
    with world.database.connection(Role.READER) as conn:
        found = conn.execute(
            "SELECT id FROM charter.scheduled_actions WHERE status = 'active' AND"
            " created_event_hash = %s",
            (fresh,),
        ).fetchone()
    assert found is not None
    not_due = replace(sched, id=uuid.UUID(str(found[0])), lease_token=None)
    with pytest.raises(LeaseLost):
        _call(world, lambda b: b.skip(not_due, "too early", None))


def test_a_row_is_completed_only_with_the_event_that_fired_it(world: World) -> None:
    sched, _, event_hash = _claimed_pair(world)
    before = _work_tables(world)
    with pytest.raises(IntegrityViolation, match="was not fired by event"):
        _call(world, lambda b: b.complete(sched, event_hash, None))
    assert _work_tables(world) == before


# --- lease tokens ----------------------------------------------------------------------------


def _every_result(
    row: WorkRow, event_hash: str, at: datetime
) -> list[Callable[[Bookkeeping], object]]:
    return [
        lambda b: b.complete(row, event_hash, None),
        lambda b: b.complete(row, event_hash, at),
        lambda b: b.skip(row, "late", None),
        lambda b: b.skip(row, "late", at),
        lambda b: b.fail(row, "late"),
        lambda b: b.retry(row, at, "late"),
    ]


def test_a_wrong_lease_token_is_lease_lost_and_changes_nothing(world: World) -> None:
    sched, queued, event_hash = _claimed_pair(world)
    later = world.clock.now() + timedelta(hours=1)
    for row in (sched, queued):
        forged = replace(row, lease_token=uuid.uuid4())
        tokenless = replace(row, lease_token=None)
        attempts = _every_result(forged, event_hash, later)
        attempts += _every_result(tokenless, event_hash, later)
        for attempt in attempts:
            before = _work_tables(world)
            with pytest.raises(LeaseLost):
                _call(world, attempt)
            assert _work_tables(world) == before
        assert _call(world, lambda b, r=forged: b.release(r)) is False  # type: ignore[misc]
    assert _row(world, sched)["status"] == _row(world, queued)["status"] == "claimed"


def test_a_stale_lease_after_reclaim_is_lease_lost(world: World) -> None:
    sched, queued, event_hash = _claimed_pair(world)
    world.clock.advance(seconds=LEASE + 1)
    assert _call(world, lambda b: b.reclaim_expired(), "w2") == (1, 1)
    [sched2] = _claim_scheduled(world, "w2")
    [queued2] = _claim_queue(world, "w2")
    assert (sched2.id, queued2.id) == (sched.id, queued.id)
    later = world.clock.now() + timedelta(hours=1)
    for stale in (sched, queued):
        for attempt in _every_result(stale, event_hash, later):
            before = _work_tables(world)
            with pytest.raises(LeaseLost):
                _call(world, attempt)
            assert _work_tables(world) == before
    # The new holder's results still land.
    _record_firing(world, sched2, event_hash)
    _call(world, lambda b: b.complete(sched2, event_hash, None), "w2")
    assert _row(world, sched)["status"] == "exhausted"


def test_reclaim_expired_leases_returns_only_expired_rows(world: World) -> None:
    _open(world, 3)
    world.clock.advance(hours=1)
    short = _claim_scheduled(world, limit=2)  # lease 30 s
    short_q = _claim_queue(world, limit=1)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        long = _books(conn, world, "w9").claim_scheduled(lease_seconds=600, limit=5)
        long_q = _books(conn, world, "w9").claim_queue(lease_seconds=600, limit=5)
    assert (len(short), len(short_q), len(long), len(long_q)) == (2, 1, 1, 2)
    world.clock.advance(seconds=LEASE)  # exactly at expiry: not yet expired
    assert _call(world, lambda b: b.reclaim_expired()) == (0, 0)
    world.clock.advance(seconds=1)
    assert _call(world, lambda b: b.reclaim_expired()) == (2, 1)
    reclaimed: list[WorkRow] = [*short, *short_q]
    for row in reclaimed:
        found = _row(world, row)
        assert found["status"] == ("active" if isinstance(row, ScheduledRow) else "pending")
        _assert_lease_cleared(found)
        assert found["attempts"] == 0
    kept: list[WorkRow] = [*long, *long_q]
    for row in kept:
        assert _row(world, row)["claimed_by"] == "w9"
    assert _call(world, lambda b: b.reclaim_expired()) == (0, 0)


def test_log_worker_attempt_appends_a_system_log_row(world: World) -> None:
    [(pid, opened)] = _open(world, 1)
    _call(
        world,
        lambda b: b.log(
            "scheduled_action.skipped",
            level="warning",
            code="wrong_state",
            process_id=pid,
            action="tick",
            event_hash=opened,
            message="the process moved on",
            detail={"work_id": "w"},
        ),
    )
    with world.database.connection(Role.READER) as conn:
        last = conn.execute(
            "SELECT kind, level, code, process_id, actor, action, event_hash, message, detail, at"
            " FROM charter.system_log ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert last == (
        "worker.scheduled_action.skipped", "warning", "wrong_state", pid, "automation", "tick",
        opened, "the process moved on", {"work_id": "w"}, world.clock.now(),
    )  # fmt: skip


# --- they cannot touch governed state ---------------------------------------------------------

PROTECTED = [
    "processes",
    "events",
    "workflow_definitions",
    "workflow_deployments",
    "actors",
    "actor_keys",
    "api_tokens",
    "automation_firings",
]


def _protected(world: World) -> dict[str, list[tuple[Any, ...]]]:
    with connect(world.database.url) as owner:
        snapshot = {
            table: owner.execute(
                f"SELECT t::text FROM charter.{table} t ORDER BY t::text"
            ).fetchall()
            for table in PROTECTED
        }
        snapshot["system_log_before"] = owner.execute(
            "SELECT t::text FROM charter.system_log t ORDER BY id"
        ).fetchall()
    return snapshot


def _raw(world: World, name: str, params: dict[str, Any]) -> None:
    """Call one function as the worker; errors are fine, changes are what we look for."""
    try:
        with world.database.connection(Role.WORKER) as conn, conn.transaction():
            conn.execute(query(name), params).fetchall()
    except CharterError:
        pass


INVALID: list[dict[str, Any]] = [
    {"id": None, "token": None, "worker": None, "lease_seconds": None, "limit": None,
     "event_hash": None, "next_run_at": None, "reason": None, "retry_at": None, "error": None},
    {"id": str(uuid.uuid4()), "token": str(uuid.uuid4()), "worker": "w'; DROP TABLE x; --",
     "lease_seconds": -5, "limit": -1, "event_hash": "0" * 64, "next_run_at": None,
     "reason": "r", "retry_at": None, "error": "e"},
    {"id": str(uuid.uuid4()), "token": str(uuid.uuid4()), "worker": "w", "lease_seconds": 0,
     "limit": 1_000_000, "event_hash": "not-a-hash", "next_run_at": None, "reason": "",
     "retry_at": None, "error": ""},
]  # fmt: skip
FUNCTIONS = [
    "claim_scheduled_actions",
    "claim_scheduled_action",
    "complete_scheduled_action",
    "skip_scheduled_action",
    "fail_scheduled_action",
    "reschedule_scheduled_action",
    "release_scheduled_action",
    "claim_automation_work_batch",
    "claim_automation_work",
    "complete_automation_work",
    "skip_automation_work",
    "fail_automation_work",
    "retry_automation_work",
    "release_automation_work",
    "reclaim_expired_leases",
    "log_worker_attempt",
    "lock_due_scheduled",
    "lock_ready_queue",
    "lock_due",
]


def test_bookkeeping_functions_cannot_change_processes_events_registry_actors_or_tokens(
    world: World,
) -> None:
    with world.database.connection(Role.ENGINE) as conn:
        create_token(conn, scopes=["processes:read"], name="kept")
        conn.commit()
    opened = _open(world, 4)
    # Every function with valid arguments, through the typed wrappers, both lanes.
    world.clock.advance(hours=1)
    rows: list[WorkRow] = [*_claim_scheduled(world, limit=4), *_claim_queue(world, limit=4)]
    assert len(rows) == 8
    fired_by = {  # the two rows completed below, as if each had fired
        rows[0].id: _record_firing(world, rows[0], opened[0][1]),
        rows[4].id: _record_firing(world, rows[4], opened[1][1]),
    }
    before = _protected(world)
    next_run = world.clock.now() + timedelta(days=1)
    results: list[Callable[[Bookkeeping, WorkRow], object]] = [
        lambda b, r: b.complete(r, fired_by[r.id], None),
        lambda b, r: b.skip(r, "skip", next_run),
        lambda b, r: b.fail(r, "fail"),
        lambda b, r: b.retry(r, next_run, "retry"),
    ]
    for i, row in enumerate(rows):
        _call(world, lambda b, r=row, f=results[i % 4]: f(b, r))  # type: ignore[misc]
    world.clock.advance(days=1)
    rows = [*_claim_scheduled(world, limit=4), *_claim_queue(world, limit=4)]
    for row in rows:
        _call(world, lambda b, r=row: b.release(r))  # type: ignore[misc]
    _call(world, lambda b: b.claim_scheduled_one(rows[0].id, lease_seconds=1))
    _call(world, lambda b: b.claim_queue_one(rows[-1].id, lease_seconds=1))
    world.clock.advance(seconds=5)
    assert _call(world, lambda b: b.reclaim_expired()) != (0, 0)
    _call(world, lambda b: b.log("probe", process_id=opened[0][0], event_hash=opened[0][1]))
    # And every function with nonsense.
    for params in INVALID:
        for name in FUNCTIONS:
            _raw(world, name, {**params, "now": world.clock.now(), "kind": "k", "level": "x",
                               "code": None, "process_id": opened[1][0], "action": None,
                               "message": "m", "detail": None})  # fmt: skip
    after = _protected(world)
    log_before = before.pop("system_log_before")
    log_after = after.pop("system_log_before")
    assert after == before
    assert log_after[: len(log_before)] == log_before  # the log only grew
    assert len(log_after) > len(log_before)


# --- who may execute them -------------------------------------------------------------------


def _probe_params() -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()), "token": str(uuid.uuid4()), "worker": "w", "lease_seconds": 1,
        "limit": 1, "event_hash": None, "next_run_at": None, "reason": "r", "retry_at": None,
        "error": "e", "now": None, "kind": "probe", "level": "info", "code": None,
        "process_id": None, "action": None, "message": "m", "detail": None,
    }  # fmt: skip


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("role", [Role.READER, Role.ENGINE])
def test_only_the_worker_may_execute_bookkeeping_functions(
    database: Database, role: Role, name: str
) -> None:
    with pytest.raises(PermissionDenied), database.connection(role) as conn:
        conn.execute(query(name), _probe_params()).fetchall()


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_worker_may_execute_bookkeeping_functions(database: Database, name: str) -> None:
    try:
        with database.connection(Role.WORKER) as conn, conn.transaction():
            conn.execute(query(name), _probe_params()).fetchall()
    except LeaseLost:
        pass  # executed: a random token holds no lease


def test_the_worker_has_no_direct_write_on_work_rows(database: Database) -> None:
    for statement in (
        "UPDATE charter.scheduled_actions SET status = 'failed' WHERE false",
        "UPDATE charter.automation_queue SET status = 'failed' WHERE false",
        "INSERT INTO charter.system_log (kind, level, message) VALUES ('x', 'info', 'x')",
    ):
        with pytest.raises(PermissionDenied), database.connection(Role.WORKER) as conn:
            conn.execute(statement)
