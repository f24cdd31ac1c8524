"""Automation semantics from the audit (docs/automation.md): bounded cascades of
automatic actions, a retry budget per occurrence, broken downstream templates that fail
their own row and not the event, and the engine refusing a firing before it is due."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast

import pytest

from charter.core.clock import FakeClock
from charter.core.errors import NotDue
from charter.db.database import Database, Role
from charter.engine import metrics
from charter.engine.process_event import Engine
from charter.engine.reads import Reads
from charter.firing.batch import Firer
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.outcomes import FiringPolicy, Outcome
from charter.firing.worker import AutomationWorker, WorkerSettings
from tests.integration.world import World, new_process_id, scratch_database

PINGPONG = "tests/semantics/pingpong"
DAILY = "tests/semantics/daily"
TEMPLATED = "tests/semantics/templated"
CANCELLING = "tests/semantics/cancelling"
LIMIT = 5


def _definitions() -> dict[str, Any]:
    return {
        # flip and flop enable each other: a → b → a → … with no `when` to stop them.
        PINGPONG: {
            "dsl": 2,
            "states": ["a", "b", "held"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "a"},
                "flip": {"role": "AUTOMATION", "auto": True, "from": "a", "to": "b",
                         "mutate": {"$inc": {"flips": 1}}},
                "flop": {"role": "AUTOMATION", "auto": True, "from": "b", "to": "a"},
                "hold": {"role": "customer", "from": ["a", "b"], "to": "held"},
                "release": {"role": "customer", "from": "held", "to": "a"},
                "poke": {"type": "update", "role": "customer", "from": "*",
                         "schedule": [{"id": "later", "action": "nudge", "in": "1h",
                                       "data": {}}]},
                "nudge": {"type": "update", "role": "AUTOMATION", "from": "*"},
            },
        },
        DAILY: {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [{"id": "daily", "action": "tick", "every": "1d",
                                       "data": {}}]},
                "tick": {"type": "update", "role": "AUTOMATION", "from": "*",
                         "mutate": {"$inc": {"ticks": 1}}},
            },
        },
        # `stop` fires first and cancels `later`, due in the same batch.
        CANCELLING: {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [{"id": "first", "action": "stop", "in": "1h", "data": {}},
                                      {"id": "later", "action": "tick", "in": "2h",
                                       "data": {}},
                                      {"id": "again", "action": "again", "in": "1h",
                                       "data": {}}]},
                "stop": {"type": "update", "role": "AUTOMATION", "from": "*",
                         "cancel": ["later"]},
                "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
                # Re-schedules itself: its event replaces the very row it fires.
                "again": {"type": "update", "role": "AUTOMATION", "from": "*",
                          "schedule": [{"id": "again", "action": "again", "in": "1d",
                                        "data": {}}]},
            },
        },
        # `follow` renders its data from the document: whatever a person put there.
        TEMPLATED: {
            "dsl": 2,
            "states": ["draft", "ready", "done"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "draft",
                         "mutate": {"$set": {"payload": "{{ input.payload }}"}}},
                "submit": {"role": "customer", "from": "draft", "to": "ready"},
                "follow": {"role": "AUTOMATION", "from": "ready", "to": "done",
                           "auto": {"data": "{{ payload }}"}},
            },
        },
    }  # fmt: skip


@pytest.fixture
def world(pg_admin_url: str, template_database: str) -> Iterator[World]:
    with scratch_database(pg_admin_url, template_database) as database:
        w = World(database)
        w.engine = Engine(database, clock=w.clock, max_auto_cascade=LIMIT)
        for path, definition in _definitions().items():
            w.deploy(path, definition)
        w.actor("ada", "customer")
        w.actor("automation", "AUTOMATION")
        yield w


def _queue(database: Database, pid: str) -> list[dict[str, Any]]:
    with database.connection(Role.READER) as conn:
        rows = conn.execute(
            "SELECT to_jsonb(q) FROM charter.automation_queue q WHERE process_id = %s"
            " ORDER BY queued_at, cascade_depth",
            (pid,),
        ).fetchall()
    return [cast(dict[str, Any], r[0]) for r in rows]


def _schedule(database: Database, pid: str, schedule_id: str) -> dict[str, Any]:
    with database.connection(Role.READER) as conn:
        found = conn.execute(
            "SELECT to_jsonb(s) FROM charter.scheduled_actions s"
            " WHERE process_id = %s AND schedule_id = %s ORDER BY created_at DESC LIMIT 1",
            (pid, schedule_id),
        ).fetchone()
    assert found is not None
    return cast(dict[str, Any], found[0])


def _log(database: Database, pid: str, kind: str) -> list[tuple[Any, ...]]:
    with database.connection(Role.READER) as conn:
        return conn.execute(
            "SELECT code, message, detail FROM charter.system_log"
            " WHERE process_id = %s AND kind = %s ORDER BY id",
            (pid, kind),
        ).fetchall()


def _pending(database: Database, pid: str) -> list[str]:
    return [r["action_name"] for r in _queue(database, pid) if r["status"] == "pending"]


def _fire_until_quiet(world: World, pid: str, at_most: int = 50) -> int:
    """Fire whatever is pending on `pid`, as a worker would, until nothing is."""
    fired = 0
    while (pending := _pending(world.database, pid)) and fired < at_most:
        result = world.fire_queued(pid, pending[0])
        assert result.outcome is Outcome.ACCEPTED, result
        fired += 1
        world.clock.advance(seconds=1)
    return fired


def _automated(world: World, pid: str) -> list[str]:
    return [
        str(e.envelope["action"])
        for e in Reads(world.database).events(pid)
        if e.actor_id == "automation"
    ]


# --- 1. bounded cascades ------------------------------------------------------------------


def test_a_cycle_of_auto_actions_stops_at_the_limit_with_a_diagnostic(world: World) -> None:
    stops_before = metrics.CASCADE_STOPS._value.get()
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=PINGPONG)
    assert _fire_until_quiet(world, pid) == LIMIT
    assert _automated(world, pid) == ["flip", "flop", "flip", "flop", "flip"]
    rows = _queue(world.database, pid)
    assert [r["cascade_depth"] for r in rows] == list(range(LIMIT + 1))
    assert [r["status"] for r in rows] == ["completed"] * LIMIT + ["failed"]
    stopped = rows[-1]
    assert stopped["action_name"] == "flop"
    assert stopped["last_attempt_result"] == "failed"
    assert stopped["completed_at"] is not None
    error = stopped["last_error"]
    assert f"{LIMIT} automatic events in a row" in error
    assert f"the limit is {LIMIT}" in error
    assert "(open)" in error  # where the cascade began
    assert "flip → flop → flip → flop → flip → flop" in error
    [(code, message, detail)] = _log(world.database, pid, "automation.cascade_stopped")
    assert (code, message) == ("cascade_limit", error)
    assert detail["limit"] == LIMIT
    assert detail["work_id"] == stopped["id"]
    assert metrics.CASCADE_STOPS._value.get() == stops_before + 1
    assert Reads(world.database).process(pid).state == "b"


def test_people_can_still_act_and_their_event_starts_a_new_count(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=PINGPONG)
    _fire_until_quiet(world, pid)
    process = Reads(world.database).process(pid)
    held = world.submit("ada", "hold", pid, process.head, workflow=PINGPONG)
    world.submit("ada", "release", pid, held.hash, workflow=PINGPONG)  # back to `a`
    assert _fire_until_quiet(world, pid) == LIMIT  # a full new budget, not zero
    assert len(_automated(world, pid)) == 2 * LIMIT
    depths = [r["cascade_depth"] for r in _queue(world.database, pid)]
    assert depths.count(0) == 2


def test_a_timer_firing_is_not_an_automatic_action_and_resets_the_count(world: World) -> None:
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=PINGPONG)
    world.submit("ada", "poke", pid, opened.hash, workflow=PINGPONG)  # schedules `later`
    world.clock.advance(hours=1)
    row = world.claim_schedule(pid, "later")
    fired = world.firer().fire(row)
    assert fired.outcome is Outcome.ACCEPTED
    [after_timer] = [
        r for r in _queue(world.database, pid) if r["queued_by_event_hash"] == fired.event_hash
    ]
    assert (after_timer["cascade_depth"], after_timer["cascade_origin_event_hash"]) == (
        0, fired.event_hash,
    )  # fmt: skip


def test_the_default_limit_is_one_hundred() -> None:
    from charter.core.config import Settings

    assert Settings.from_env({}).max_auto_cascade == 100
    assert Settings.from_env({"CHARTER_MAX_AUTO_CASCADE": "7"}).max_auto_cascade == 7


def test_the_running_worker_stops_the_loop_by_itself(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=PINGPONG)
    worker = AutomationWorker(
        world.database,
        world.database.url,
        world.keys["automation"],
        engine=world.engine,
        clock=world.clock,
        worker_id="loop",
        settings=WorkerSettings(sweep_seconds=86_400.0),
    )

    async def passes() -> int:
        claimed = 0
        for _ in range(3 * LIMIT):  # more passes than the loop could use
            result = await worker.run_once()
            claimed += result.claimed
        return claimed

    assert asyncio.run(passes()) == LIMIT
    assert len(_automated(world, pid)) == LIMIT
    assert _pending(world.database, pid) == []


# --- 2. the retry budget is per occurrence --------------------------------------------------


def test_a_schedule_that_fired_many_times_keeps_its_whole_budget(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=DAILY)
    for _ in range(6):  # six accepted occurrences: more than max_attempts (5)
        world.clock.advance(days=1)
        assert world.firer().fire(world.claim_schedule(pid, "daily")).outcome is Outcome.ACCEPTED
    daily = _schedule(world.database, pid, "daily")
    assert (daily["attempts"], daily["occurrence_attempts"], daily["fire_count"]) == (6, 0, 6)
    # Now every attempt fails permanently: the worker's clock is 10 minutes off.
    world.clock.advance(days=1)
    skewed = FakeClock(world.clock.now() + timedelta(minutes=10))
    firer = Firer(world.database, world.engine, world.keys["automation"], "skewed", skewed,
                  FiringPolicy(max_attempts=3))  # fmt: skip
    outcomes = []
    for _ in range(3):
        row = world.claim_schedule(pid, "daily", worker_id="skewed")
        before = skewed.now()
        outcomes.append(firer.fire(row).outcome)
        state = _schedule(world.database, pid, "daily")
        if state["status"] == "active":
            # Backoff from this occurrence's attempts: 1 s, then 2 s — not the 300 s cap.
            wait = timedelta(seconds=2 ** (state["occurrence_attempts"] - 1))
            assert state["not_before"] is not None
            assert _ts(state["not_before"]) == before + wait
        world.clock.advance(minutes=5)
        skewed.advance(minutes=5)
    assert outcomes == [Outcome.RETRY, Outcome.RETRY, Outcome.FAILED]
    failed = _schedule(world.database, pid, "daily")
    assert (failed["status"], failed["attempts"], failed["occurrence_attempts"]) == (
        "failed", 9, 3,
    )  # fmt: skip


def test_an_accepted_or_skipped_occurrence_resets_the_count(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=DAILY)
    world.clock.advance(days=1)
    skewed = FakeClock(world.clock.now() + timedelta(minutes=10))
    firer = Firer(world.database, world.engine, world.keys["automation"], "skewed", skewed)
    assert firer.fire(world.claim_schedule(pid, "daily", "skewed")).outcome is Outcome.RETRY
    assert _schedule(world.database, pid, "daily")["occurrence_attempts"] == 1
    world.clock.advance(seconds=2)
    fired = world.firer().fire(world.claim_schedule(pid, "daily"))
    assert fired.outcome is Outcome.ACCEPTED
    daily = _schedule(world.database, pid, "daily")
    assert (daily["attempts"], daily["occurrence_attempts"]) == (2, 0)


# --- 3. a broken downstream template fails its row, not the event --------------------------


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ("a string", "must be an object, not a string"),
        ([1, 2], "must be an object, not an array"),
        ({"meta": {"automation": {"kind": "auto_action"}}}, "meta.automation"),
    ],
)
def test_a_broken_auto_template_fails_its_row_and_the_event_is_accepted(
    world: World, payload: Any, why: str
) -> None:
    failures_before = metrics.AUTO_RENDER_FAILURES._value.get()
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=TEMPLATED,
                          input_={"payload": payload})  # fmt: skip
    submitted = world.submit("ada", "submit", pid, opened.hash, workflow=TEMPLATED)
    assert submitted.process.state == "ready"  # the person's event stands
    [row] = _queue(world.database, pid)
    assert (row["action_name"], row["status"], row["last_attempt_result"]) == (
        "follow", "failed", "failed",
    )  # fmt: skip
    assert row["queued_by_event_hash"] == submitted.hash
    assert why in row["last_error"]
    assert "auto data of 'follow' does not render" in row["last_error"]
    [(code, message, _)] = _log(world.database, pid, "automation.render_failed")
    assert (code, message) == ("auto_data", row["last_error"])
    assert metrics.AUTO_RENDER_FAILURES._value.get() == failures_before + 1
    assert _pending(world.database, pid) == []


def test_a_good_template_still_queues_its_data(world: World) -> None:
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=TEMPLATED,
                          input_={"payload": {"note": "hi"}})  # fmt: skip
    world.submit("ada", "submit", pid, opened.hash, workflow=TEMPLATED)
    [row] = _queue(world.database, pid)
    assert (row["status"], row["action_data"]) == ("pending", {"note": "hi"})
    assert world.fire_queued(pid, "follow").outcome is Outcome.ACCEPTED


# --- 4. the engine re-checks due time ------------------------------------------------------


def test_a_claim_made_with_an_early_now_cannot_fire_before_run_at(world: World) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=DAILY)
    run_at = _ts(_schedule(world.database, pid, "daily")["run_at"])
    # A worker-role caller claims with p_now a day ahead; the engine's clock says no.
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        books = Bookkeeping(conn, "eager", now=run_at + timedelta(seconds=1))
        [row] = books.claim_scheduled(lease_seconds=60, limit=10)
    events_before = len(Reads(world.database).events(pid))
    with pytest.raises(NotDue) as refused:
        world.engine.process_event(world.fired_submission(row))
    assert refused.value.code == "not_due"
    assert refused.value.http_status == 422
    assert len(Reads(world.database).events(pid)) == events_before
    assert _log(world.database, pid, "event.rejected")[-1][0] == "not_due"
    # Through the worker's firer it is a transient result: the occurrence waits.
    result = Firer(world.database, world.engine, world.keys["automation"], "eager",
                   world.clock).fire(row)  # fmt: skip
    assert (result.outcome, result.code) == (Outcome.RETRY, "not_due")
    daily = _schedule(world.database, pid, "daily")
    assert (daily["status"], daily["fire_count"]) == ("active", 0)
    # Once the engine's clock reaches run_at, it fires.
    world.clock.advance(days=1, seconds=5)
    assert world.firer().fire(world.claim_schedule(pid, "daily")).outcome is Outcome.ACCEPTED


def _ts(text: str) -> Any:
    from datetime import UTC, datetime

    return datetime.fromisoformat(text).astimezone(UTC)


# --- batches: a row cancelled by an earlier event of the same batch --------------------------


def test_a_row_cancelled_earlier_in_its_batch_is_not_fired_and_the_batch_commits(
    world: World,
) -> None:
    pid = new_process_id()
    world.submit("ada", "open", pid, None, workflow=CANCELLING)
    world.clock.advance(hours=2)  # all three due: one batch, in occurrence order
    batch = world.firer().fire_due()
    assert batch.claimed == 3
    outcomes = {r.row.action_name: (r.outcome, r.code) for r in batch.results}
    assert outcomes == {
        "stop": (Outcome.ACCEPTED, None),
        "again": (Outcome.LOST, "cancelled"),  # its own event replaced it: no bookkeeping
        "tick": (Outcome.LOST, "cancelled"),  # `stop` cancelled it before its turn
    }
    assert sorted(_automated(world, pid)) == ["again", "stop"]
    later = _schedule(world.database, pid, "later")
    assert (later["status"], later["cancel_reason"], later["fire_count"]) == (
        "cancelled", "cancelled by stop", 0,
    )  # fmt: skip
    with world.database.connection(Role.READER) as conn:
        again = conn.execute(
            "SELECT status, cancel_reason FROM charter.scheduled_actions"
            " WHERE process_id = %s AND schedule_id = 'again' ORDER BY status",
            (pid,),
        ).fetchall()
    assert again == [("active", None), ("cancelled", "replaced")]
    assert world.firer().fire_due().claimed == 0  # nothing left claimed or due


# --- the worker's sign-on-head loop (charter.core.resign) -----------------------------------


def test_a_claimed_row_signed_on_a_stale_head_is_resigned_on_the_head_the_engine_names(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=DAILY)
    world.clock.advance(days=1, seconds=5)
    row = world.claim_schedule(pid, "daily")
    # The head the worker reads is not the head any more (another event got there).
    monkeypatch.setattr(Bookkeeping, "process_heads", lambda self, ids: {pid: "0" * 64})
    result = world.firer().fire(row)
    assert (result.outcome, result.code) == (Outcome.ACCEPTED, None)
    fired = Reads(world.database).events(pid)[-1]
    assert fired.hash == result.event_hash
    assert fired.envelope["prev"] == opened.hash
    # One refusal on the way, logged as the engine logs every rejection.
    assert [code for code, *_ in _log(world.database, pid, "event.rejected")] == ["stale_prev"]
