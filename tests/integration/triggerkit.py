"""Automations, plans and triggers written straight into the tables for admission tests
(independent of the control API), and the counts those tests compare."""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

Conn = psycopg.Connection[tuple[object, ...]]

PLAN_STEPS = [{"id": "ping", "actionId": "http.request", "input": {"url": "https://e.test"}}]


def new_principal() -> str:
    return f"p-{secrets.token_hex(5)}"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def automation(
    conn: Conn,
    principal: str,
    *,
    target: str = "machine-1",
    enabled: bool = True,
    plan: bool = True,
) -> uuid.UUID:
    row = conn.execute(
        "INSERT INTO charter.automations (principal, target, name, enabled) "
        "VALUES (%s, %s, 'test', %s) RETURNING id",
        (principal, target, enabled),
    ).fetchone()
    assert row is not None
    automation_id = row[0]
    assert isinstance(automation_id, uuid.UUID)
    if plan:
        conn.execute(
            "INSERT INTO charter.plans (automation_id, version, steps) VALUES (%s, 1, %s)",
            (automation_id, Jsonb(PLAN_STEPS)),
        )
    return automation_id


def schedule(
    conn: Conn,
    automation_id: uuid.UUID,
    *,
    cron: str,
    timezone: str = "UTC",
    next_run_at: datetime,
    remaining: int | None = None,
    enabled: bool = True,
) -> uuid.UUID:
    row = conn.execute(
        "INSERT INTO charter.schedule_triggers "
        "(automation_id, cron, timezone, next_run_at, remaining_occurrences, enabled) "
        "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
        (automation_id, cron, timezone, next_run_at, remaining, enabled),
    ).fetchone()
    assert row is not None
    assert isinstance(row[0], uuid.UUID)
    return row[0]


def webhook(
    conn: Conn,
    automation_id: uuid.UUID,
    *,
    source: str,
    secret: str,
    event: str | None = None,
    enabled: bool = True,
) -> uuid.UUID:
    row = conn.execute(
        "INSERT INTO charter.webhook_triggers (automation_id, source, event, secret, enabled) "
        "VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (automation_id, source, event, secret, enabled),
    ).fetchone()
    assert row is not None
    assert isinstance(row[0], uuid.UUID)
    return row[0]


def trigger_state(conn: Conn, trigger_id: uuid.UUID) -> tuple[datetime, int | None]:
    row = conn.execute(
        "SELECT next_run_at, remaining_occurrences FROM charter.schedule_triggers WHERE id = %s",
        (trigger_id,),
    ).fetchone()
    assert row is not None
    next_run_at, remaining = row
    assert isinstance(next_run_at, datetime)
    assert remaining is None or isinstance(remaining, int)
    return next_run_at, remaining


def run_count(conn: Conn, principal: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM charter.runs WHERE principal = %s", (principal,)
    ).fetchone()
    assert row is not None
    assert isinstance(row[0], int)
    return row[0]


def scheduled_instants(conn: Conn, trigger_id: uuid.UUID) -> list[datetime]:
    rows = conn.execute(
        "SELECT scheduled_for FROM charter.runs WHERE trigger_id = %s ORDER BY scheduled_for",
        (trigger_id,),
    ).fetchall()
    found: list[datetime] = []
    for (moment,) in rows:
        assert isinstance(moment, datetime)
        found.append(moment)
    return found
