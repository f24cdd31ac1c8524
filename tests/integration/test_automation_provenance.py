"""Fired-event provenance: the engine checks `input.meta.automation` against its work row
(docs/automation.md, "Provenance")."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from psycopg.rows import dict_row

from charter.core.envelope import Submission, verify_submission
from charter.core.errors import CharterError, LeaseLost, ReservedField, WrongState
from charter.core.timefmt import parse_rfc3339
from charter.db.database import Database, Role
from charter.db.errors import translated
from charter.engine.reads import Reads
from charter.engine.work import QueueRow, ScheduledRow, WorkRow, fired_input
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.outcomes import Outcome
from tests.integration.world import (
    ONBOARDING,
    World,
    new_process_id,
    onboarding_definition,
    table_snapshot,
)

CANCELLABLE = "tests/cancellable-ping"


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    w.deploy(ONBOARDING, onboarding_definition())
    w.deploy(
        CANCELLABLE,
        {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "schedule": [{"id": "ping", "action": "ping", "in": "1h",
                                       "data": {"n": 1}}]},
                "stop": {"type": "update", "role": "customer", "from": "*", "cancel": ["ping"]},
                "ping": {"type": "update", "role": "AUTOMATION", "from": "*",
                         "mutate": {"$inc": {"pings": 1}}},
            },
        },
    )  # fmt: skip
    w.actor("ada", "customer")
    w.actor("ana", "analyst")
    w.actor("max", "manager")
    w.actor("automation", "AUTOMATION")
    return w


def _rows(database: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with database.connection(Role.READER) as conn:
        return conn.execute(sql, params).fetchall()


def _ready(world: World) -> str:
    """A process in ready_for_screening with its start_screening row pending."""
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    world.submit("ada", "submit_onboarding", pid, opened.hash)
    return pid


def _claim_queue(world: World, pid: str, action: str, worker: str = "test-worker") -> QueueRow:
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        [(work_id,)] = conn.execute(
            "SELECT id FROM charter.automation_queue WHERE process_id = %s AND action_name = %s"
            " AND status = 'pending'",
            (pid, action),
        ).fetchall()
        row = Bookkeeping(conn, worker, now=world.clock.now()).claim_queue_one(
            str(work_id), lease_seconds=60
        )
    assert row is not None
    return row


def _screening(world: World) -> str:
    """A process in screening_started, with its two schedules active."""
    pid = _ready(world)
    fired = world.fire_queued(pid, "start_screening")
    assert fired.outcome is Outcome.ACCEPTED
    return pid


@pytest.fixture
def queued(world: World) -> QueueRow:
    return _claim_queue(world, _ready(world), "start_screening")


@pytest.fixture
def scheduled(world: World) -> ScheduledRow:
    return world.claim_schedule(_screening(world), "screening-deadline")


def _snapshot(world: World) -> dict[str, list[tuple[Any, ...]]]:
    snapshot = table_snapshot(world.database)
    snapshot["automation_firings"] = _rows(
        world.database, "SELECT t::text FROM charter.automation_firings t ORDER BY t::text"
    )
    return snapshot


def _refused(world: World, error: type[CharterError], submission: Submission) -> CharterError:
    """The engine refuses `submission` with `error`, logs the code and changes nothing."""
    before = _snapshot(world)
    with pytest.raises(error) as info:
        world.engine.process_event(submission)
    assert _snapshot(world) == before, "a refused automated event changed something"
    logged = _rows(
        world.database, "SELECT kind, code, event_hash FROM charter.system_log ORDER BY id DESC"
    )[0]
    assert logged == ("event.rejected", info.value.code, submission.envelope.hash())
    return info.value


def _with_meta(row: WorkRow, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The honest fired input of `row` with its meta.automation changed by `change`."""
    data: dict[str, Any] = copy.deepcopy(fired_input(row))
    change(data["meta"]["automation"])
    return data


def _setter(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(meta: dict[str, Any]) -> None:
        meta[key] = value

    return change


def _dropper(key: str) -> Callable[[dict[str, Any]], None]:
    def change(meta: dict[str, Any]) -> None:
        del meta[key]

    return change


# --- who may carry meta.automation ----------------------------------------------------------


def test_automation_actor_without_meta_automation_is_reserved_field(
    world: World, queued: QueueRow, scheduled: ScheduledRow
) -> None:
    for row in (queued, scheduled):
        error = _refused(world, ReservedField, world.fired_submission(row, input_=row.action_data))
        assert "input.meta.automation is required" in error.message


def test_automation_actor_with_null_meta_automation_is_reserved_field(
    world: World, queued: QueueRow
) -> None:
    submission = world.fired_submission(queued, input_={"meta": {"automation": None}})
    _refused(world, ReservedField, submission)


def test_non_automation_actor_sending_meta_automation_is_reserved_field(
    world: World, scheduled: ScheduledRow
) -> None:
    # An analyst copies a real row's honest provenance into an action it may run.
    head = Reads(world.database).process(scheduled.process_id).head
    submission = world.signed(
        "ana", "approve", scheduled.process_id, head, input_=fired_input(scheduled)
    )
    error = _refused(world, ReservedField, submission)
    assert "reserved for the automation actor" in error.message


@pytest.mark.parametrize(
    "meta_automation",
    [None, {}, {"kind": "auto_action"}],
    ids=["null", "empty", "partial"],
)
def test_non_automation_actor_setting_meta_automation_at_all_is_reserved_field(
    world: World, meta_automation: Any
) -> None:
    # The field is reserved: a human may not set it, whatever the value.
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    submission = world.signed(
        "ada", "submit_onboarding", pid, opened.hash,
        input_={"meta": {"automation": meta_automation}},
    )  # fmt: skip
    _refused(world, ReservedField, submission)


# --- forged or mismatched provenance ------------------------------------------------------

SCHEDULED_FORGERIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "scheduled_by_event_hash": _setter("scheduled_by_event_hash", "e" * 64),
    "scheduled_by_action": _setter("scheduled_by_action", "submit_onboarding"),
    "scheduled_by_actor": _setter("scheduled_by_actor", "f" * 64),
    "scheduled_at": _setter("scheduled_at", "2026-06-18T09:00:00Z"),
    "run_at": _setter("run_at", "2026-06-18T10:00:00Z"),
    "schedule_id": _setter("schedule_id", "periodic-review"),
    "fired_by_actor": _setter("fired_by_actor", "ana"),
    "worker-missing": _dropper("worker"),
    "kind": _setter("kind", "auto_action"),
    "kind-unknown": _setter("kind", "manual"),
    "work_id-unknown": _setter("work_id", str(uuid.uuid4())),
    "work_id-not-a-uuid": _setter("work_id", "row-1"),
    "work_id-not-a-string": _setter("work_id", 7),
    "extra-field": _setter("note", "trust me"),
}


@pytest.mark.parametrize("field", list(SCHEDULED_FORGERIES))
def test_forged_scheduled_provenance_is_reserved_field(
    world: World, scheduled: ScheduledRow, field: str
) -> None:
    world.clock.advance(hours=48)  # due: only the forgery can be the reason
    forged = _with_meta(scheduled, SCHEDULED_FORGERIES[field])
    _refused(world, ReservedField, world.fired_submission(scheduled, input_=forged))


def test_forged_scheduled_by_event_hash_naming_a_real_event_is_reserved_field(
    world: World, scheduled: ScheduledRow
) -> None:
    world.clock.advance(hours=48)
    [opened, *_] = Reads(world.database).events(scheduled.process_id)
    forged = _with_meta(scheduled, _setter("scheduled_by_event_hash", opened.hash))
    _refused(world, ReservedField, world.fired_submission(scheduled, input_=forged))


QUEUE_FORGERIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "queued_by_event_hash": _setter("queued_by_event_hash", "e" * 64),
    "queued_by_action": _setter("queued_by_action", "open"),
    "queued_by_actor": _setter("queued_by_actor", "f" * 64),
    "queued_at": _setter("queued_at", "2026-01-01T00:00:00Z"),
    "available_state": _setter("available_state", "draft"),
    "reason": _setter("reason", "because"),
    "kind": _setter("kind", "scheduled_action"),
    "work_id-unknown": _setter("work_id", str(uuid.uuid4())),
    "work_id-not-a-uuid": _setter("work_id", "not-a-uuid"),
    "fired_by_actor": _setter("fired_by_actor", "ada"),
}


@pytest.mark.parametrize("field", list(QUEUE_FORGERIES))
def test_forged_auto_action_provenance_is_reserved_field(
    world: World, queued: QueueRow, field: str
) -> None:
    forged = _with_meta(queued, QUEUE_FORGERIES[field])
    _refused(world, ReservedField, world.fired_submission(queued, input_=forged))


def test_meta_automation_that_is_not_an_object_is_reserved_field(
    world: World, queued: QueueRow
) -> None:
    values: list[Any] = ["auto_action", ["auto_action"], 1]
    for value in values:
        submission = world.fired_submission(queued, input_={"meta": {"automation": value}})
        _refused(world, ReservedField, submission)


def test_another_process_work_row_is_reserved_field(world: World, queued: QueueRow) -> None:
    # The honest provenance of a row of process A, fired on process B (same state).
    other = _ready(world)
    submission = world.fired_submission(queued, process=other)
    error = _refused(world, ReservedField, submission)
    assert other in error.message


def test_a_row_fired_as_a_different_action_is_reserved_field(
    world: World, scheduled: ScheduledRow
) -> None:
    # start_review runs from "*" for AUTOMATION: only the row mismatch can refuse it.
    world.clock.advance(hours=48)
    data = fired_input(scheduled)
    submission = world.fired_submission(scheduled, action="start_review", input_=data)
    _refused(world, ReservedField, submission)


@pytest.mark.parametrize(
    "data",
    [{"reason": "golf"}, {"reason": "screening-sla", "extra": 1}, {}],
    ids=["changed", "extra", "missing"],
)
def test_input_data_differing_from_the_row_is_reserved_field(
    world: World, scheduled: ScheduledRow, data: dict[str, Any]
) -> None:
    world.clock.advance(hours=48)
    forged = {**data, "meta": {"automation": scheduled.provenance()}}
    error = _refused(world, ReservedField, world.fired_submission(scheduled, input_=forged))
    assert "does not match the data" in error.message


def test_extra_meta_keys_beside_automation_are_reserved_field(
    world: World, scheduled: ScheduledRow
) -> None:
    world.clock.advance(hours=48)
    meta: dict[str, Any] = {"automation": scheduled.provenance(), "x": 1}
    forged = {**scheduled.action_data, "meta": meta}
    _refused(world, ReservedField, world.fired_submission(scheduled, input_=forged))


# --- rows that are not ours (any more) -----------------------------------------------------


def test_a_row_claimed_by_another_worker_is_wrong_state(
    world: World, scheduled: ScheduledRow
) -> None:
    world.clock.advance(hours=48)
    impostor = _with_meta(scheduled, _setter("worker", "worker-b"))
    error = _refused(world, WrongState, world.fired_submission(scheduled, input_=impostor))
    assert "claimed by test-worker" in error.message


def test_a_row_reclaimed_after_lease_expiry_cannot_be_fired_by_the_old_holder(
    world: World, queued: QueueRow
) -> None:
    world.clock.advance(seconds=61)
    with world.database.connection(Role.WORKER) as conn, conn.transaction():
        reclaimed = Bookkeeping(conn, "worker-b", now=world.clock.now()).reclaim_expired()
    assert reclaimed[1] >= 1
    _claim_queue(world, queued.process_id, "start_screening", worker="worker-b")
    # The first holder wakes up and fires with its own (old) provenance.
    _refused(world, WrongState, world.fired_submission(queued))


def test_an_unclaimed_row_cannot_fire(world: World) -> None:
    pid = _ready(world)
    [(work_id,)] = _rows(
        world.database, "SELECT id FROM charter.automation_queue WHERE process_id = %s", pid
    )
    with world.database.connection(Role.READER) as conn, conn.cursor(row_factory=dict_row) as cur:
        raw = cur.execute(
            "SELECT * FROM charter.automation_queue WHERE id = %s", (work_id,)
        ).fetchone()
    assert raw is not None
    pending = QueueRow.from_dict(raw)
    forged = _with_meta(pending, _setter("worker", "test-worker"))
    error = _refused(world, WrongState, world.fired_submission(pending, input_=forged))
    assert "is pending" in error.message


def test_a_cancelled_row_never_fires_even_if_a_worker_had_claimed_it(world: World) -> None:
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=CANCELLABLE)
    world.clock.advance(hours=1)
    row = world.claim_schedule(pid, "ping", worker_id="worker-a")
    stopped = world.submit("ada", "stop", pid, opened.hash, workflow=CANCELLABLE)
    # The engine refuses: the row named in the provenance is no longer claimed.
    error = _refused(world, WrongState, world.fired_submission(row))
    assert "is cancelled" in error.message
    # The worker's late bookkeeping cannot overwrite the cancellation, whatever it says.
    with world.database.connection(Role.WORKER) as conn:
        books = Bookkeeping(conn, "worker-a", now=world.clock.now())
        lates: list[Callable[[], object]] = [
            lambda: books.skip(row, "wrong_state", None),
            lambda: books.complete(row, stopped.hash, None),
            lambda: books.fail(row, "boom"),
            lambda: books.retry(row, world.clock.now(), "later"),
        ]
        for late in lates:
            with pytest.raises(LeaseLost), translated(), conn.transaction():
                late()
        assert books.release(row) is False
        conn.commit()
    # And through the Firer, as a real worker would: nothing of its own to record.
    result = world.firer("worker-a").fire(row)
    assert result.outcome is Outcome.LOST
    status = _rows(
        world.database,
        "SELECT status, cancel_reason, cancelled_by_event_hash, last_attempt_result,"
        " attempts, fire_count FROM charter.scheduled_actions WHERE id = %s",
        row.id,
    )
    assert status == [("cancelled", "cancelled by stop", stopped.hash, None, 0, 0)]
    assert [e.envelope["action"] for e in Reads(world.database).events(pid)] == ["open", "stop"]
    assert Reads(world.database).process(pid).data == {}


# --- accepted fired events carry the row's provenance ----------------------------------------


def _meta(event_input: Any) -> dict[str, Any]:
    assert isinstance(event_input, dict)
    meta = event_input["meta"]["automation"]
    assert isinstance(meta, dict)
    return meta


def test_auditor_can_trace_fired_event_to_queueing_event(world: World, queued: QueueRow) -> None:
    submission = world.fired_submission(queued)
    accepted = world.engine.process_event(submission)
    events = Reads(world.database).events(queued.process_id)
    fired = events[-1]
    assert fired.hash == accepted.hash
    # provenance survives in event JSON, exactly as the row says
    meta = _meta(fired.envelope["input"])
    assert meta == queued.provenance()
    assert meta["kind"] == "auto_action"
    assert meta["work_id"] == str(queued.id)
    assert meta["fired_by_actor"] == "automation"
    # ...and links back to a real event of this process: the one that queued the row.
    cause = next(e for e in events if e.hash == meta["queued_by_event_hash"])
    assert cause.envelope["action"] == meta["queued_by_action"] == "submit_onboarding"
    assert cause.envelope["actor"] == meta["queued_by_actor"] == world.keys["ada"].public_key_hex
    assert cause.seq < fired.seq
    # signed by the automation key
    assert fired.actor_id == "automation"
    assert fired.envelope["actor"] == world.keys["automation"].public_key_hex
    assert fired.envelope_text.encode() == submission.envelope.message()
    assert fired.signature == submission.signature
    verify_submission(Submission(submission.envelope, fired.signature))


def test_auditor_can_trace_fired_event_to_scheduling_event(
    world: World, scheduled: ScheduledRow
) -> None:
    world.clock.advance(hours=48)
    submission = world.fired_submission(scheduled)
    accepted = world.engine.process_event(submission)
    events = Reads(world.database).events(scheduled.process_id)
    fired = events[-1]
    assert fired.hash == accepted.hash
    assert fired.envelope_text.encode() == submission.envelope.message()
    verify_submission(submission)
    assert fired.signature == submission.signature
    meta = _meta(fired.envelope["input"])
    assert meta == scheduled.provenance()
    assert parse_rfc3339(meta["run_at"]) - parse_rfc3339(meta["scheduled_at"]) == timedelta(
        hours=48
    )
    cause = next(e for e in events if e.hash == meta["scheduled_by_event_hash"])
    assert cause.envelope["action"] == meta["scheduled_by_action"] == "start_screening"
    assert cause.actor_id == "automation"
    assert meta["schedule_id"] == "screening-deadline"
    # The same link, as a provenance verification query over the stored JSON.
    linked = _rows(
        world.database,
        "SELECT c.action FROM charter.events f"
        " JOIN charter.events c ON c.hash = f.envelope #>> '{input,meta,automation,"
        "scheduled_by_event_hash}' AND c.process_id = f.process_id"
        " JOIN charter.scheduled_actions s"
        "   ON s.id = (f.envelope #>> '{input,meta,automation,work_id}')::uuid"
        "  AND s.created_event_hash = c.hash"
        " WHERE f.hash = %s",
        fired.hash,
    )
    assert linked == [("start_screening",)]
