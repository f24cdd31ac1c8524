"""Rows for database tests, written with plain SQL as a given role would.

The database does not check signatures (verification does), so these rows carry
well-formed but arbitrary signatures; hashes are real, since the schema checks them.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import cast

import psycopg

Conn = psycopg.Connection[tuple[object, ...]]
WORKFLOW = "tests/simple"


def random_hex(n_bytes: int = 32) -> str:
    return secrets.token_hex(n_bytes)


def add_actor(conn: Conn, actor_id: str | None = None, roles: tuple[str, ...] = ("user",)) -> str:
    """Register an actor with one key; returns the public key."""
    actor_id = actor_id or f"actor-{random_hex(4)}"
    public_key = random_hex()
    conn.execute("INSERT INTO actors (id, roles) VALUES (%s, %s)", (actor_id, list(roles)))
    conn.execute(
        "INSERT INTO actor_keys (public_key, actor_id) VALUES (%s, %s)", (public_key, actor_id)
    )
    return public_key


def add_definition(conn: Conn, path: str = WORKFLOW) -> str:
    """Store a definition and deploy it at `path`; returns its version hash."""
    text = json.dumps({"dsl": 2, "nonce": random_hex(4)}, separators=(",", ":"), sort_keys=True)
    version = hashlib.sha256(text.encode()).hexdigest()
    conn.execute(
        "INSERT INTO workflow_definitions (version, definition) VALUES (%s, %s::json)",
        (version, text),
    )
    row = conn.execute(
        "SELECT coalesce(max(revision), 0) + 1 FROM workflow_deployments WHERE path = %s", (path,)
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO workflow_deployments (path, revision, version) VALUES (%s, %s, %s)",
        (path, row[0], version),
    )
    return version


def add_process(conn: Conn, process_id: str | None = None, path: str = WORKFLOW) -> str:
    process_id = process_id or f"p-{random_hex(6)}"
    conn.execute(
        "INSERT INTO processes (id, workflow_path, state) VALUES (%s, %s, 'draft')",
        (process_id, path),
    )
    return process_id


def head(conn: Conn, process_id: str) -> tuple[int, str | None]:
    row = conn.execute(
        "SELECT seq, head_hash FROM processes WHERE id = %s", (process_id,)
    ).fetchone()
    assert row is not None
    return cast(int, row[0]), cast("str | None", row[1])


def event_text(process_id: str, prev: str | None, actor: str, action: str = "touch") -> str:
    envelope = {
        "v": 1,
        "process": process_id,
        "workflow": WORKFLOW,
        "action": action,
        "input": {"n": random_hex(4)},
        "prev": prev,
        "actor": actor,
        "at": "2026-06-18T10:00:00.000Z",
    }
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True)


def insert_event(
    conn: Conn,
    process_id: str,
    actor: str,
    version: str,
    *,
    seq: int,
    prev: str | None,
    text: str | None = None,
    advance_head: bool = True,
    action: str = "touch",
) -> str:
    """Insert one event row (and move the head onto it); returns its hash."""
    text = text or event_text(process_id, prev, actor, action)
    digest = hashlib.sha256(text.encode()).hexdigest()
    conn.execute(
        """
        INSERT INTO events (process_id, seq, hash, prev_hash, kind, envelope, signature,
                            actor, actor_id, actor_roles, action, workflow_path, workflow_version)
        VALUES (%s, %s, %s, %s, 'action', %s::json, %s, %s,
                (SELECT actor_id FROM actor_keys WHERE public_key = %s), '{user}',
                %s, %s, %s)
        """,
        (
            process_id,
            seq,
            digest,
            prev,
            text,
            random_hex(64),
            actor,
            actor,
            action,
            WORKFLOW,
            version,
        ),
    )
    if advance_head:
        conn.execute(
            "UPDATE processes SET seq = %s, head_hash = %s, updated_at = now() WHERE id = %s",
            (seq, digest, process_id),
        )
    return digest


def append_event(
    conn: Conn, process_id: str, actor: str, version: str, action: str = "touch"
) -> str:
    """Append the next event at the head, as the engine would."""
    seq, prev = head(conn, process_id)
    return insert_event(conn, process_id, actor, version, seq=seq + 1, prev=prev, action=action)


def seed_chain(conn: Conn, events: int = 3) -> tuple[str, str, str, list[str]]:
    """An actor, a deployed workflow and a process with `events` events."""
    actor = add_actor(conn)
    version = add_definition(conn)
    process_id = add_process(conn)
    hashes = [append_event(conn, process_id, actor, version) for _ in range(events)]
    return actor, version, process_id, hashes
