"""process_event end to end on a real database: effects, rules, rejections, races."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Submission
from charter.core.errors import (
    BadSignature,
    CharterError,
    ClockSkew,
    ConditionFailed,
    Duplicate,
    ForbiddenRole,
    InvalidInput,
    InvalidPublicKey,
    ReservedField,
    StalePrev,
    UnknownAction,
    UnknownActor,
    UnknownProcess,
    UnknownWorkflow,
    WorkflowMismatch,
    WrongState,
)
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.reads import Reads
from tests.integration.world import (
    ONBOARDING,
    World,
    new_process_id,
    onboarding_definition,
    table_snapshot,
)


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    w.deploy(ONBOARDING, onboarding_definition())
    w.actor("ada", "customer")
    w.actor("ana", "analyst")
    w.actor("max", "manager")
    w.actor("automation", "AUTOMATION")
    return w


def _rows(database: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with database.connection(Role.READER) as conn:
        return conn.execute(sql, params).fetchall()


def _opened(world: World) -> tuple[str, str]:
    pid = new_process_id()
    accepted = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    return pid, accepted.hash


# --- accepted events and their effects -------------------------------------------------


def test_create_records_the_event_and_the_workflow_version(world: World) -> None:
    pid = new_process_id()
    accepted = world.submit("ada", "open", pid, None, input_={"name": "Ada"})
    assert accepted.seq == 1
    assert accepted.process.state == "draft"
    assert accepted.process.data == {"name": "Ada"}
    assert accepted.process.head == accepted.hash
    [event] = Reads(world.database).events(pid)
    assert event.kind == "action"
    assert event.actor_id == "ada"
    assert event.actor_roles == ("customer",)
    current = _rows(
        world.database,
        "SELECT version FROM charter.workflow_deployments WHERE path = %s "
        "ORDER BY revision DESC LIMIT 1",
        ONBOARDING,
    )
    assert event.workflow_version == current[0][0]
    assert (
        event.envelope_text.encode()
        == world.signed("ada", "open", pid, None, input_={"name": "Ada"}).envelope.message()
    )


def test_reaching_a_state_queues_its_auto_action_once_with_provenance(world: World) -> None:
    pid, opened = _opened(world)
    submitted = world.submit("ada", "submit_onboarding", pid, opened)
    rows = _rows(
        world.database,
        "SELECT action_name, status, available_state, queued_by_event_hash, queued_by_action,"
        " queued_by_actor, action_data FROM charter.automation_queue WHERE process_id = %s",
        pid,
    )
    assert rows == [
        (
            "start_screening",
            "pending",
            "ready_for_screening",
            submitted.hash,
            "submit_onboarding",
            world.keys["ada"].public_key_hex,
            {},
        )
    ]


def test_no_auto_action_is_queued_when_its_state_is_not_reached(world: World) -> None:
    pid, _ = _opened(world)
    assert (
        _rows(world.database, "SELECT 1 FROM charter.automation_queue WHERE process_id = %s", pid)
        == []
    )


def test_schedules_are_resolved_with_provenance_and_cancelled(world: World) -> None:
    pid, opened = _opened(world)
    world.submit("ada", "submit_onboarding", pid, opened)
    started = world.fire_queued(pid, "start_screening")
    assert started.event_hash is not None
    at = world.clock.now()
    rows = _rows(
        world.database,
        "SELECT schedule_id, action_name, action_data, run_at, interval, status,"
        " created_event_hash, created_by_action, created_by_actor"
        " FROM charter.scheduled_actions WHERE process_id = %s ORDER BY schedule_id",
        pid,
    )
    automation_key = world.keys["automation"].public_key_hex
    assert rows == [
        ("periodic-review", "start_review", {}, at + timedelta(days=365), "1y", "active",
         started.event_hash, "start_screening", automation_key),
        ("screening-deadline", "escalate_review", {"reason": "screening-sla"},
         at + timedelta(hours=48), None, "active", started.event_hash, "start_screening",
         automation_key),
    ]  # fmt: skip
    approved = world.submit("ana", "approve", pid, started.event_hash)
    offboarded = world.submit("max", "offboard", pid, approved.hash)
    cancelled = _rows(
        world.database,
        "SELECT status, cancel_reason, cancelled_by_event_hash FROM charter.scheduled_actions"
        " WHERE process_id = %s",
        pid,
    )
    assert cancelled == [("cancelled", "cancelled by offboard", offboarded.hash)] * 2


def test_notifications_are_sent_after_commit(world: World, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN automation_queue_changed")
        listener.execute("LISTEN scheduled_actions_changed")
        pid, opened = _opened(world)
        world.submit("ada", "submit_onboarding", pid, opened)
        world.fire_queued(pid, "start_screening")
        received = []
        for note in listener.notifies(timeout=2.0, stop_after=3):
            received.append((note.channel, note.payload))
    channels = sorted(channel for channel, _ in received)
    assert channels == [
        "automation_queue_changed",
        "scheduled_actions_changed",
        "scheduled_actions_changed",
    ]
    assert all(f'"process_id":"{pid}"' in payload for _, payload in received)


def test_every_appended_event_is_announced_after_its_commit(
    world: World, database_url: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN charter_events")
        pid, opened = _opened(world)
        submitted = world.submit("ada", "submit_onboarding", pid, opened)
        fired = world.fire_queued(pid, "start_screening")
        notes = [json.loads(n.payload) for n in listener.notifies(timeout=2.0, stop_after=3)]
    assert notes == [
        {"process": pid, "seq": 1, "hash": opened, "action": "open", "actor_id": "ada"},
        {"process": pid, "seq": 2, "hash": submitted.hash, "action": "submit_onboarding",
         "actor_id": "ada"},
        {"process": pid, "seq": 3, "hash": fired.event_hash, "action": "start_screening",
         "actor_id": "automation"},
    ]  # fmt: skip


def test_rules_in_force_at_decision_time(world: World) -> None:
    path = "tests/versioned"
    definition: dict[str, Any] = {
        "dsl": 2,
        "states": ["open", "closed"],
        "roles": ["customer", "analyst"],
        "actions": {
            "open": {"type": "create", "role": "customer", "to": "open"},
            "close": {"type": "transition", "role": "customer", "from": "open", "to": "closed"},
        },
    }
    first = world.deploy(path, definition)
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=path)
    definition["actions"]["close"]["role"] = "analyst"
    second = world.deploy(path, definition)
    assert first != second
    with pytest.raises(ForbiddenRole):
        world.submit("ada", "close", pid, opened.hash, workflow=path)
    closed = world.submit("ana", "close", pid, opened.hash, workflow=path)
    versions = [e.workflow_version for e in Reads(world.database).events(pid)]
    assert versions == [first, second]
    assert closed.process.state == "closed"


def test_scheduling_an_active_id_replaces_it(world: World) -> None:
    path = "tests/reminders"
    world.deploy(
        path,
        {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "remind": {"type": "update", "role": "customer", "from": "*",
                           "schedule": [{"id": "nudge", "action": "nudge", "in": "1h",
                                         "data": {}}]},
                "nudge": {"type": "update", "role": "AUTOMATION", "from": "*"},
            },
        },
    )  # fmt: skip
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=path)
    first = world.submit("ada", "remind", pid, opened.hash, workflow=path)
    second = world.submit("ada", "remind", pid, first.hash, workflow=path)
    rows = _rows(
        world.database,
        "SELECT status, cancel_reason, created_event_hash, cancelled_by_event_hash"
        " FROM charter.scheduled_actions WHERE process_id = %s ORDER BY created_at, status",
        pid,
    )
    assert sorted(rows, key=lambda r: r[0]) == [
        ("active", None, second.hash, None),
        ("cancelled", "replaced", first.hash, second.hash),
    ]


def test_an_auto_action_does_not_queue_itself_again(world: World) -> None:
    path = "tests/auto-loop"
    world.deploy(
        path,
        {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer", "AUTOMATION"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "touch": {"type": "update", "role": "AUTOMATION", "from": "*", "auto": True,
                          "mutate": {"$inc": {"touches": 1}}},
            },
        },
    )  # fmt: skip
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow=path)
    fired = world.fire_queued(pid, "touch")
    rows = _rows(
        world.database,
        "SELECT queued_by_event_hash, status, fired_event_hash FROM charter.automation_queue"
        " WHERE process_id = %s",
        pid,
    )
    assert rows == [(opened.hash, "completed", fired.event_hash)]
    assert Reads(world.database).process(pid).data == {"touches": 1}


def test_spawn_creates_children_with_unsigned_geneses(world: World) -> None:
    world.deploy(
        "tests/case",
        {
            "dsl": 2,
            "states": ["open"],
            "roles": ["customer"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open",
                         "mutate": {"$set": {"parent": "{{ input.parent }}"}}},
            },
        },
    )  # fmt: skip
    world.deploy(
        "tests/parent",
        {
            "dsl": 2,
            "states": ["open", "split"],
            "roles": ["customer"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "split": {"type": "transition", "role": "customer", "from": "open", "to": "split",
                          "spawn": [{"workflow": "tests/case", "process": "{{ process.id }}-case",
                                     "action": "open", "data": {"parent": "{{ process.id }}"}}]},
            },
        },
    )  # fmt: skip
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow="tests/parent")
    split = world.submit("ada", "split", pid, opened.hash, workflow="tests/parent")
    reads = Reads(world.database)
    [child] = reads.children(pid)
    assert child.id == f"{pid}-case"
    assert child.parent == pid
    assert child.parent_event == split.hash
    assert child.data == {"parent": pid}
    [genesis] = reads.events(child.id)
    assert genesis.kind == "spawn"
    assert genesis.signature is None
    assert genesis.envelope["cause"] == split.hash
    assert genesis.envelope["actor"] == world.keys["ada"].public_key_hex
    assert genesis.envelope["prev"] is None
    # A second split would spawn the same child: refused, nothing written.
    with pytest.raises(WrongState):
        world.submit("ada", "split", pid, split.hash, workflow="tests/parent")


# --- rejections --------------------------------------------------------------------------


def _expect_rejection(
    world: World, error: type[CharterError], submission: Submission
) -> CharterError:
    before = table_snapshot(world.database)
    logged_before = _rows(world.database, "SELECT count(*) FROM charter.system_log")[0][0]
    with pytest.raises(error) as info:
        world.engine.process_event(submission)
    assert table_snapshot(world.database) == before, "a rejected event changed something"
    logged = _rows(
        world.database,
        "SELECT kind, code FROM charter.system_log ORDER BY id DESC LIMIT 1",
    )
    assert (
        _rows(world.database, "SELECT count(*) FROM charter.system_log")[0][0] == logged_before + 1
    )
    assert logged == [("event.rejected", info.value.code)]
    return info.value


def test_rejections_change_nothing_and_are_logged(world: World) -> None:
    pid, opened = _opened(world)
    ada = world.keys["ada"]
    cases: list[tuple[type[CharterError], Submission]] = [
        (StalePrev, world.signed("ada", "submit_onboarding", pid, "0" * 64)),
        (Duplicate, world.signed("ada", "open", pid, None, input_={"name": "Ada"})),
        (UnknownProcess, world.signed("ada", "submit_onboarding", "nobody", opened)),
        (UnknownWorkflow, world.signed("ada", "open", new_process_id(), None, workflow="no/such")),
        (UnknownAction, world.signed("ada", "fly", pid, opened)),
        (ForbiddenRole, world.signed("ana", "submit_onboarding", pid, opened)),
        (WrongState, world.signed("ana", "approve", pid, opened)),
        (InvalidInput, world.signed("ada", "open", new_process_id(), None, input_={"x": 1})),
        (ReservedField, world.signed("ada", "submit_onboarding", pid, opened,
                                     input_={"meta": {"automation": {"kind": "auto_action"}}})),
        (WorkflowMismatch, world.signed("ada", "submit_onboarding", pid, opened,
                                        workflow="tests/versioned")),
        (ClockSkew, world.signed("ada", "submit_onboarding", pid, opened,
                                 at=world.clock.now() + timedelta(minutes=6))),
        (BadSignature, Submission(world.signed("ada", "submit_onboarding", pid, opened).envelope,
                                  "0" * 128)),
    ]  # fmt: skip
    for error, submission in cases:
        _expect_rejection(world, error, submission)
    stale = _expect_rejection(
        world, StalePrev, world.signed("ada", "submit_onboarding", pid, "a" * 64)
    )
    assert stale.context["head"] == opened
    assert ada.public_key_hex  # the key was used throughout


def test_resubmitting_an_accepted_event_is_a_duplicate(world: World) -> None:
    pid, opened = _opened(world)
    submission = world.signed("ada", "submit_onboarding", pid, opened)
    world.engine.process_event(submission)
    _expect_rejection(world, Duplicate, submission)


def test_condition_failed(world: World) -> None:
    world.deploy(
        "tests/guarded",
        {
            "dsl": 2,
            "states": ["open", "big"],
            "roles": ["customer"],
            "actions": {
                "open": {"type": "create", "role": "customer", "to": "open"},
                "grow": {"type": "transition", "role": "customer", "from": "open", "to": "big",
                         "when": "input.amount > 100"},
            },
        },
    )  # fmt: skip
    pid = new_process_id()
    opened = world.submit("ada", "open", pid, None, workflow="tests/guarded")
    error = _expect_rejection(
        world,
        ConditionFailed,
        world.signed(
            "ada", "grow", pid, opened.hash, workflow="tests/guarded", input_={"amount": 5}
        ),
    )
    assert "input.amount > 100" in error.message
    grown = world.submit("ada", "grow", pid, opened.hash, workflow="tests/guarded",
                         input_={"amount": 500})  # fmt: skip
    assert grown.process.state == "big"


def test_unregistered_retired_and_disabled_keys_are_unknown_actors(world: World) -> None:
    world.actor("eve", "customer")
    old_key = world.keys["eve"]
    pid = new_process_id()
    world.submit("eve", "open", pid, None, input_={"name": "Eve"})
    new_key = SecretKey.generate()
    with world.database.connection(Role.ENGINE) as conn:
        actors.rotate_key(conn, "eve", new_key.public_key_hex)
        conn.commit()
    _expect_rejection(world, UnknownActor, world.signed("eve", "open", new_process_id(), None,
                                                        input_={"name": "E"}))  # fmt: skip
    world.keys["eve"] = new_key
    world.submit("eve", "open", new_process_id(), None, input_={"name": "Eve"})
    with world.database.connection(Role.ENGINE) as conn:
        actors.set_disabled(conn, "eve", True)
        conn.commit()
    _expect_rejection(world, UnknownActor, world.signed("eve", "open", new_process_id(), None,
                                                        input_={"name": "E"}))  # fmt: skip
    world.keys["stranger"] = SecretKey.generate()
    _expect_rejection(world, UnknownActor, world.signed("stranger", "open", new_process_id(), None,
                                                        input_={"name": "S"}))  # fmt: skip
    assert old_key != new_key


def test_registration_refuses_small_order_keys_and_stray_automation(world: World) -> None:
    with world.database.connection(Role.ENGINE) as conn:
        with pytest.raises(InvalidPublicKey):
            actors.add_actor(conn, "zero", "00" * 32, ["customer"])
        with pytest.raises(CharterError, match="only the actor 'automation'"):
            actors.add_actor(conn, "mallory", SecretKey.generate().public_key_hex, ["AUTOMATION"])


# --- races ------------------------------------------------------------------------------


def _all_at_once(world: World, submissions: list[Submission]) -> list[str]:
    """Submit each in a thread of its own, all released together; the outcome codes."""
    barrier = threading.Barrier(len(submissions))
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(submission: Submission) -> None:
        barrier.wait()
        try:
            world.engine.process_event(submission)
            result = "accepted"
        except CharterError as exc:
            result = exc.code
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=(s,)) for s in submissions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_sixteen_writers_on_one_head_exactly_one_wins(world: World) -> None:
    pid, opened = _opened(world)
    submissions = [
        world.signed("ada", "submit_onboarding", pid, opened,
                     at=world.clock.now() + timedelta(milliseconds=i))
        for i in range(16)
    ]  # fmt: skip
    outcomes = _all_at_once(world, submissions)
    assert sorted(outcomes) == ["accepted"] + ["stale_prev"] * 15
    events = Reads(world.database).events(pid)
    assert [e.seq for e in events] == [1, 2]
    assert events[1].envelope["prev"] == events[0].hash
    assert Reads(world.database).process(pid).head == events[1].hash


def test_sixteen_creations_of_one_id_exactly_one_wins(world: World) -> None:
    pid = new_process_id()
    submissions = [
        world.signed("ada", "open", pid, None, input_={"name": f"Ada {i}"}) for i in range(16)
    ]
    outcomes = _all_at_once(world, submissions)
    assert sorted(outcomes) == ["accepted"] + ["duplicate"] * 15
    [event] = Reads(world.database).events(pid)
    assert Reads(world.database).process(pid).head == event.hash


def test_a_creation_that_loses_the_race_for_its_id_is_a_duplicate_and_writes_nothing(
    world: World,
) -> None:
    """The creation reads no process, then finds the id taken by a transaction that
    committed meanwhile: the primary key refuses it when its writes are answered."""
    pid = new_process_id()
    submission = world.signed("ada", "open", pid, None, input_={"name": "Ada"})
    outcome: list[BaseException | str] = []
    with world.database.connection(Role.ENGINE) as rival:
        rival.execute(
            "INSERT INTO charter.processes (id, workflow_path, state, data) "
            "VALUES (%s, %s, 'draft', '{}')",
            [pid, ONBOARDING],
        )

        def write() -> None:
            try:
                world.engine.process_event(submission)
                outcome.append("accepted")
            except CharterError as exc:
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(0.5)  # it waits on the rival's uncommitted key
        assert writer.is_alive()
        rival.commit()
    writer.join(10)
    [error] = outcome
    assert isinstance(error, Duplicate)
    assert error.message == f"process {pid!r} already exists"
    assert Reads(world.database).events(pid) == []
    assert _rows(
        world.database,
        "SELECT code FROM charter.system_log WHERE event_hash = %s",
        submission.envelope.hash(),
    ) == [("duplicate",)]
