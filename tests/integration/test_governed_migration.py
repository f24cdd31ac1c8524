"""`charter:migrate` end to end on a real database: a process moved out of a state the new
definition dropped, work the definition no longer has cancelled in the event's
transaction, every refusal changing nothing, and the migrated chain verified and replayed
from the database and from an exported bundle, offline."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from charter.audit.verify_stored import export_bundle, verify_bundle, verify_process
from charter.cli import main as cli_main
from charter.core import ijson
from charter.core.errors import (
    CharterError,
    ForbiddenRole,
    InvalidInput,
    ReservedField,
    UnknownAction,
    UnknownProcess,
    WrongState,
)
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, Role
from charter.engine.reads import Reads
from charter.firing.outcomes import Outcome
from tests.integration.world import World, new_process_id, table_snapshot

MIGRATE = "charter:migrate"

# v1: an order is shipped, then chased by a timer; an automatic `audit` is queued after
# every event (nothing fires it here: it stays pending).
V1: JsonObject = {
    "dsl": 2,
    "states": ["ordered", "shipped", "closed"],
    "roles": ["clerk", "ops", "AUTOMATION"],
    "actions": {
        "order": {
            "type": "create",
            "role": "clerk",
            "to": "ordered",
            "input": {"type": "object", "properties": {"item": {"type": "string"}}},
            "mutate": {"$set": {"item": "{{ input.item }}"}},
            "schedule": [
                {"id": "remind", "action": "remind", "in": "1d", "data": {}},
                {"id": "expire", "action": "expire", "in": "7d", "data": {}},
            ],
        },
        "ship": {
            "role": "clerk",
            "from": "ordered",
            "to": "shipped",
            "schedule": [{"id": "chase", "action": "chase", "in": "2d", "data": {}}],
        },
        "chase": {"type": "update", "role": "AUTOMATION", "from": "shipped"},
        "expire": {"role": "AUTOMATION", "from": "ordered", "to": "closed"},
        "remind": {"type": "update", "role": "AUTOMATION", "from": "*"},
        "audit": {"type": "update", "role": "AUTOMATION", "from": "*", "auto": True},
        "close": {"role": "clerk", "from": "*", "to": "closed"},
    },
}
# v2: `shipped` is gone (orders are `delivered`), and so are `chase`, `expire`, `audit`.
V2: JsonObject = {
    "dsl": 2,
    "states": ["ordered", "delivered", "closed"],
    "roles": ["clerk", "ops", "AUTOMATION"],
    "migration": {"role": ["ops"]},
    "actions": {
        "order": {
            "type": "create",
            "role": "clerk",
            "to": "ordered",
            "schedule": [{"id": "remind", "action": "remind", "in": "1d", "data": {}}],
        },
        "deliver": {"role": "clerk", "from": "ordered", "to": "delivered"},
        "remind": {"type": "update", "role": "AUTOMATION", "from": "*"},
        "survey": {"type": "update", "role": "AUTOMATION", "from": "delivered", "auto": True},
        "close": {"role": "clerk", "from": "*", "to": "closed"},
    },
}


@pytest.fixture(scope="module")
def world(database: Database) -> World:
    w = World(database)
    w.actor("cleo", "clerk")
    w.actor("olga", "ops")
    w.actor("automation", "AUTOMATION")
    return w


def _path() -> str:
    return f"tests/shop-{secrets.token_hex(3)}"


def _rows(database: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with database.connection(Role.READER) as conn:
        return conn.execute(sql, params).fetchall()


def _work(database: Database, process_id: str) -> dict[str, tuple[Any, ...]]:
    """Each work row of a process by `<kind>:<name>`: status, cancelling event, reason."""
    scheduled = _rows(
        database,
        "SELECT schedule_id, status, cancelled_by_event_hash, cancel_reason"
        " FROM charter.scheduled_actions WHERE process_id = %s",
        process_id,
    )
    queued = _rows(
        database,
        "SELECT action_name, queued_by_action, status, cancelled_by_event_hash, cancel_reason"
        " FROM charter.automation_queue WHERE process_id = %s",
        process_id,
    )
    found = {f"schedule:{r[0]}": tuple(r[1:]) for r in scheduled}
    found |= {f"queue:{r[0]}@{r[1]}": tuple(r[2:]) for r in queued}
    return found


def _shipped(world: World, path: str) -> tuple[str, str]:
    """A process of `path` (v1) ordered and shipped: (id, head)."""
    pid = new_process_id()
    opened = world.submit("cleo", "order", pid, None, input_={"item": "lamp"}, workflow=path)
    shipped = world.submit("cleo", "ship", pid, opened.hash, workflow=path)
    return pid, shipped.hash


def _migrate(
    world: World, pid: str, head: str | None, path: str, input_: JsonObject, who: str = "olga"
) -> Any:
    return world.submit(who, MIGRATE, pid, head, input_=input_, workflow=path)


def test_a_process_leaves_a_state_the_new_definition_dropped(world: World) -> None:
    path = _path()
    world.deploy(path, V1)
    pid, head = _shipped(world, path)
    before = _work(world.database, pid)
    assert before["schedule:chase"][0] == "active"
    assert {k: v[0] for k, v in before.items() if k.startswith("queue:")} == {
        "queue:audit@order": "pending",
        "queue:audit@ship": "pending",
    }
    v2 = world.deploy(path, V2)  # deploying leaves the process in `shipped`
    assert Reads(world.database).process(pid).state == "shipped"

    migrated = _migrate(world, pid, head, path, {"state": "delivered", "reason": "OPS-42"})
    assert migrated.seq == 3
    assert migrated.process.state == "delivered"
    assert migrated.process.data == {"item": "lamp"}  # data is left as it was
    orphaned = (
        "cancelled by charter:migrate (OPS-42): "
        "its action is not in the workflow's current definition"
    )
    assert _work(world.database, pid) == {
        "schedule:remind": ("active", None, None),  # v2 still has `remind`
        "schedule:expire": ("cancelled", migrated.hash, orphaned),
        "schedule:chase": ("cancelled", migrated.hash, orphaned),
        "queue:audit@order": ("cancelled", migrated.hash, orphaned),
        "queue:audit@ship": ("cancelled", migrated.hash, orphaned),
        # As after any event, what is automatic in the new state is queued.
        "queue:survey@charter:migrate": ("pending", None, None),
    }
    [event] = [e for e in Reads(world.database).events(pid) if e.seq == 3]
    assert (event.envelope["action"], event.workflow_version) == (MIGRATE, v2)
    assert event.envelope["input"] == {"state": "delivered", "reason": "OPS-42"}
    assert (event.actor_id, event.actor_roles) == ("olga", ("ops",))

    # The process goes on under v2 as any other; the queued survey fires, caused by the
    # migration, and its provenance verifies.
    fired = world.fire_queued(pid, "survey")
    assert fired.outcome is Outcome.ACCEPTED, fired
    closed = world.submit("cleo", "close", pid, fired.event_hash, workflow=path)
    assert closed.process.state == "closed"
    for replay in (False, True):
        report = verify_process(world.database, pid, replay=replay)
        assert report.ok, report.problems


def test_a_migration_that_only_cleans_up_work(world: World) -> None:
    path = _path()
    world.deploy(path, V1)
    pid = new_process_id()
    opened = world.submit("cleo", "order", pid, None, workflow=path)
    world.deploy(path, V2)
    assert _work(world.database, pid)["schedule:expire"][0] == "active"

    cleaned = _migrate(world, pid, opened.hash, path, {"state": "ordered", "reason": "OPS-7"})
    assert cleaned.process.state == "ordered"
    work = _work(world.database, pid)
    assert work["schedule:expire"][:2] == ("cancelled", cleaned.hash)
    assert work["schedule:remind"] == ("active", None, None)
    assert work["queue:audit@order"][:2] == ("cancelled", cleaned.hash)

    # Listed schedules are cancelled too; ids the process does not have are no error.
    listed = _migrate(
        world,
        pid,
        cleaned.hash,
        path,
        {"state": "ordered", "reason": "OPS-8", "cancel": ["remind", "never-had-it"]},
    )
    assert _work(world.database, pid)["schedule:remind"] == (
        "cancelled",
        listed.hash,
        "cancelled by charter:migrate (OPS-8)",
    )
    assert verify_process(world.database, pid, replay=True).ok


def test_the_cancelled_work_wakes_the_listeners(world: World) -> None:
    path = _path()
    world.deploy(path, V1)
    pid, head = _shipped(world, path)
    world.deploy(path, V2)
    with world.database.connection(Role.WORKER) as listener:
        listener.autocommit = True
        listener.execute("LISTEN scheduled_actions_changed")
        listener.execute("LISTEN automation_queue_changed")
        migrated = _migrate(world, pid, head, path, {"state": "delivered", "reason": "OPS-1"})
        hints = [
            (n.channel, json.loads(n.payload)) for n in listener.notifies(timeout=2, stop_after=5)
        ]
    said = sorted((c, p["action_name"], p.get("op")) for c, p in hints if p["process_id"] == pid)
    assert said == [
        ("automation_queue_changed", "audit", "cancelled"),
        ("automation_queue_changed", "audit", "cancelled"),
        ("automation_queue_changed", "survey", None),  # queued in the new state
        ("scheduled_actions_changed", "chase", "cancelled"),
        ("scheduled_actions_changed", "expire", "cancelled"),
    ]
    assert migrated.seq == 3


def test_a_migration_is_queued_for_the_transparency_log_as_every_event_is(
    world: World,
) -> None:
    with world.database.connection(Role.SEQUENCER) as conn, conn.transaction():
        conn.execute("SELECT charter.enable_log_queue_v1()")  # what a log's sequencer does
    path = _path()
    world.deploy(path, V1)
    pid, head = _shipped(world, path)
    world.deploy(path, V2)
    migrated = _migrate(world, pid, head, path, {"state": "delivered", "reason": "OPS-5"})
    queued = _rows(
        world.database,
        "SELECT seq, prev_hash FROM charter.log_pending WHERE event_hash = %s",
        migrated.hash,
    )
    assert queued == [(3, head)]


# --- refusals: each changes nothing --------------------------------------------------


def _refused(world: World, error: type[CharterError], submit: Any) -> CharterError:
    before = table_snapshot(world.database)
    with pytest.raises(error) as refused:
        submit()
    assert table_snapshot(world.database) == before
    return refused.value


def test_a_workflow_without_a_migration_block_has_no_charter_migrate(world: World) -> None:
    path = _path()
    world.deploy(path, V1)
    pid, head = _shipped(world, path)
    refusal = _refused(
        world,
        UnknownAction,
        lambda: _migrate(world, pid, head, path, {"state": "closed", "reason": "OPS-1"}),
    )
    assert "no `migration` block" in refusal.message


def test_an_actor_without_a_migration_role_is_refused(world: World) -> None:
    path = _path()
    world.deploy(path, V2)
    pid = new_process_id()
    head = world.submit("cleo", "order", pid, None, workflow=path).hash
    refusal = _refused(
        world,
        ForbiddenRole,
        lambda: _migrate(world, pid, head, path, {"state": "closed", "reason": "x"}, who="cleo"),
    )
    assert "['ops']" in refusal.message


def test_the_automation_actor_cannot_migrate(world: World) -> None:
    path = _path()
    world.deploy(path, V2)
    pid = new_process_id()
    head = world.submit("cleo", "order", pid, None, workflow=path).hash
    _refused(
        world,
        ReservedField,
        lambda: _migrate(
            world, pid, head, path, {"state": "closed", "reason": "x"}, who="automation"
        ),
    )


@pytest.mark.parametrize(
    ("input_", "says"),
    [
        ({"state": "shipped", "reason": "OPS-1"}, "'shipped' is not one of"),
        ({"state": "delivered"}, "'reason' is a required property"),
        ({"reason": "OPS-1"}, "'state' is a required property"),
        ({"state": "delivered", "reason": "two words"}, "does not match"),
        ({"state": "delivered", "reason": ""}, "does not match"),
        ({"state": "delivered", "reason": "x" * 129}, "does not match"),
        ({"state": "delivered", "reason": "OPS-1\n"}, "does not match"),
        ({"state": "delivered", "reason": "OPS-1", "note": "hi"}, "'note' was unexpected"),
        ({"state": 3, "reason": "OPS-1"}, "is not of type 'string'"),
        ({"state": "delivered", "reason": 42}, "is not of type 'string'"),
        ({"state": "delivered", "reason": "OPS-1", "cancel": "remind"}, "is not of type 'array'"),
        ({"state": "delivered", "reason": "OPS-1", "cancel": [1]}, "is not of type 'string'"),
        ({"state": "delivered", "reason": "OPS-1", "cancel": ["a b"]}, "does not match"),
        ({"state": "delivered", "reason": "OPS-1", "cancel": ["ok\n"]}, "not a schedule id"),
    ],
)
def test_bad_input_is_invalid_input(world: World, input_: JsonObject, says: str) -> None:
    path = _path()
    world.deploy(path, V2)
    pid = new_process_id()
    head = world.submit("cleo", "order", pid, None, workflow=path).hash
    refusal = _refused(world, InvalidInput, lambda: _migrate(world, pid, head, path, input_))
    assert says in refusal.message


def test_a_missing_process_is_refused_as_any_update_is(world: World) -> None:
    path = _path()
    world.deploy(path, V2)
    ok: JsonObject = {"state": "ordered", "reason": "OPS-1"}
    _refused(world, WrongState, lambda: _migrate(world, new_process_id(), None, path, ok))
    _refused(world, UnknownProcess, lambda: _migrate(world, new_process_id(), "a" * 64, path, ok))


# --- offline: the bundle of a migrated process ---------------------------------------


def test_a_migrated_process_verifies_offline_from_its_bundle(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _path()
    world.deploy(path, V1)
    pid, head = _shipped(world, path)
    world.deploy(path, V2)
    _migrate(world, pid, head, path, {"state": "delivered", "reason": "OPS-42"})
    bundle: Any = export_bundle(world.database, pid)
    assert len(bundle["workflows"]) == 2  # v1 and v2
    assert verify_bundle(ijson.loads(json.dumps(bundle)), replay=True).ok
    file = tmp_path / "bundle.json"
    file.write_text(json.dumps(bundle))

    # No database from here on: an unreachable URL, and no embedded server either.
    monkeypatch.setenv("CHARTER_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli_main.app, ["verify", "--bundle", str(file), "--replay"])
    assert result.exit_code == 0, result.output
    assert "state and data: replayed from the events" in result.stdout
    assert "ok (3 events verified)" in result.stdout

    # The stored state is what the migration made it: another one is found by replay.
    bundle["process"]["state"] = "shipped"
    file.write_text(json.dumps(bundle))
    result = CliRunner().invoke(cli_main.app, ["verify", "--bundle", str(file), "--json"])
    assert result.exit_code == 1
    assert [p["code"] for p in json.loads(result.stdout)["problems"]] == ["replay_mismatch"]
