"""The worker loop in-process on a fake clock (docs/automation.md): what one pass
counts, a NOTIFY waking the sleeping loop, a schedule firing when the clock passes its
run_at and not before, and one wake-up time however many future schedules there are.

Time never moves unless a test moves it, so "not before" is exact, not a race.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from charter.core.clock import FakeClock
from charter.db.database import Role, connect
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.worker import AutomationWorker, PassResult, WorkerSettings
from tests.integration.world import World, new_process_id, scratch_database

T = TypeVar("T")

SCHEDULING = "tests/loop/scheduling"
AUTOMATIC = "tests/loop/automatic"
SWEEP = 86_400.0  # a day: in these tests the sweep never fires unless time says so
START = datetime(2026, 6, 18, 10, tzinfo=UTC)
TIMEOUT = 30.0  # real seconds any single wait may take before the test fails


class ObservedClock(FakeClock):
    """A fake clock that records every sleep asked of it and how many are pending."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.requested: list[float] = []
        self.pending = 0

    async def sleep(self, seconds: float) -> None:
        self.requested.append(seconds)
        self.pending += 1
        try:
            await super().sleep(seconds)
        finally:
            self.pending -= 1


def _world(world: World) -> World:
    world.deploy(
        SCHEDULING,
        {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [{"id": "tick", "action": "tick", "in": "1h", "data": {}}]},
                "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
            },
        },
    )  # fmt: skip
    world.deploy(
        AUTOMATIC,
        {
            "dsl": 2,
            "states": ["open", "closed"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "close": {"type": "transition", "role": "customer", "from": "open", "to": "closed"},
                "touch": {"type": "update", "role": "AUTOMATION", "from": "open", "auto": True},
            },
        },
    )  # fmt: skip
    world.actor("ada", "customer")
    world.actor("automation", "AUTOMATION")
    return world


@pytest.fixture
def world(pg_admin_url: str, template_database: str) -> Iterator[World]:
    """A database of each test's own (a pass claims every due row there is)."""
    with scratch_database(pg_admin_url, template_database) as database:
        yield _world(World(database, clock=ObservedClock(START)))


def _clock(world: World) -> ObservedClock:
    assert isinstance(world.clock, ObservedClock)
    return world.clock


def _worker(world: World, **settings: Any) -> AutomationWorker:
    defaults: dict[str, Any] = {"lease_seconds": 60, "batch_size": 100, "concurrency": 4,
                                "sweep_seconds": SWEEP}  # fmt: skip
    return AutomationWorker(
        world.database,
        world.database.url,
        world.keys["automation"],
        engine=world.engine,
        clock=world.clock,
        worker_id="loop-worker",
        settings=WorkerSettings(**{**defaults, **settings}),
    )


def _open(world: World, workflow: str) -> tuple[str, str]:
    pid = new_process_id()
    return pid, world.submit("ada", "open", pid, None, workflow=workflow).hash


def _statuses(world: World) -> dict[str, int]:
    with world.database.connection(Role.READER) as conn:
        rows = conn.execute(
            "SELECT status, count(*)::int FROM charter.scheduled_actions GROUP BY 1 UNION ALL"
            " SELECT 'queue:' || status, count(*)::int FROM charter.automation_queue GROUP BY 1"
        ).fetchall()
    return {str(status): int(str(count)) for status, count in rows}


def _automation_events(world: World) -> int:
    with world.database.connection(Role.READER) as conn:
        row = conn.execute(
            "SELECT count(*) FROM charter.events WHERE actor_id = 'automation'"
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


def _run(coroutine: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coroutine(), timeout=120)

    return asyncio.run(bounded())


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (real time, bounded) for something the worker does in its own task."""

    async def poll() -> None:
        while not await asyncio.to_thread(condition):
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(poll(), TIMEOUT)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def _idle(worker: AutomationWorker, clock: ObservedClock) -> int:
    """Wait until the loop sleeps on the fake clock with no wake-up pending and its
    listener connected; with time frozen it then stays asleep until woken. Returns
    how many sleeps it had asked for so far."""

    def settled() -> bool:
        return (
            worker.listener.connected.is_set() and clock.pending == 1 and not worker._wake.is_set()
        )

    for _ in range(int(TIMEOUT / 0.05)):
        if settled():
            asked = len(clock.requested)
            await asyncio.sleep(0.2)  # still asleep, and no new pass began meanwhile
            if settled() and len(clock.requested) == asked:
                return asked
        await asyncio.sleep(0.05)
    raise AssertionError("the worker loop never settled into its sleep")


async def _stop(worker: AutomationWorker, task: asyncio.Task[None]) -> None:
    worker.stop()
    await asyncio.wait_for(task, TIMEOUT)


# --- run_once -------------------------------------------------------------------------------


def test_run_once_counts_what_it_claimed_and_how_each_firing_ended(world: World) -> None:
    for _ in range(2):
        _open(world, SCHEDULING)  # each: one `tick` in an hour
    for _ in range(3):
        _open(world, AUTOMATIC)  # each: one `touch` queued now
    stale, _ = _open(world, AUTOMATIC)
    # Closed before the worker runs: its queued `touch` is stale (a business skip).
    world.submit("ada", "close", stale, _head(world, stale), workflow=AUTOMATIC)
    worker = _worker(world)

    first = _run(worker.run_once)
    assert first == PassResult(reclaimed=0, claimed=4, outcomes={"accepted": 3, "skipped": 1})
    assert _run(worker.run_once) == PassResult()  # nothing else is due for an hour

    _clock(world).advance(hours=1)
    assert _run(worker.run_once) == PassResult(claimed=2, outcomes={"accepted": 2})
    assert _statuses(world) == {"exhausted": 2, "queue:completed": 3, "queue:skipped": 1}
    assert worker.fired_total == 5


def test_run_once_claims_at_most_a_batch_and_reclaims_expired_leases(world: World) -> None:
    for _ in range(3):
        _open(world, AUTOMATIC)
    small = _worker(world, batch_size=2)
    assert _run(small.run_once) == PassResult(claimed=2, outcomes={"accepted": 2})

    # Another worker claims the last row and vanishes; its lease runs out.
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        (_orphan,) = Bookkeeping(conn, "gone", now=world.clock.now()).claim_queue(
            lease_seconds=30, limit=10
        )
    assert _run(small.run_once) == PassResult()  # still leased to `gone`
    _clock(world).advance(seconds=31)
    assert _run(small.run_once) == PassResult(reclaimed=1, claimed=1, outcomes={"accepted": 1})
    assert _statuses(world) == {"queue:completed": 3}


def _head(world: World, process_id: str) -> str:
    with world.database.connection(Role.READER) as conn:
        row = conn.execute(
            "SELECT head_hash FROM charter.processes WHERE id = %s", (process_id,)
        ).fetchone()
    assert row is not None
    return str(row[0])


# --- the loop ---------------------------------------------------------------------------


def test_a_notify_wakes_the_sleeping_loop_without_time_passing(world: World) -> None:
    clock = _clock(world)
    worker = _worker(world)
    started = clock.now()

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        try:
            asked = await _idle(worker, clock)
            assert clock.requested[-1] == SWEEP  # nothing to do: it sleeps a whole sweep
            await asyncio.to_thread(_open, world, AUTOMATIC)  # queues a `touch`, NOTIFY
            await _until(lambda: _statuses(world).get("queue:completed") == 1, "the touch")
            # It woke up, passed and slept again: the next sleep is asked for just after
            # the batch commits, so wait for it rather than race it.
            await _until(lambda: len(clock.requested) > asked, "the next sleep")
        finally:
            await _stop(worker, task)

    _run(scenario)
    assert clock.now() == started  # the fake clock never moved: the NOTIFY woke it
    assert _automation_events(world) == 1


def test_a_future_schedule_fires_when_the_clock_passes_run_at_and_not_before(
    world: World,
) -> None:
    clock = _clock(world)
    _open(world, SCHEDULING)  # `tick` runs one hour from now
    worker = _worker(world)

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        try:
            asked = await _idle(worker, clock)
            # The one wake-up time is the schedule's run_at, read from the database.
            assert clock.requested[-1] == 3600.0
            clock.advance(seconds=3599)
            await asyncio.sleep(0.3)  # let anything that would run, run
            assert clock.pending == 1
            assert len(clock.requested) == asked
            assert await asyncio.to_thread(_statuses, world) == {"active": 1}
            assert await asyncio.to_thread(_automation_events, world) == 0
            clock.advance(seconds=1)
            await _until(lambda: _statuses(world) == {"exhausted": 1}, "the tick")
        finally:
            await _stop(worker, task)

    _run(scenario)
    assert _automation_events(world) == 1


def test_memory_stays_flat_with_ten_thousand_future_schedules(world: World) -> None:
    clock = _clock(world)
    start = clock.now()
    pid, opened = _open(world, SCHEDULING)  # its `tick` is due at start + 1h
    future = 10_000
    with connect(world.database.url) as owner:  # quick: one INSERT ... SELECT as the owner
        owner.execute(
            "INSERT INTO charter.scheduled_actions (schedule_id, process_id, workflow_path,"
            " action_name, action_data, run_at, created_event_hash, created_by_action,"
            " created_by_actor)"
            " SELECT 'future-' || g, %(pid)s, %(path)s, 'tick', '{}',"
            "        %(start)s::timestamptz + interval '2 hours' + g * interval '1 second',"
            "        %(hash)s, 'open', %(actor)s"
            " FROM generate_series(1, %(n)s) AS g",
            {"pid": pid, "path": SCHEDULING, "start": start, "hash": opened,
             "actor": world.keys["ada"].public_key_hex, "n": future},
        )  # fmt: skip
        owner.commit()
    worker = _worker(world, concurrency=2)

    # Passes claim only what is due, whatever waits behind it.
    assert _run(worker.run_once) == PassResult()
    clock.set(start + timedelta(hours=2, seconds=5))  # the tick and five future rows
    assert _run(worker.run_once) == PassResult(claimed=6, outcomes={"accepted": 6})
    assert _run(worker.run_once) == PassResult()
    assert _statuses(world) == {"exhausted": 6, "active": future - 5}
    with world.database.connection(Role.READER) as conn:
        touched = conn.execute(
            "SELECT count(*) FROM charter.scheduled_actions"
            " WHERE status = 'active' AND (attempts > 0 OR claimed_at IS NOT NULL)"
        ).fetchone()
    assert touched == (0,)  # no future row was ever claimed

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        try:
            await _idle(worker, clock)
            # One sleep, until the next run_at (start + 2h + 6s): not a timer per row.
            assert clock.pending == 1
            assert clock.requested[-1] == 1.0
            assert len(clock._sleepers) == 1
        finally:
            await _stop(worker, task)

    _run(scenario)
    # The worker holds nothing per row: no collection in it grew with the table.
    for holder in (worker, worker.firer, worker.listener, worker.settings):
        for name, value in vars(holder).items():
            if isinstance(value, list | dict | set | tuple | frozenset):
                assert len(value) < 10, f"{type(holder).__name__}.{name} holds {len(value)}"
