"""Typed calls of the worker's SECURITY DEFINER functions (migration 0007).

The worker has no write privilege on any table; every change it makes to a work row
goes through one of these, under the `charter_worker` role.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter.core.jsontypes import JsonObject
from charter.db.queries import query
from charter.engine.work import QueueRow, ScheduledRow, WorkRow

Conn = psycopg.Connection[tuple[Any, ...]]


class Bookkeeping:
    """One worker's view of the work tables; `now=None` lets the database clock decide."""

    def __init__(self, conn: Conn, worker: str, *, now: datetime | None = None) -> None:
        self.conn = conn
        self.worker = worker
        self.now = now

    def _rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query(name), {"now": self.now, **params}).fetchall()

    def claim_scheduled(self, *, lease_seconds: int, limit: int) -> list[ScheduledRow]:
        rows = self._rows(
            "claim_scheduled_actions",
            {"worker": self.worker, "lease_seconds": lease_seconds, "limit": limit},
        )
        return [ScheduledRow.from_dict(r) for r in rows]

    def claim_scheduled_one(
        self, work_id: uuid.UUID | str, *, lease_seconds: int
    ) -> ScheduledRow | None:
        rows = self._rows(
            "claim_scheduled_action",
            {"id": work_id, "worker": self.worker, "lease_seconds": lease_seconds},
        )
        return ScheduledRow.from_dict(rows[0]) if rows else None

    def claim_queue(self, *, lease_seconds: int, limit: int) -> list[QueueRow]:
        rows = self._rows(
            "claim_automation_work_batch",
            {"worker": self.worker, "lease_seconds": lease_seconds, "limit": limit},
        )
        return [QueueRow.from_dict(r) for r in rows]

    def claim_queue_one(self, work_id: uuid.UUID | str, *, lease_seconds: int) -> QueueRow | None:
        rows = self._rows(
            "claim_automation_work",
            {"id": work_id, "worker": self.worker, "lease_seconds": lease_seconds},
        )
        return QueueRow.from_dict(rows[0]) if rows else None

    def complete(self, row: WorkRow, event_hash: str, next_run_at: datetime | None) -> None:
        if isinstance(row, ScheduledRow):
            self._rows(
                "complete_scheduled_action",
                {"id": row.id, "token": row.lease_token, "event_hash": event_hash,
                 "next_run_at": next_run_at},
            )  # fmt: skip
        else:
            self._rows(
                "complete_automation_work",
                {"id": row.id, "token": row.lease_token, "event_hash": event_hash},
            )

    def skip(self, row: WorkRow, reason: str, next_run_at: datetime | None) -> None:
        if isinstance(row, ScheduledRow):
            self._rows(
                "skip_scheduled_action",
                {"id": row.id, "token": row.lease_token, "reason": reason,
                 "next_run_at": next_run_at},
            )  # fmt: skip
        else:
            self._rows(
                "skip_automation_work", {"id": row.id, "token": row.lease_token, "reason": reason}
            )

    def fail(self, row: WorkRow, reason: str) -> None:
        name = "fail_scheduled_action" if isinstance(row, ScheduledRow) else "fail_automation_work"
        self._rows(name, {"id": row.id, "token": row.lease_token, "reason": reason})

    def retry(self, row: WorkRow, retry_at: datetime, error: str) -> None:
        name = (
            "reschedule_scheduled_action"
            if isinstance(row, ScheduledRow)
            else "retry_automation_work"
        )
        self._rows(
            name, {"id": row.id, "token": row.lease_token, "retry_at": retry_at, "error": error}
        )

    def release(self, row: WorkRow) -> bool:
        name = (
            "release_scheduled_action"
            if isinstance(row, ScheduledRow)
            else "release_automation_work"
        )
        result = self.conn.execute(query(name), {"id": row.id, "token": row.lease_token}).fetchone()
        return bool(result and result[0])

    def reclaim_expired(self) -> tuple[int, int]:
        row = self.conn.execute(query("reclaim_expired_leases"), {"now": self.now}).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def log(
        self,
        kind: str,
        *,
        level: str = "info",
        code: str | None = None,
        process_id: str | None = None,
        action: str | None = None,
        event_hash: str | None = None,
        message: str = "",
        detail: JsonObject | None = None,
    ) -> None:
        self.conn.execute(
            query("log_worker_attempt"),
            {
                "kind": kind,
                "level": level,
                "code": code,
                "process_id": process_id,
                "action": action,
                "event_hash": event_hash,
                "message": message,
                "detail": Jsonb(detail or {}),
                "now": self.now,
            },
        )

    def next_wakeup(self) -> datetime | None:
        row = self.conn.execute(query("next_wakeup")).fetchone()
        return row[0] if row else None

    def process_head(self, process_id: str) -> str | None:
        row = self.conn.execute(query("process_head"), {"id": process_id}).fetchone()
        return row[0] if row else None
