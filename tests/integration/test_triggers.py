"""Append-only, chain and guard triggers, and the constraints behind them."""

from __future__ import annotations

import hashlib
import threading

import pytest

from charter.audit.verify_evidence import verify_evidence
from charter.audit.verify_stored import load_evidence
from charter.core.errors import AppendOnlyViolation, ChainViolation, Duplicate, IntegrityViolation
from charter.db.database import Database, connect
from charter.db.errors import translated
from tests.integration import rows
from tests.integration.dbcheck import Conn, refused

APPEND_ONLY_TABLES = [
    "events",
    "system_log",
    "workflow_definitions",
    "workflow_deployments",
    "automation_firings",
]


@pytest.fixture
def chain(conn: Conn) -> tuple[str, str, str, list[str]]:
    seeded = rows.seed_chain(conn, events=3)
    conn.execute(
        "INSERT INTO system_log (kind, process_id, message) VALUES ('test.seed', %s, 'seeded')",
        (seeded[2],),
    )
    conn.execute(
        "INSERT INTO automation_firings (work_id, kind, occurrence, process_id, event_hash)"
        " VALUES (gen_random_uuid(), 'auto_action', now(), %s, %s)",
        (seeded[2], seeded[3][0]),
    )
    return seeded


@pytest.mark.parametrize("table", APPEND_ONLY_TABLES)
def test_update_of_append_only_rows_raises_even_for_the_owner(
    conn: Conn, chain: tuple[str, str, str, list[str]], table: str
) -> None:
    column = {
        "events": "action",
        "system_log": "message",
        "workflow_definitions": "created_at",
        "workflow_deployments": "deployed_by",
        "automation_firings": "kind",
    }[table]
    error = refused(conn, AppendOnlyViolation, f"UPDATE {table} SET {column} = {column}")
    assert error.message.endswith(f"{table} is append-only: UPDATE is not allowed")


@pytest.mark.parametrize("table", APPEND_ONLY_TABLES)
def test_delete_of_append_only_rows_raises_even_for_the_owner(
    conn: Conn, chain: tuple[str, str, str, list[str]], table: str
) -> None:
    refused(conn, AppendOnlyViolation, f"DELETE FROM {table}")


@pytest.mark.parametrize(
    "table",
    [
        "events",
        "system_log",
        "workflow_definitions",
        "workflow_deployments",
        "processes",
        "actor_keys",
        "scheduled_actions",
        "automation_queue",
    ],
)
def test_truncate_raises_even_for_the_owner(
    conn: Conn, chain: tuple[str, str, str, list[str]], table: str
) -> None:
    # CASCADE so that foreign keys cannot be what stops it: the trigger must.
    conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
    refused(conn, AppendOnlyViolation, f"TRUNCATE {table} CASCADE")


def test_processes_are_never_deleted(conn: Conn, chain: tuple[str, str, str, list[str]]) -> None:
    refused(conn, AppendOnlyViolation, "DELETE FROM processes WHERE id = %s", (chain[2],))


def test_work_rows_are_never_deleted(conn: Conn, chain: tuple[str, str, str, list[str]]) -> None:
    actor, _, process_id, hashes = chain
    conn.execute(
        """
        INSERT INTO scheduled_actions (schedule_id, process_id, workflow_path, action_name,
            run_at, created_event_hash, created_by_action, created_by_actor)
        VALUES ('s', %s, %s, 'a', now(), %s, 'touch', %s)
        """,
        (process_id, rows.WORKFLOW, hashes[0], actor),
    )
    conn.execute(
        """
        INSERT INTO automation_queue (process_id, workflow_path, action_name, reason,
            queued_by_event_hash, queued_by_action, queued_by_actor)
        VALUES (%s, %s, 'a', 'r', %s, 'touch', %s)
        """,
        (process_id, rows.WORKFLOW, hashes[0], actor),
    )
    refused(conn, AppendOnlyViolation, "DELETE FROM scheduled_actions")
    refused(conn, AppendOnlyViolation, "DELETE FROM automation_queue")


# --- the chain --------------------------------------------------------------------------


def test_an_event_must_extend_the_head(conn: Conn, chain: tuple[str, str, str, list[str]]) -> None:
    actor, version, process_id, hashes = chain
    # skipping a position
    refused(
        conn,
        ChainViolation,
        *_insert(process_id, actor, version, seq=5, prev=hashes[-1]),
    )
    # the right position, the wrong predecessor
    refused(
        conn,
        ChainViolation,
        *_insert(process_id, actor, version, seq=4, prev=hashes[0]),
    )
    # a second genesis
    refused(conn, ChainViolation, *_insert(process_id, actor, version, seq=1, prev=None))
    # the head itself is fine
    rows.append_event(conn, process_id, actor, version)


def test_an_event_for_an_unknown_process_is_refused(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    actor, version, _, _ = chain
    refused(conn, ChainViolation, *_insert("nobody", actor, version, seq=1, prev=None))


def test_constraints_hold_with_triggers_bypassed(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    """A superuser can switch triggers off; UNIQUE and CHECK constraints still decide."""
    actor, version, process_id, hashes = chain
    conn.execute("SET LOCAL session_replication_role = replica")
    error = refused(conn, Duplicate, *_insert(process_id, actor, version, seq=3, prev=hashes[1]))
    assert error.context["constraint"] == "events_pkey"
    error = refused(
        conn, IntegrityViolation, *_insert(process_id, actor, version, seq=2, prev=None)
    )
    assert error.context["constraint"] == "events_check"


def test_with_the_triggers_on_no_two_events_of_a_process_share_a_predecessor(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    """Why there is no UNIQUE (process_id, prev_hash): a second event naming any
    predecessor again is refused at every seq, by the chain trigger or the primary key."""
    actor, version, process_id, hashes = chain
    # Every predecessor that already has its child (the head has none yet).
    for prev in (None, *hashes[:-1]):
        for seq in range(1, len(hashes) + 3):
            refusals = (ChainViolation, Duplicate, IntegrityViolation)
            with pytest.raises(refusals), conn.transaction():
                _insert_raw(conn, process_id, actor, version, seq=seq, prev=prev)
    assert rows.head(conn, process_id) == (len(hashes), hashes[-1])


def test_racing_writers_of_the_same_predecessor_one_wins_by_the_primary_key(
    database_url: str,
) -> None:
    """Two transactions append to the same head at once (neither advances the head, so the
    trigger lets both in): the primary key (process_id, seq) decides."""
    with connect(database_url) as setup:
        actor, version, process_id, hashes = rows.seed_chain(setup, events=2)
        setup.commit()
    first, second = connect(database_url), connect(database_url)
    try:
        _insert_raw(first, process_id, actor, version, seq=3, prev=hashes[-1])
        outcome: list[BaseException | None] = []

        def racer() -> None:
            try:
                _insert_raw(second, process_id, actor, version, seq=3, prev=hashes[-1])
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=racer)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive(), "the second insert must wait for the first transaction"
        first.commit()
        thread.join(timeout=30)
        [error] = outcome
        assert isinstance(error, Duplicate)
        assert error.context["constraint"] == "events_pkey"
    finally:
        second.rollback()
        first.close()
        second.close()


def test_a_fork_needs_the_triggers_off_and_verification_finds_it(database: Database) -> None:
    with connect(database.url) as owner:
        actor, version, process_id, hashes = rows.seed_chain(owner, events=3)
        owner.execute("SET LOCAL session_replication_role = replica")
        _insert_raw(owner, process_id, actor, version, seq=4, prev=hashes[1])  # 2's 2nd child
        owner.commit()
    codes = {p.code for p in verify_evidence(load_evidence(database, process_id)).problems}
    assert "broken_link" in codes


def test_the_hash_must_be_the_hash_of_the_envelope(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    actor, version, process_id, hashes = chain
    text = rows.event_text(process_id, hashes[-1], actor)
    error = refused(
        conn,
        IntegrityViolation,
        """
        INSERT INTO events (process_id, seq, hash, prev_hash, kind, envelope, signature,
                            actor, actor_id, actor_roles, action, workflow_path, workflow_version)
        VALUES (%s, 4, %s, %s, 'action', %s::json, %s, %s, 'x', '{}', 'touch', %s, %s)
        """,
        (
            process_id,
            rows.random_hex(),
            hashes[-1],
            text,
            rows.random_hex(64),
            actor,
            rows.WORKFLOW,
            version,
        ),
    )
    assert error.context["constraint"] == "hash_is_envelope_hash"


def test_an_event_needs_a_registered_key(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    _, version, process_id, hashes = chain
    stranger = rows.random_hex()
    refused(
        conn, IntegrityViolation, *_insert(process_id, stranger, version, seq=4, prev=hashes[-1])
    )


# --- the head -----------------------------------------------------------------------


def test_the_head_never_moves_backwards(conn: Conn, chain: tuple[str, str, str, list[str]]) -> None:
    _, _, process_id, hashes = chain
    refused(
        conn,
        ChainViolation,
        "UPDATE processes SET seq = 2, head_hash = %s WHERE id = %s",
        (hashes[1], process_id),
    )


def test_the_head_moves_only_onto_an_existing_event(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    _, _, process_id, _ = chain
    refused(
        conn,
        ChainViolation,
        "UPDATE processes SET seq = 4, head_hash = %s WHERE id = %s",
        (rows.random_hex(), process_id),
    )


@pytest.mark.parametrize(
    ("column", "value"), [("workflow_path", "other/path"), ("created_at", "2000-01-01T00:00:00Z")]
)
def test_process_identity_never_changes(
    conn: Conn, chain: tuple[str, str, str, list[str]], column: str, value: str
) -> None:
    refused(
        conn,
        AppendOnlyViolation,
        f"UPDATE processes SET {column} = %s WHERE id = %s",
        (value, chain[2]),
    )


def test_state_and_data_may_change(conn: Conn, chain: tuple[str, str, str, list[str]]) -> None:
    process_id = chain[2]
    conn.execute(
        "UPDATE processes SET state = 'active', data = '{\"a\": 1}' WHERE id = %s", (process_id,)
    )


# --- registry and actors -----------------------------------------------------------


def test_a_definition_is_stored_under_its_own_hash(conn: Conn) -> None:
    text = '{"dsl":2}'
    refused(
        conn,
        IntegrityViolation,
        "INSERT INTO workflow_definitions (version, definition) VALUES (%s, %s::json)",
        (rows.random_hex(), text),
    )
    conn.execute(
        "INSERT INTO workflow_definitions (version, definition) VALUES (%s, %s::json)",
        (hashlib.sha256(text.encode()).hexdigest(), text),
    )


def test_only_the_automation_actor_holds_automation(conn: Conn) -> None:
    error = refused(
        conn,
        IntegrityViolation,
        "INSERT INTO actors (id, roles) VALUES ('mallory', '{AUTOMATION}')",
    )
    assert error.context["constraint"] == "automation_role_reserved"
    conn.execute("INSERT INTO actors (id, roles) VALUES ('automation', '{AUTOMATION}')")
    conn.execute("INSERT INTO actors (id, roles) VALUES ('bob', '{analyst}')")
    refused(
        conn,
        IntegrityViolation,
        "UPDATE actors SET roles = '{AUTOMATION,analyst}' WHERE id = 'bob'",
    )


def test_keys_are_retired_once_and_never_deleted(conn: Conn) -> None:
    key = rows.add_actor(conn, "alice")
    refused(conn, AppendOnlyViolation, "DELETE FROM actor_keys WHERE public_key = %s", (key,))
    conn.execute("UPDATE actor_keys SET retired_at = now() WHERE public_key = %s", (key,))
    refused(
        conn,
        AppendOnlyViolation,
        "UPDATE actor_keys SET retired_at = NULL WHERE public_key = %s",
        (key,),
    )
    # rotation: a new active key for the same actor, the old one still on record
    conn.execute(
        "INSERT INTO actor_keys (public_key, actor_id) VALUES (%s, 'alice')", (rows.random_hex(),)
    )
    error = refused(
        conn,
        Duplicate,
        "INSERT INTO actor_keys (public_key, actor_id) VALUES (%s, 'alice')",
        (rows.random_hex(),),
    )
    assert error.context["constraint"] == "actor_keys_one_active"


def test_one_live_schedule_per_id(conn: Conn, chain: tuple[str, str, str, list[str]]) -> None:
    actor, _, process_id, hashes = chain
    insert = """
        INSERT INTO scheduled_actions (schedule_id, process_id, workflow_path, action_name,
            run_at, created_event_hash, created_by_action, created_by_actor, status, cancelled_at)
        VALUES ('review', %s, %s, 'a', now(), %s, 'touch', %s, %s, %s)
    """
    params = (process_id, rows.WORKFLOW, hashes[0], actor)
    conn.execute(insert, (*params, "cancelled", "2026-01-01T00:00:00Z"))
    conn.execute(insert, (*params, "cancelled", "2026-01-02T00:00:00Z"))
    conn.execute(insert, (*params, "active", None))
    error = refused(conn, Duplicate, insert, (*params, "active", None))
    assert error.context["constraint"] == "scheduled_actions_one_live"


def test_a_claimed_row_carries_its_lease(
    conn: Conn, chain: tuple[str, str, str, list[str]]
) -> None:
    actor, _, process_id, hashes = chain
    error = refused(
        conn,
        IntegrityViolation,
        """
        INSERT INTO automation_queue (process_id, workflow_path, action_name, reason,
            queued_by_event_hash, queued_by_action, queued_by_actor, status)
        VALUES (%s, %s, 'a', 'r', %s, 'touch', %s, 'claimed')
        """,
        (process_id, rows.WORKFLOW, hashes[0], actor),
    )
    assert error.context["constraint"] == "automation_queue_claim_has_lease"


def _insert(
    process_id: str, actor: str, version: str, *, seq: int, prev: str | None
) -> tuple[str, tuple[object, ...]]:
    text = rows.event_text(process_id, prev, actor)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return (
        """
        INSERT INTO events (process_id, seq, hash, prev_hash, kind, envelope, signature,
                            actor, actor_id, actor_roles, action, workflow_path, workflow_version)
        VALUES (%s, %s, %s, %s, 'action', %s::json, %s, %s, 'x', '{}', 'touch', %s, %s)
        """,
        (process_id, seq, digest, prev, text, rows.random_hex(64), actor, rows.WORKFLOW, version),
    )


def _insert_raw(
    conn: Conn, process_id: str, actor: str, version: str, *, seq: int, prev: str | None
) -> None:
    sql, params = _insert(process_id, actor, version, seq=seq, prev=prev)
    with translated():
        conn.execute(sql, params)
