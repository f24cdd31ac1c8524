"""Every role's privileges, proven against the real database (docs/architecture.md)."""

from __future__ import annotations

import pytest
from psycopg import sql

from charter.core.errors import IntegrityViolation, PermissionDenied
from tests.integration import rows
from tests.integration.dbcheck import Conn, allowed, refused

TABLES = [
    "actors",
    "actor_keys",
    "workflow_definitions",
    "workflow_deployments",
    "processes",
    "events",
    "system_log",
    "scheduled_actions",
    "automation_queue",
    "schema_migrations",
    "api_tokens",
    "automation_firings",
    "automations",
    "schedule_triggers",
    "webhook_triggers",
    "plans",
    "runs",
    "run_steps",
    "machines",
    "dpop_proofs",
    "log_pending",
    "log_entries",
    "log_checkpoints",
    "log_queue_on",
    "event_disclosures",
]
# Configuration the API edits and may delete; everything else is history.
DELETABLE_BY_ENGINE = {
    "automations",
    "schedule_triggers",
    "webhook_triggers",
    "plans",
    "dpop_proofs",
}
ROLES = ["charter_engine", "charter_worker", "charter_reader"]
LOG_TABLES = ["log_pending", "log_entries", "log_checkpoints", "log_queue_on"]


def _first_column(conn: Conn, table: str) -> str:
    """The first ordinary column (identity columns refuse `SET col = col`)."""
    row = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND attidentity = '' AND NOT attisdropped ORDER BY attnum LIMIT 1",
        (f"charter.{table}",),
    ).fetchone()
    assert row is not None
    return str(row[0])


def _write(conn: Conn, table: str, operation: str) -> sql.Composed:
    name = sql.Identifier(table)
    column = sql.Identifier(_first_column(conn, table))
    statements = {
        "INSERT": sql.SQL("INSERT INTO {} DEFAULT VALUES").format(name),
        "UPDATE": sql.SQL("UPDATE {} SET {} = {} WHERE false").format(name, column, column),
        "DELETE": sql.SQL("DELETE FROM {} WHERE false").format(name),
        "TRUNCATE": sql.SQL("TRUNCATE {} CASCADE").format(name),
    }
    return statements[operation]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    "table", [t for t in TABLES if t not in {"api_tokens", "dpop_proofs", "event_disclosures"}]
)
def test_every_role_can_read_every_audit_table(conn: Conn, role: str, table: str) -> None:
    allowed(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)), role=role)


def test_personal_values_are_read_by_the_api_and_verification_not_the_worker(conn: Conn) -> None:
    refused(conn, PermissionDenied, "SELECT count(*) FROM event_disclosures", role="charter_worker")
    for role in ("charter_engine", "charter_reader"):
        allowed(conn, "SELECT count(*) FROM event_disclosures", role=role)


@pytest.mark.parametrize("role", ["charter_worker", "charter_reader"])
def test_only_the_api_reads_token_hashes(conn: Conn, role: str) -> None:
    refused(conn, PermissionDenied, "SELECT token_hash FROM api_tokens", role=role)
    allowed(conn, "SELECT token_hash FROM api_tokens", role="charter_engine")


@pytest.mark.parametrize("role", ["charter_worker", "charter_reader"])
def test_webhook_secrets_are_write_only(conn: Conn, role: str) -> None:
    refused(conn, PermissionDenied, "SELECT secret FROM webhook_triggers", role=role)
    allowed(conn, "SELECT id, source, event FROM webhook_triggers", role=role)
    allowed(conn, "SELECT secret FROM webhook_triggers", role="charter_engine")


@pytest.mark.parametrize("role", ["charter_worker", "charter_reader"])
@pytest.mark.parametrize("operation", ["INSERT", "UPDATE", "DELETE", "TRUNCATE"])
@pytest.mark.parametrize("table", TABLES)
def test_worker_and_reader_cannot_write(conn: Conn, role: str, operation: str, table: str) -> None:
    refused(conn, PermissionDenied, _write(conn, table, operation), role=role)


@pytest.mark.parametrize("table", TABLES)
def test_engine_never_truncates(conn: Conn, table: str) -> None:
    refused(conn, PermissionDenied, _write(conn, table, "TRUNCATE"), role="charter_engine")


@pytest.mark.parametrize("table", [t for t in TABLES if t not in DELETABLE_BY_ENGINE])
def test_engine_never_deletes_history(conn: Conn, table: str) -> None:
    refused(conn, PermissionDenied, _write(conn, table, "DELETE"), role="charter_engine")


@pytest.mark.parametrize(
    "table",
    [
        "events",
        "system_log",
        "workflow_definitions",
        "workflow_deployments",
        "automation_queue",
        "schema_migrations",
        "event_disclosures",
    ],
)
def test_engine_cannot_update_append_only_or_worker_rows(conn: Conn, table: str) -> None:
    refused(conn, PermissionDenied, _write(conn, table, "UPDATE"), role="charter_engine")


def test_engine_cannot_record_migrations(conn: Conn) -> None:
    refused(
        conn,
        PermissionDenied,
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'x', %s)",
        (rows.random_hex(),),
        role="charter_engine",
    )


@pytest.mark.parametrize("column", ["id", "workflow_path", "parent_id", "created_at"])
def test_engine_cannot_change_process_identity(conn: Conn, column: str) -> None:
    statement = sql.SQL("UPDATE processes SET {} = {} WHERE false").format(
        sql.Identifier(column), sql.Identifier(column)
    )
    refused(conn, PermissionDenied, statement, role="charter_engine")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE scheduled_actions SET fire_count = fire_count + 1 WHERE false",
        "UPDATE automation_queue SET fired_event_hash = NULL WHERE false",
        "UPDATE automation_queue SET completed_at = now() WHERE false",
    ],
)
def test_engine_cannot_rewrite_work_row_results(conn: Conn, statement: str) -> None:
    refused(conn, PermissionDenied, statement, role="charter_engine")


def test_engine_writes_the_governed_flow(conn: Conn) -> None:
    """Everything process_event needs to write, the engine role may write."""
    conn.execute("SET LOCAL ROLE charter_engine")
    actor, _, process_id, hashes = rows.seed_chain(conn, events=2)
    conn.execute(
        "INSERT INTO system_log (kind, process_id, event_hash) VALUES ('event.accepted', %s, %s)",
        (process_id, hashes[-1]),
    )
    conn.execute(
        """
        INSERT INTO scheduled_actions (schedule_id, process_id, workflow_path, action_name,
            run_at, created_event_hash, created_by_action, created_by_actor)
        VALUES ('deadline', %s, %s, 'escalate', now() + interval '1 day', %s, 'touch', %s)
        """,
        (process_id, rows.WORKFLOW, hashes[-1], actor),
    )
    conn.execute(
        "UPDATE scheduled_actions SET status = 'cancelled', cancelled_at = now(),"
        " cancel_reason = 'test' WHERE process_id = %s",
        (process_id,),
    )
    conn.execute(
        """
        INSERT INTO automation_queue (process_id, workflow_path, action_name, reason,
            queued_by_event_hash, queued_by_action, queued_by_actor)
        VALUES (%s, %s, 'start', 'auto action became available', %s, 'touch', %s)
        """,
        (process_id, rows.WORKFLOW, hashes[-1], actor),
    )
    # A migration cancels queued work as an action's `cancel` cancels schedules.
    conn.execute(
        "UPDATE automation_queue SET status = 'cancelled', cancelled_at = now(),"
        " cancelled_by_event_hash = %s, cancel_reason = 'test' WHERE process_id = %s",
        (hashes[-1], process_id),
    )
    conn.execute("RESET ROLE")
    assert rows.head(conn, process_id) == (2, hashes[-1])


def test_no_charter_function_is_executable_by_public(conn: Conn) -> None:
    found = conn.execute(
        """
        SELECT p.oid::regprocedure::text
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
             aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) acl
        WHERE n.nspname = 'charter' AND acl.grantee = 0
        """
    ).fetchall()
    assert found == []


def test_public_has_no_table_privileges(conn: Conn) -> None:
    found = conn.execute(
        """
        SELECT c.relname, acl.privilege_type
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
             aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) acl
        WHERE n.nspname = 'charter' AND acl.grantee = 0
        """
    ).fetchall()
    assert found == []


@pytest.mark.parametrize("table", LOG_TABLES)
def test_the_sequencer_reads_the_log_tables(conn: Conn, table: str) -> None:
    statement = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    allowed(conn, statement, role="charter_sequencer")


@pytest.mark.parametrize(
    ("table", "operation"),
    [
        ("log_pending", "DELETE"),
        ("log_entries", "INSERT"),
        ("log_checkpoints", "INSERT"),
    ],
)
def test_the_sequencer_writes_only_what_it_owns(conn: Conn, table: str, operation: str) -> None:
    """It dequeues and records (INSERT ... DEFAULT VALUES fails on NOT NULL, not on rights)."""
    statement = _write(conn, table, operation)
    if operation == "INSERT":
        refused(conn, IntegrityViolation, statement, role="charter_sequencer")
    else:
        allowed(conn, statement, role="charter_sequencer")


@pytest.mark.parametrize(
    ("table", "operation"),
    [
        ("log_pending", "INSERT"),
        ("log_pending", "UPDATE"),
        ("log_pending", "TRUNCATE"),
        ("log_entries", "UPDATE"),
        ("log_entries", "DELETE"),
        ("log_entries", "TRUNCATE"),
        ("log_checkpoints", "UPDATE"),
        ("log_checkpoints", "DELETE"),
        ("log_queue_on", "INSERT"),  # only through enable_log_queue_v1
        ("log_queue_on", "DELETE"),
        ("events", "INSERT"),
        ("events", "UPDATE"),
        ("processes", "UPDATE"),
    ],
)
def test_the_sequencer_cannot_write_anything_else(conn: Conn, table: str, operation: str) -> None:
    refused(conn, PermissionDenied, _write(conn, table, operation), role="charter_sequencer")


def test_the_engine_only_queues_for_the_log(conn: Conn) -> None:
    refused(conn, PermissionDenied, "DELETE FROM log_pending WHERE false", role="charter_engine")
    refused(conn, PermissionDenied, _write(conn, "log_entries", "INSERT"), role="charter_engine")
    refused(
        conn, PermissionDenied, _write(conn, "log_checkpoints", "INSERT"), role="charter_engine"
    )


def test_every_accepted_event_is_queued_for_the_log(conn: Conn) -> None:
    conn.execute("SELECT charter.enable_log_queue_v1()")  # a log's sequencer has led
    conn.execute("SET LOCAL ROLE charter_engine")
    _, _, process_id, hashes = rows.seed_chain(conn, events=3)
    conn.execute("RESET ROLE")
    queued = conn.execute(
        "SELECT event_hash, seq, prev_hash FROM log_pending WHERE process_id = %s ORDER BY seq",
        (process_id,),
    ).fetchall()
    assert queued == [(hashes[0], 1, None), (hashes[1], 2, hashes[0]), (hashes[2], 3, hashes[1])]
