"""The durable run ledger (docs/machines.md, rules 1 and 3): admission inserts runs with
an immutable plan snapshot; an unclaimed run waits there, never dropped.

Admission only inserts runs; it never delivers them. One run per trigger occurrence is
enforced by the unique `dedupe_key`, never by a read-then-write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter import wire
from charter.core import cursors
from charter.core.errors import Malformed, NotFound
from charter.core.errors.automations import RunFinished
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.rows import RowRecord
from charter.db.errors import translated
from charter.db.queries import query
from charter.wire.automations import RUN_STATUSES, Run, RunStep

Conn = psycopg.Connection[tuple[Any, ...]]
TriggerKind = Literal["schedule", "webhook", "manual"]


@dataclass(frozen=True)
class RunRecord(RowRecord):
    id: uuid.UUID
    automation_id: uuid.UUID
    trigger_id: uuid.UUID | None
    trigger_kind: str
    principal: str
    target: str
    status: str
    plan: JsonObject
    input: JsonValue
    dedupe_key: str | None
    scheduled_for: datetime | None
    lease_owner: str | None
    lease_token: uuid.UUID | None
    lease_expires_at: datetime | None
    retry_at: datetime | None
    attempts: int
    output: JsonValue
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    traceparent: str | None  # the W3C trace context of the span that admitted it

    def to_json(self) -> JsonObject:
        """The API shape; the lease token is a secret of the machine holding it."""
        return wire.to_json(self, Run)


@dataclass(frozen=True)
class StepRecord(RowRecord):
    run_id: uuid.UUID
    step_id: str
    position: int
    status: str
    idempotency_key: str
    output: JsonValue
    error: str | None
    attempts: int
    started_at: datetime
    finished_at: datetime | None

    def to_json(self) -> JsonObject:
        return wire.to_json(self, RunStep)


def admit_run(
    conn: Conn,
    *,
    automation_id: uuid.UUID | str,
    trigger_kind: TriggerKind,
    trigger_id: uuid.UUID | str | None = None,
    input: JsonValue = None,
    dedupe_key: str | None = None,
    scheduled_for: datetime | None = None,
    traceparent: str | None = None,
    now: datetime | None = None,
) -> RunRecord | None:
    """Insert a pending run snapshotting the plan; None if this occurrence was admitted
    already, or the automation is paused or has no plan. `traceparent` is the admitting
    span's context, which the run's steps continue."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("admit_run"),
            {
                "automation_id": automation_id,
                "trigger_id": trigger_id,
                "trigger_kind": trigger_kind,
                "input": Jsonb(input if input is not None else {}),
                "dedupe_key": dedupe_key,
                "scheduled_for": scheduled_for,
                "traceparent": traceparent,
                "now": now,
            },
        ).fetchone()
    return RunRecord.from_dict(row) if row else None


def get_run(
    conn: Conn, principal: str, run_id: uuid.UUID | str, *, everyone: bool = False
) -> RunRecord:
    """A run of `principal`'s (anyone's with `everyone`); NotFound for others' runs too
    (no existence leak)."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("get_run"),
            {"id": _uuid(run_id), "principal": principal, "everyone": everyone},
        ).fetchone()
    if row is None:
        raise NotFound(f"no run {run_id}")
    return RunRecord.from_dict(row)


def run_steps(conn: Conn, run_id: uuid.UUID | str) -> list[StepRecord]:
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("run_steps"), {"run_id": _uuid(run_id)}).fetchall()
    return [StepRecord.from_dict(r) for r in rows]


def list_runs(
    conn: Conn,
    principal: str,
    *,
    status: str | None = None,
    automation_id: uuid.UUID | str | None = None,
    cursor: str | None = None,
    limit: int = 50,
    everyone: bool = False,
) -> tuple[list[RunRecord], str | None]:
    """A page of `principal`'s runs (everyone's with `everyone`), newest first, and the
    cursor of the next page (None at the end)."""
    if status is not None and status not in RUN_STATUSES:
        raise Malformed(f"status must be one of {list(RUN_STATUSES)}")
    if not 1 <= limit <= 500:
        raise Malformed("limit must be between 1 and 500")
    before_created, before_id = decode_cursor(cursor) if cursor else (None, None)
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            query("list_runs"),
            {
                "principal": principal,
                "everyone": everyone,
                "status": status,
                "automation_id": _uuid(automation_id) if automation_id else None,
                "before_created": before_created,
                "before_id": before_id,
                "limit": limit + 1,
            },
        ).fetchall()
    records = [RunRecord.from_dict(r) for r in rows[:limit]]
    following = encode_cursor(records[-1].created_at, records[-1].id) if len(rows) > limit else None
    return records, following


def cancel_run(
    conn: Conn,
    principal: str,
    run_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    everyone: bool = False,
) -> RunRecord:
    """Fail a pending or running run of `principal`'s (anyone's with `everyone`) with
    `cancelled by an operator`."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("cancel_run"),
            {
                "id": _uuid(run_id),
                "principal": principal,
                "everyone": everyone,
                "error": "cancelled by an operator",
                "now": now,
            },
        ).fetchone()
    if row is not None:
        return RunRecord.from_dict(row)
    found = get_run(conn, principal, run_id, everyone=everyone)  # NotFound: none, or another's
    raise RunFinished(f"run {found.id} is {found.status}: it can no longer be cancelled")


def encode_cursor(created_at: datetime, row_id: uuid.UUID) -> str:
    """An opaque keyset cursor: where the next page starts."""
    return cursors.encode_cursor(created_at, str(row_id))


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        created, row_id = cursors.decode_cursor(cursor)
        return created, uuid.UUID(row_id)
    except ValueError:
        raise Malformed("cursor is not one this API returned") from None


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"no such id {value!r}") from None
