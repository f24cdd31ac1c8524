"""Scheduled and automatic actions fired end to end through the Firer, with the example
onboarding workflow: SLA escalation, stale skips, periodic reviews (coalesce, count,
until), NOTIFY on replace and cancel, exactly-once and result classification
(docs/automation.md; docs/dsl.md, "Schedules")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
import pytest

from charter.core.clock import FakeClock
from charter.core.errors import Duplicate, StalePrev
from charter.db.database import Database, Role
from charter.engine.process_event import SUBMISSION_CODES
from charter.engine.reads import Reads
from charter.engine.store import Store
from charter.engine.work import QueueRow, ScheduledRow, WorkRow
from charter.firing.batch import Firer
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.outcomes import (
    BUSINESS_SKIPS,
    KEY_FAILURES,
    TRANSIENT,
    FireResult,
    FiringPolicy,
    Outcome,
    classify,
    record_result,
)
from tests.integration.world import (
    ONBOARDING,
    World,
    new_process_id,
    onboarding_definition,
    scratch_database,
    table_snapshot,
)

YEAR = timedelta(days=365)
RECURRING = "tests/recurring"
REMINDERS = "tests/reminders"
TOUCHY = "tests/touchy"
SPAWNER = "tests/spawner"
CHILD = "tests/child"


def _definitions() -> dict[str, Any]:
    return {
        ONBOARDING: onboarding_definition(),
        RECURRING: {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [
                             {"id": "counted", "action": "tick", "every": "1d", "count": 2,
                              "data": {}},
                             {"id": "bounded", "action": "tock", "every": "1d",
                              "until": "2026-06-21T10:00:00Z", "data": {}},
                         ]},
                "tick": {"type": "update", "role": "AUTOMATION", "from": "*",
                         "mutate": {"$inc": {"ticks": 1}}},
                "tock": {"type": "update", "role": "AUTOMATION", "from": "*",
                         "mutate": {"$inc": {"tocks": 1}}},
            },
        },
        REMINDERS: {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "remind": {"type": "update", "role": "customer", "from": "*",
                           "schedule": [{"id": "nudge", "action": "nudge", "in": "1h",
                                         "data": {}}]},
                "stop": {"type": "update", "role": "customer", "from": "*", "cancel": ["nudge"]},
                "nudge": {"type": "update", "role": "AUTOMATION", "from": "*"},
            },
        },
        TOUCHY: {
            "dsl": 2,
            "states": ["open", "closed"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "close": {"type": "transition", "role": "customer", "from": "open",
                          "to": "closed"},
                "touch": {"type": "update", "role": "AUTOMATION", "from": "open", "auto": True,
                          "mutate": {"$inc": {"touches": 1}}},
            },
        },
        CHILD: {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer"],
            "actions": {"open": {"type": "create", "role": "customer", "to": "open"}},
        },
        SPAWNER: {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [{"id": "split", "action": "split", "in": "1h",
                                       "data": {}}]},
                "split": {"type": "update", "role": "AUTOMATION", "from": "*",
                          "spawn": [{"workflow": CHILD, "process": "{{ process.id }}-child",
                                     "action": "open", "data": {}}]},
            },
        },
    }  # fmt: skip


@pytest.fixture
def world(pg_admin_url: str, template_database: str) -> Iterator[World]:
    """A world of its own per test: claims take every due row of the database."""
    with scratch_database(pg_admin_url, template_database) as database:
        w = World(database)
        for path, definition in _definitions().items():
            w.deploy(path, definition)
        w.actor("ada", "customer")
        w.actor("ana", "analyst")
        w.actor("max", "manager")
        w.actor("automation", "AUTOMATION")
        yield w


def _rows(database: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with database.connection(Role.READER) as conn:
        return conn.execute(sql, params).fetchall()


def _schedule(world: World, pid: str, schedule_id: str) -> dict[str, Any]:
    """The newest row of a schedule id on a process, as a dict."""
    with world.database.connection(Role.READER) as conn:
        cur = conn.execute(
            "SELECT to_jsonb(s) FROM charter.scheduled_actions s"
            " WHERE process_id = %s AND schedule_id = %s ORDER BY created_at DESC LIMIT 1",
            (pid, schedule_id),
        )
        found = cur.fetchone()
    assert found is not None
    return cast(dict[str, Any], found[0])


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _claim_due(world: World, worker: str = "test-worker", limit: int = 100) -> list[ScheduledRow]:
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        books = Bookkeeping(conn, worker, now=world.clock.now())
        return books.claim_scheduled(lease_seconds=60, limit=limit)


def _record(world: World, result: FireResult, worker: str = "test-worker") -> FireResult:
    """Record a result as the worker would, in a transaction of its own."""
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        books = Bookkeeping(conn, worker, now=world.clock.now())
        return record_result(books, result, FiringPolicy(), world.clock.now())


def _screening(world: World) -> tuple[str, str]:
    """open → submit_onboarding → start_screening fired; (process id, start_screening hash)."""
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    world.submit("ada", "submit_onboarding", pid, opened.hash)
    started = world.fire_queued(pid, "start_screening")
    assert started.outcome is Outcome.ACCEPTED
    assert started.event_hash is not None
    return pid, started.event_hash


def _provenance(envelope: Any) -> dict[str, Any]:
    """input.meta.automation of a stored envelope."""
    meta = envelope["input"]["meta"]["automation"]
    assert isinstance(meta, dict)
    return meta


def _actions(world: World, pid: str) -> list[str]:
    return [str(e.envelope["action"]) for e in Reads(world.database).events(pid)]


def _worker_log(world: World, pid: str) -> list[tuple[Any, ...]]:
    return _rows(
        world.database,
        "SELECT kind, code, actor, message FROM charter.system_log"
        " WHERE process_id = %s AND kind LIKE 'worker.%%' ORDER BY id",
        pid,
    )


# --- the SLA escalation --------------------------------------------------------------------


def test_schedule_fires_by_automation_actor_at_run_at_with_scheduled_provenance(
    world: World,
) -> None:
    start = world.clock.now()
    pid, started = _screening(world)
    deadline = _schedule(world, pid, "screening-deadline")
    review = _schedule(world, pid, "periodic-review")
    assert (_ts(deadline["run_at"]), deadline["interval"], deadline["status"]) == (
        start + timedelta(hours=48), None, "active",
    )  # fmt: skip
    assert (_ts(review["run_at"]), review["interval"], review["status"]) == (
        start + YEAR, "1y", "active",
    )  # fmt: skip
    assert deadline["created_event_hash"] == review["created_event_hash"] == started
    # Just before the deadline nothing is due.
    world.clock.advance(hours=48, seconds=-1)
    assert _claim_due(world) == []
    world.clock.advance(seconds=1)
    [row] = _claim_due(world)  # only the due row: the yearly review waits
    assert row.schedule_id == "screening-deadline"
    result = world.firer().fire(row)
    assert result.outcome is Outcome.ACCEPTED
    process = Reads(world.database).process(pid)
    assert process.state == "escalated"
    assert process.data["escalation"] == "screening-sla"
    after = _schedule(world, pid, "screening-deadline")
    assert (after["status"], after["fire_count"], after["attempts"]) == ("exhausted", 1, 1)
    assert after["last_fired_event_hash"] == result.event_hash
    assert after["last_attempt_result"] == "accepted"
    assert after["claimed_by"] is None
    fired = Reads(world.database).events(pid)[-1]
    assert fired.hash == result.event_hash
    assert fired.actor_id == "automation"
    assert fired.envelope["actor"] == world.keys["automation"].public_key_hex
    assert fired.envelope["at"] == "2026-06-20T10:00:00.000Z"
    meta = _provenance(fired.envelope)
    assert meta == row.provenance()
    assert meta["kind"] == "scheduled_action"
    assert meta["scheduled_by_event_hash"] == started
    assert _schedule(world, pid, "periodic-review")["status"] == "active"
    # A plain accepted fire needs no log row: the event and the work row record it.
    assert _worker_log(world, pid) == []
    assert _rows(world.database, "SELECT kind FROM charter.system_log WHERE process_id = %s",
                 pid) == []  # fmt: skip


def test_stale_scheduled_action_is_skipped_with_the_engines_reason(world: World) -> None:
    pid, started = _screening(world)
    approved = world.submit("ana", "approve", pid, started)  # before the deadline
    world.clock.advance(hours=48)
    [row] = _claim_due(world)
    before = table_snapshot(world.database)
    result = world.firer().fire(row)
    assert result.outcome is Outcome.SKIPPED
    assert result.code == "wrong_state"
    after = table_snapshot(world.database)
    # No raw process mutation: only the work row changed.
    for table in ("processes", "events"):
        assert after[table] == before[table]
    assert Reads(world.database).process(pid).head == approved.hash
    skipped = _schedule(world, pid, "screening-deadline")
    assert (skipped["status"], skipped["attempts"], skipped["fire_count"]) == ("skipped", 1, 0)
    assert skipped["last_attempt_result"] == "skipped"
    assert skipped["last_fired_event_hash"] is None
    # The row names the engine's own reason, as the engine logged its rejection.
    [(engine_message,)] = _rows(
        world.database,
        "SELECT message FROM charter.system_log WHERE kind = 'event.rejected'"
        " AND process_id = %s AND code = 'wrong_state'",
        pid,
    )
    # ... prefixed with its code, so the row alone says why.
    assert skipped["last_attempt_error"] == f"wrong_state: {engine_message}"
    assert "active" in engine_message  # the state it is in now
    assert _worker_log(world, pid)[-1] == (
        "worker.scheduled_action.skipped", "wrong_state", "automation",
        f"wrong_state: {engine_message}",
    )  # fmt: skip


def test_stale_auto_action_is_skipped_with_the_engines_reason(world: World) -> None:
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=TOUCHY)
    world.submit("ada", "close", pid, opened.hash, workflow=TOUCHY)  # before the worker fires
    result = world.fire_queued(pid, "touch")
    assert (result.outcome, result.code) == (Outcome.SKIPPED, "wrong_state")
    [(status, attempts, last_result, last_error, fired)] = _rows(
        world.database,
        "SELECT status, attempts, last_attempt_result, last_error, fired_event_hash"
        " FROM charter.automation_queue WHERE process_id = %s",
        pid,
    )
    assert (status, attempts, last_result, fired) == ("skipped", 1, "skipped", None)
    assert last_error == result.message
    assert "closed" in last_error
    assert _actions(world, pid) == ["open", "close"]
    assert _worker_log(world, pid)[-1][:2] == ("worker.auto_action.skipped", "wrong_state")


# --- recurring schedules --------------------------------------------------------------------


def _fire_all_due(world: World, worker: str = "test-worker") -> list[FireResult]:
    return [world.firer(worker).fire(row) for row in _claim_due(world, worker)]


def test_periodic_review_goes_back_to_active_on_its_grid(world: World) -> None:
    start = world.clock.now()
    pid, _ = _screening(world)
    world.clock.advance(hours=48)
    _fire_all_due(world)  # the SLA escalation
    world.clock.set(start + YEAR)
    [result] = _fire_all_due(world)
    assert result.outcome is Outcome.ACCEPTED
    review = _schedule(world, pid, "periodic-review")
    assert (review["status"], _ts(review["run_at"]), review["fire_count"]) == (
        "active", start + 2 * YEAR, 1,
    )  # fmt: skip
    assert review["last_fired_event_hash"] == result.event_hash
    assert review["claimed_by"] is None
    assert Reads(world.database).process(pid).data["reviews"] == 1


def test_after_three_years_of_downtime_it_fires_once_and_coalesces(world: World) -> None:
    start = world.clock.now()
    pid, _ = _screening(world)
    world.clock.advance(hours=48)
    _fire_all_due(world)
    world.clock.set(start + YEAR)
    _fire_all_due(world)
    # The worker is down from +1y until three years and a bit later.
    world.clock.set(start + 4 * YEAR + timedelta(days=40))
    results = _fire_all_due(world)
    assert [r.outcome for r in results] == [Outcome.ACCEPTED]
    assert _fire_all_due(world) == []  # nothing else is due: the missed slots coalesced
    review = _schedule(world, pid, "periodic-review")
    assert (review["status"], _ts(review["run_at"]), review["fire_count"]) == (
        "active", start + 5 * YEAR, 2,
    )  # fmt: skip
    assert _actions(world, pid).count("start_review") == 2
    # The coalesced event names the occurrence that was due first.
    meta = _provenance(Reads(world.database).events(pid)[-1].envelope)
    assert meta["run_at"] == "2028-06-17T10:00:00.000Z"  # start + 2·365 days


def test_count_and_until_bound_a_recurring_schedule(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=RECURRING)  # 2026-06-18T10:00Z
    counted = _schedule(world, pid, "counted")
    bounded = _schedule(world, pid, "bounded")
    assert (counted["max_count"], counted["until_ts"]) == (2, None)
    assert (bounded["max_count"], _ts(bounded["until_ts"])) == (
        None, datetime(2026, 6, 21, 10, tzinfo=UTC),
    )  # fmt: skip
    fired_per_day = []
    for _ in range(5):
        world.clock.advance(days=1)
        results = _fire_all_due(world)
        assert all(r.outcome is Outcome.ACCEPTED for r in results)
        fired_per_day.append(sorted(r.row.action_name for r in results))
    # count 2: two ticks; until 06-21T10:00 (a run exactly at `until` still runs): 3 tocks.
    assert fired_per_day == [["tick", "tock"], ["tick", "tock"], ["tock"], [], []]
    counted = _schedule(world, pid, "counted")
    bounded = _schedule(world, pid, "bounded")
    assert (counted["status"], counted["fire_count"]) == ("exhausted", 2)
    assert (bounded["status"], bounded["fire_count"]) == ("exhausted", 3)
    assert Reads(world.database).process(pid).data == {"ticks": 2, "tocks": 3}


# --- notifications --------------------------------------------------------------------------


def _notes(listener: psycopg.Connection[Any], count: int) -> list[dict[str, Any]]:
    received = [json.loads(n.payload) for n in listener.notifies(timeout=3.0, stop_after=count)]
    assert len(received) == count, received
    return received


def test_replace_and_cancel_by_id_notify_with_the_row_id(world: World) -> None:
    pid = new_process_id()
    with psycopg.connect(world.database.url, autocommit=True) as listener:
        listener.execute("LISTEN scheduled_actions_changed")
        opened = world.submit("ada", "open", pid, None, workflow=REMINDERS)
        first = world.submit("ada", "remind", pid, opened.hash, workflow=REMINDERS)
        [scheduled] = _notes(listener, 1)
        first_id = _schedule(world, pid, "nudge")["id"]
        assert scheduled == {
            "id": first_id, "op": "scheduled", "kind": "scheduled_action", "process_id": pid,
            "workflow_path": REMINDERS, "action_name": "nudge",
            "run_at": "2026-06-18T11:00:00.000Z",
        }  # fmt: skip
        world.clock.advance(minutes=5)
        second = world.submit("ada", "remind", pid, first.hash, workflow=REMINDERS)
        replaced, rescheduled = _notes(listener, 2)
        second_id = _schedule(world, pid, "nudge")["id"]
        assert second_id != first_id
        assert (replaced["id"], replaced["op"]) == (first_id, "cancelled")
        assert (rescheduled["id"], rescheduled["op"], rescheduled["run_at"]) == (
            second_id, "scheduled", "2026-06-18T11:05:00.000Z",
        )  # fmt: skip
        stopped = world.submit("ada", "stop", pid, second.hash, workflow=REMINDERS)
        [cancelled] = _notes(listener, 1)
        assert (cancelled["id"], cancelled["op"], cancelled["process_id"]) == (
            second_id, "cancelled", pid,
        )  # fmt: skip
        # Delivered after commit: what each hint names is already visible to others.
        states = _rows(
            world.database,
            "SELECT id::text, status, cancel_reason, cancelled_by_event_hash"
            " FROM charter.scheduled_actions WHERE process_id = %s ORDER BY created_at",
            pid,
        )
        assert states == [
            (first_id, "cancelled", "replaced", second.hash),
            (second_id, "cancelled", "cancelled by stop", stopped.hash),
        ]
        # A refused event sends nothing: a remind on a stale head is rolled back whole.
        world.clock.advance(seconds=1)
        with pytest.raises(StalePrev):
            world.submit("ada", "remind", pid, first.hash, workflow=REMINDERS)
        assert list(listener.notifies(timeout=0.5)) == []


def test_schedule_hints_are_sent_after_the_commit_and_never_for_a_refusal(world: World) -> None:
    # Hints are collected while the engine writes and sent once the COMMIT is done, in a
    # transaction of their own (engine/hints.py): a transaction that notifies cannot share
    # a WAL flush with others, and a refused event must announce nothing.
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=REMINDERS)
    remind = world.signed("ada", "remind", pid, opened.hash, workflow=REMINDERS)
    with psycopg.connect(world.database.url, autocommit=True) as listener:
        listener.execute("LISTEN scheduled_actions_changed")
        # The engine's writes alone, rolled back or committed: no hint at all.
        with world.database.connection(Role.ENGINE) as conn:
            with conn.transaction(force_rollback=True):
                world.engine._apply(Store(conn, now=world.clock.now()), remind)
            with conn.transaction(force_rollback=True):
                world.engine._apply(Store(conn, now=world.clock.now()), remind)
        assert list(listener.notifies(timeout=0.5)) == []
        # A refusal (a stale head) rolls back whole and announces nothing.
        stale = world.signed("ada", "remind", pid, "0" * 63 + "1", workflow=REMINDERS)
        with pytest.raises(StalePrev):
            world.engine.process_event(stale)
        assert list(listener.notifies(timeout=0.5)) == []
        # Accepted: the hint arrives, and what it names is already committed.
        world.engine.process_event(remind)
        [note] = _notes(listener, 1)
        assert _rows(
            world.database,
            "SELECT status FROM charter.scheduled_actions WHERE id = %s",
            note["id"],
        ) == [("active",)]
    assert (note["id"], note["op"]) == (_schedule(world, pid, "nudge")["id"], "scheduled")
    assert _rows(
        world.database, "SELECT count(*) FROM charter.scheduled_actions WHERE process_id = %s", pid
    ) == [(1,)]


# --- exactly once -----------------------------------------------------------------------------


def _fired_directly(world: World, row: WorkRow) -> str:
    """Submit `row`'s event as its worker would, then 'crash' before any bookkeeping."""
    return world.engine.process_event(world.fired_submission(row)).hash


def _reclaim_and_claim(world: World, worker: str) -> list[WorkRow]:
    world.clock.advance(seconds=61)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        books = Bookkeeping(conn, worker, now=world.clock.now())
        books.reclaim_expired()
        rows: list[WorkRow] = [
            *books.claim_scheduled(lease_seconds=60, limit=10),
            *books.claim_queue(lease_seconds=60, limit=10),
        ]
    return rows


def _firings(world: World, row: WorkRow) -> list[tuple[Any, ...]]:
    return _rows(
        world.database,
        "SELECT event_hash FROM charter.automation_firings WHERE work_id = %s",
        row.id,
    )


def test_same_scheduled_occurrence_twice_is_duplicate_and_recorded_completed(
    world: World,
) -> None:
    start = world.clock.now()
    pid, _ = _screening(world)
    world.clock.advance(hours=48)
    _fire_all_due(world)
    world.clock.set(start + YEAR)
    [row] = _claim_due(world, "worker-a")
    first = _fired_directly(world, row)  # worker-a dies before recording it
    [again] = _reclaim_and_claim(world, "worker-b")
    assert again.id == row.id
    assert isinstance(again, ScheduledRow)
    assert again.run_at == row.run_at
    before = table_snapshot(world.database)
    with pytest.raises(Duplicate) as info:
        world.engine.process_event(world.fired_submission(again))
    assert info.value.context["event_hash"] == first
    assert table_snapshot(world.database) == before
    result = world.firer("worker-b").fire(again)
    assert (result.outcome, result.event_hash, result.code) == (
        Outcome.ACCEPTED, first, "duplicate",
    )  # fmt: skip
    review = _schedule(world, pid, "periodic-review")
    assert (review["status"], review["fire_count"], review["last_fired_event_hash"]) == (
        "active", 1, first,
    )  # fmt: skip
    assert review["last_attempt_result"] == "accepted"
    assert _ts(review["run_at"]) == start + 2 * YEAR
    assert _actions(world, pid).count("start_review") == 1
    assert _firings(world, row) == [(first,)]


def test_same_auto_occurrence_twice_is_duplicate_and_recorded_completed(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=TOUCHY)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        [row] = Bookkeeping(conn, "worker-a", now=world.clock.now()).claim_queue(
            lease_seconds=60, limit=10
        )
    first = _fired_directly(world, row)
    [again] = _reclaim_and_claim(world, "worker-b")
    assert isinstance(again, QueueRow)
    with pytest.raises(Duplicate) as info:
        world.engine.process_event(world.fired_submission(again))
    assert info.value.context["event_hash"] == first
    result = world.firer("worker-b").fire(again)
    assert (result.outcome, result.event_hash) == (Outcome.ACCEPTED, first)
    [(status, fired, attempts)] = _rows(
        world.database,
        "SELECT status, fired_event_hash, attempts FROM charter.automation_queue WHERE id = %s",
        row.id,
    )
    assert (status, fired, attempts) == ("completed", first, 1)
    assert _actions(world, pid) == ["open", "touch"]
    assert _firings(world, row) == [(first,)]


def test_a_transient_error_after_the_commit_never_fires_a_scheduled_occurrence_twice(
    world: World,
) -> None:
    # "transient failure: retry the same due occurrence" (docs/automation.md). The
    # worker cannot tell a lost connection during COMMIT from one before it: the event may
    # have been appended. The retry must then be refused as `duplicate`, as for a lease
    # that expired; start_review runs from "*", so only the occurrence key can refuse it.
    start = world.clock.now()
    pid, _ = _screening(world)
    world.clock.advance(hours=48)
    _fire_all_due(world)
    world.clock.set(start + YEAR)
    [row] = _claim_due(world)
    first = _fired_directly(world, row)
    firer = world.firer()
    lost = FireResult(row, Outcome.RETRY, code="database_unavailable", message="lost in COMMIT")
    assert _record(world, lost).outcome is Outcome.RETRY
    world.clock.advance(seconds=2)
    [again] = _claim_due(world)
    result = firer.fire(again)
    assert _actions(world, pid).count("start_review") == 1, "the occurrence fired twice"
    assert (result.outcome, result.event_hash) == (Outcome.ACCEPTED, first)
    assert Reads(world.database).process(pid).data["reviews"] == 1


def test_a_transient_error_after_the_commit_never_fires_an_auto_occurrence_twice(
    world: World,
) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=TOUCHY)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        [row] = Bookkeeping(conn, "w", now=world.clock.now()).claim_queue(
            lease_seconds=60, limit=10
        )
    first = _fired_directly(world, row)
    firer = world.firer("w")
    lost = FireResult(row, Outcome.RETRY, code="database_unavailable", message="lost in COMMIT")
    assert _record(world, lost, "w").outcome is Outcome.RETRY
    world.clock.advance(seconds=2)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        [again] = Bookkeeping(conn, "w", now=world.clock.now()).claim_queue(
            lease_seconds=60, limit=10
        )
    result = firer.fire(again)
    assert (result.outcome, result.event_hash) == (Outcome.ACCEPTED, first)
    assert _actions(world, pid) == ["open", "touch"]


def test_a_transient_retry_keeps_a_recurring_schedule_on_its_grid(world: World) -> None:
    # docs/automation.md: a recurring schedule advances on a fixed grid (run_at + every).
    start = world.clock.now()
    pid, _ = _screening(world)
    world.clock.advance(hours=48)
    _fire_all_due(world)
    world.clock.set(start + YEAR)
    [row] = _claim_due(world)
    firer = world.firer()
    not_sent = FireResult(row, Outcome.RETRY, code="database_unavailable", message="refused")
    _record(world, not_sent)
    world.clock.advance(seconds=2)
    [again] = _claim_due(world)
    assert firer.fire(again).outcome is Outcome.ACCEPTED
    review = _schedule(world, pid, "periodic-review")
    assert _ts(review["run_at"]) == start + 2 * YEAR


# --- result classification ---------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(SUBMISSION_CODES | {"internal", "lease_lost"}))
def test_every_engine_code_has_one_result_category(code: str) -> None:
    expected = {
        "wrong_state": Outcome.SKIPPED, "condition_failed": Outcome.SKIPPED,
        "forbidden_role": Outcome.SKIPPED, "unknown_action": Outcome.SKIPPED,
        "invalid_input": Outcome.SKIPPED,
        "stale_prev": Outcome.RETRY, "database_unavailable": Outcome.RETRY,
        "serialization_conflict": Outcome.RETRY, "not_due": Outcome.RETRY,
        "duplicate": Outcome.FAILED,  # not an earlier firing (that one completes instead)
    }  # fmt: skip
    assert classify(code) is expected.get(code, Outcome.FAILED)


def test_result_category_sets_are_disjoint_and_known() -> None:
    assert BUSINESS_SKIPS.isdisjoint(TRANSIENT)
    assert BUSINESS_SKIPS.isdisjoint(KEY_FAILURES)
    assert TRANSIENT.isdisjoint(KEY_FAILURES)
    assert BUSINESS_SKIPS | KEY_FAILURES <= SUBMISSION_CODES
    assert classify("database_unavailable") is Outcome.RETRY


def test_retry_at_backs_off_exponentially_within_its_cap() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    policy = FiringPolicy(retry_base_seconds=1.0, retry_cap_seconds=300.0)
    delays = [(policy.retry_at(now, n) - now).total_seconds() for n in range(12)]
    assert delays[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert delays[9:] == [300, 300, 300]
    assert policy.retry_at(now, -3) == now + timedelta(seconds=1)
    assert FiringPolicy(retry_base_seconds=0.5, retry_cap_seconds=10).retry_at(now, 4) == (
        now + timedelta(seconds=8)
    )


def test_retry_at_stays_at_its_cap_for_any_number_of_attempts() -> None:
    # Transient results are retried without an attempt limit, so `attempts` keeps growing
    # while an outage lasts; from 1024 on, 2**attempts no longer fits a float.
    now = datetime(2026, 1, 1, tzinfo=UTC)
    policy = FiringPolicy()
    for attempts in (1023, 1024, 5000):
        assert policy.retry_at(now, attempts) == now + timedelta(seconds=300)


def test_permanent_failure_is_retried_until_max_attempts_then_failed(world: World) -> None:
    # No engine code is naturally permanent for an honest row except a misconfigured
    # worker: its clock 10 minutes off the engine's gives `clock_skew` on every attempt
    # (not a business skip, not transient, not a key failure → permanent).
    pid, _ = _screening(world)
    world.clock.advance(hours=48)
    skewed = FakeClock(world.clock.now() + timedelta(minutes=10))
    firer = Firer(world.database, world.engine, world.keys["automation"], "skewed", skewed,
                  FiringPolicy(max_attempts=2))  # fmt: skip
    [row] = _claim_due(world, "skewed")
    first = firer.fire(row)
    assert (first.outcome, first.code) == (Outcome.RETRY, "clock_skew")
    retried = _schedule(world, pid, "screening-deadline")
    assert (retried["status"], retried["attempts"], retried["last_attempt_result"]) == (
        "active", 1, "transient_error",
    )  # fmt: skip
    assert "server clock" in retried["last_attempt_error"]
    world.clock.advance(minutes=11)
    skewed.advance(minutes=11)
    [row] = _claim_due(world, "skewed")
    second = firer.fire(row)
    assert (second.outcome, second.code) == (Outcome.FAILED, "clock_skew")
    failed = _schedule(world, pid, "screening-deadline")
    assert (failed["status"], failed["attempts"], failed["last_attempt_result"]) == (
        "failed", 2, "failed",
    )  # fmt: skip
    assert failed["claimed_by"] is None
    assert _claim_due(world) == []
    assert Reads(world.database).process(pid).state == "screening_started"
    assert [k for k, *_ in _worker_log(world, pid)][-2:] == [
        "worker.scheduled_action.transient_error", "worker.scheduled_action.failed",
    ]  # fmt: skip


def test_a_refusal_that_is_not_an_earlier_firing_is_not_released_untouched(
    world: World,
) -> None:
    # The scheduled `split` spawns "<pid>-child", which a customer already opened: the
    # engine answers `duplicate`, but with no earlier event of this occurrence. Released
    # untouched (attempts 0, still due), the worker would claim and fire it again at once,
    # forever; it must count as an attempt (retry budget, then failed).
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=SPAWNER)
    world.submit("ada", "open", f"{pid}-child", None, workflow=CHILD)
    world.clock.advance(hours=1)
    firer = Firer(world.database, world.engine, world.keys["automation"], "w", world.clock,
                  FiringPolicy(max_attempts=2))  # fmt: skip
    [row] = _claim_due(world, "w")
    result = firer.fire(row)
    assert result.code == "duplicate"
    split = _schedule(world, pid, "split")
    assert split["attempts"] == 1, f"released untouched: {split['status']}, attempts 0"
    assert split["last_attempt_result"] in ("failed", "transient_error", "skipped")
    assert _actions(world, pid) == ["open"]
