"""The operator's reads across processes: the process list, the work views, the counts.

One function per named query (operator.sql), keyword-only filters, JSON-ready rows out.
The caller owns the connection and its transaction (and so the role it reads as).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from psycopg.rows import dict_row

from charter import wire
from charter.core.errors.lists import InvalidCursor
from charter.core.jsontypes import JsonObject
from charter.db.database import Conn
from charter.db.errors import translated
from charter.db.queries import query
from charter.engine.records import ProcessView
from charter.operator.paging import Position, decode_cursor, encode_cursor, workflow_filter
from charter.wire.engine import WorkItem

SCHEDULED_STATUSES = ("active", "claimed", "cancelled", "exhausted", "skipped", "failed")
QUEUE_STATUSES = ("pending", "claimed", "completed", "skipped", "failed", "cancelled")
TIMER_HORIZON = timedelta(hours=1)
# DPoP proofs (with the machine that sent them) are kept a few minutes for replay checks.
MACHINE_HORIZON = timedelta(minutes=5)


@dataclass(frozen=True)
class Page:
    items: list[JsonObject]
    next_cursor: str | None


@dataclass(frozen=True)
class ProcessFilter:
    workflow: str | None = None
    state: str | None = None
    parent: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    id_like: str | None = None


@dataclass(frozen=True)
class WorkFilter:
    status: str | None = None
    due_before: datetime | None = None
    workflow: str | None = None
    process: str | None = None


# prepare=False below: an unnamed statement is planned with its parameters' values, so
# the planner drops the filters that are NULL and picks the index that fits (`q` → the id
# prefix index). A prepared statement would soon get one generic plan for every filter
# combination, which can use none of them (bench/operator_api.py: 100 ms, not 2 ms).


def list_processes(conn: Conn, where: ProcessFilter, *, cursor: str | None, limit: int) -> Page:
    """A page of processes newest first; each row is `<process>` plus `children`."""
    start = decode_cursor(cursor)
    exact, prefix = workflow_filter(where.workflow)
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        name = "list_processes" if where.id_like is None else "list_processes_by_id_prefix"
        rows = cur.execute(
            query(name),
            {
                "workflow": exact,
                "workflow_prefix": prefix,
                "state": where.state,
                "parent": where.parent,
                "updated_after": where.updated_after,
                "updated_before": where.updated_before,
                "id_like": where.id_like,
                "before_at": start.at if start else None,
                "before_id": start.id if start else None,
                "limit": limit + 1,
            },
            prepare=False,
        ).fetchall()
    shown = rows[:limit]
    following = None
    if len(rows) > limit:
        following = encode_cursor(shown[-1]["updated_at"], shown[-1]["id"])
    return Page([_process(row) for row in shown], following)


def _process(row: dict[str, Any]) -> JsonObject:
    view = ProcessView(
        id=row["id"],
        workflow=row["workflow_path"],
        state=row["state"],
        data=row["data"],
        head=row["head_hash"],
        seq=int(row["seq"]),
        parent=row["parent_id"],
        parent_event=row["parent_event_hash"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        revision=row["revision"],
    )
    return {**view.to_json(), "children": list(row["children"])}


def list_scheduled(conn: Conn, where: WorkFilter, *, cursor: str | None, limit: int) -> Page:
    """Scheduled actions across processes, soonest `run_at` first."""
    rows = _work_rows(conn, "list_scheduled_work", where, cursor, limit)
    items = [
        _work_row(
            row,
            kind="scheduled_action",
            due=row["run_at"],
            last_error=row["last_attempt_error"],
            extra={
                "schedule_id": row["schedule_id"],
                "every": row["interval"],
                "retry_at": row["not_before"],
            },
        )
        for row in rows[:limit]
    ]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(items, encode_cursor(last["run_at"], str(last["id"])) if last else None)


def list_queue(conn: Conn, where: WorkFilter, *, cursor: str | None, limit: int) -> Page:
    """Automatic-action queue rows across processes, oldest first."""
    rows = _work_rows(conn, "list_queued_work", where, cursor, limit)
    items = [
        _work_row(
            row,
            kind="auto_action",
            due=row["not_before"] or row["queued_at"],
            last_error=row["last_error"],
            extra={"queued_at": row["queued_at"]},
        )
        for row in rows[:limit]
    ]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(items, encode_cursor(last["queued_at"], str(last["id"])) if last else None)


def _work_rows(
    conn: Conn, name: str, where: WorkFilter, cursor: str | None, limit: int
) -> list[dict[str, Any]]:
    start = decode_cursor(cursor)
    exact, prefix = workflow_filter(where.workflow)
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            query(name),
            {
                "status": where.status,
                "due_before": where.due_before,
                "workflow": exact,
                "workflow_prefix": prefix,
                "process": where.process,
                "after_at": start.at if start else None,
                "after_id": _work_id(start),
                "limit": limit + 1,
            },
            prepare=False,
        ).fetchall()


def _work_id(start: Position | None) -> uuid.UUID | None:
    if start is None:
        return None
    try:
        return uuid.UUID(start.id)
    except ValueError:
        raise InvalidCursor() from None


def _work_row(
    row: dict[str, Any], *, kind: str, due: datetime, last_error: str | None, extra: dict[str, Any]
) -> JsonObject:
    """The row as the wire's WorkItem; `extra`: the keys of its kind of row."""
    item = {
        "id": row["id"],
        "kind": kind,
        "what": row["action_name"],
        "process": row["process_id"],
        "workflow": row["workflow_path"],
        "due": due,
        "status": row["status"],
        "attempts": int(row["attempts"]),
        "last_error": last_error,
        "last_attempt_at": row["last_attempt_at"],
        "last_result": row["last_attempt_result"],
        **extra,
    }
    return wire.to_json(item, WorkItem)


def process_stats(conn: Conn, *, now: datetime | None) -> dict[str, Any]:
    """The process and work counts (readable by the reader role), by the wire Stats's
    field names; the runs and machines counts are read apart."""
    with translated():
        counts = conn.execute(query("process_counts")).fetchall()
        due = conn.execute(
            query("timers_due_within"), {"now": now, "within": TIMER_HORIZON}
        ).fetchone()
        queue = conn.execute(query("queue_counts")).fetchall()
        failed = conn.execute(query("failed_work")).fetchone()
        as_of = conn.execute(query("database_now"), {"now": now}).fetchone()
    assert due is not None
    assert failed is not None
    assert as_of is not None
    return {
        "process_counts": [
            {"workflow": str(w), "state": str(s), "count": int(cast(int, n))} for w, s, n in counts
        ],
        "timers_due_next_hour": int(cast(int, due[0])),
        "queue": {str(status): int(cast(int, n)) for status, n in queue},
        "failed_work": int(cast(int, failed[0])),
        "as_of": cast(datetime, as_of[0]),
    }


def run_stats(conn: Conn, *, principal: str, everyone: bool) -> dict[str, int]:
    with translated():
        rows = conn.execute(
            query("run_counts"), {"principal": principal, "everyone": everyone}
        ).fetchall()
    return {str(status): int(cast(int, n)) for status, n in rows}


def machines_seen(conn: Conn, *, principal: str, everyone: bool, now: datetime | None) -> int:
    """Machines that authenticated (a DPoP proof) within the last few minutes."""
    with translated():
        row = conn.execute(
            query("machines_seen_since"),
            {"principal": principal, "everyone": everyone, "now": now, "within": MACHINE_HORIZON},
        ).fetchone()
    assert row is not None
    return int(cast(int, row[0]))


def live_state(conn: Conn) -> tuple[object, ...]:
    """The figures /metrics reports of the database: work due, claimed and pending, and
    the machines seen (one row, in the order of the `live_state` query)."""
    row = conn.execute(query("live_state")).fetchone()
    assert row is not None
    return tuple(row)
