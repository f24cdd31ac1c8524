"""Migration 0019 backfills the revision of events written before it: the newest
revision holding the event's version deployed by the time it was received."""

from __future__ import annotations

import hashlib
import json

import psycopg

from charter.db.database import connect
from charter.db.migrate import _apply, available_migrations, migrate
from charter.db.queries import query

REVISIONS_MIGRATION = 19
KEY = "ab" * 32
SIGNATURE = "cd" * 64
DEFINITIONS = ('{"a":1}', '{"b":1}')
A, B = (hashlib.sha256(text.encode()).hexdigest() for text in DEFINITIONS)


def _event(
    conn: psycopg.Connection[tuple[object, ...]],
    process: str,
    seq: int,
    prev: str | None,
    version: str,
    at: str,
) -> str:
    text = json.dumps({"n": seq, "process": process}, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    conn.execute(
        "INSERT INTO charter.events (process_id, seq, hash, prev_hash, kind, envelope, "
        "signature, actor, actor_id, actor_roles, action, workflow_path, workflow_version, "
        "received_at) VALUES (%s, %s, %s, %s, 'action', %s, %s, %s, 'ada', '{clerk}', 'a', "
        "'w/p', %s, %s)",
        (process, seq, digest, prev, text, SIGNATURE, KEY, version, at),
    )
    conn.execute(
        "UPDATE charter.processes SET head_hash = %s, seq = %s WHERE id = %s",
        (digest, seq, process),
    )
    return digest


def test_events_before_the_migration_get_their_revision(empty_database_url: str) -> None:
    with connect(empty_database_url) as conn:
        with conn.transaction():
            conn.execute(query("lock_migrations"))
            conn.execute(query("bootstrap_migrations"))
        for migration in available_migrations():
            if migration.version < REVISIONS_MIGRATION:
                _apply(conn, migration)
        with conn.transaction():
            conn.execute("INSERT INTO charter.actors (id, roles) VALUES ('ada', '{clerk}')")
            conn.execute(
                "INSERT INTO charter.actor_keys (public_key, actor_id) VALUES (%s, 'ada')", (KEY,)
            )
            for version, text in zip((A, B), DEFINITIONS, strict=True):
                conn.execute(
                    "INSERT INTO charter.workflow_definitions (version, definition) "
                    "VALUES (%s, %s)",
                    (version, text),
                )
            # A, then B, then A again: one version, two revisions.
            for revision, version, at in (
                (1, A, "2026-01-01T00:00:00Z"),
                (2, B, "2026-02-01T00:00:00Z"),
                (3, A, "2026-03-01T00:00:00Z"),
            ):
                conn.execute(
                    "INSERT INTO charter.workflow_deployments (path, revision, version, "
                    "deployed_at) VALUES ('w/p', %s, %s, %s)",
                    (revision, version, at),
                )
            conn.execute(
                "INSERT INTO charter.processes (id, workflow_path, state) VALUES ('p', 'w/p', 's')"
            )
            head = _event(conn, "p", 1, None, A, "2026-01-15T00:00:00Z")
            head = _event(conn, "p", 2, head, B, "2026-02-15T00:00:00Z")
            head = _event(conn, "p", 3, head, A, "2026-03-15T00:00:00Z")
            # Received before its version's first deployment (a clock that ran behind).
            _event(conn, "p", 4, head, B, "2025-12-01T00:00:00Z")
        migrate(conn)
        conn.commit()
        rows = conn.execute(
            "SELECT seq, workflow_revision FROM charter.events ORDER BY seq"
        ).fetchall()
    assert rows == [(1, 1), (2, 2), (3, 3), (4, 2)]
