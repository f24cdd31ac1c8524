"""Typed calls of the worker's SECURITY DEFINER functions (migration 0007).

The worker has no write privilege on any table; every change it makes to a work row
goes through one of these, under the `charter_worker` role.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter.core.jsontypes import JsonObject
from charter.db.database import Sync, answered
from charter.db.payloads import dumps_payload
from charter.db.queries import query
from charter.engine.work import QueueRow, ScheduledRow, WorkRow

Conn = psycopg.Connection[tuple[Any, ...]]


class Bookkeeping:
    """One worker's view of the work tables; `now=None` lets the database clock decide."""

    def __init__(
        self,
        conn: Conn,
        worker: str,
        *,
        now: datetime | None = None,
        buffered: bool = False,
        sync: Sync | None = None,
    ) -> None:
        self.conn = conn
        self.sync = sync  # the outermost pipeline's, when in one (see db.database.answered)
        self.worker = worker
        self.now = now
        # Buffered, the recording calls wait until `send()`: one record_results_v1 call
        # carries a whole batch's bookkeeping. Unbuffered, each is sent as it is made.
        self.buffered = buffered
        self._calls: list[dict[str, Any]] = []

    def _rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            with answered(self.conn, self.sync):
                cur.execute(query(name), {"now": self.now, **params})
            return cur.fetchall()

    def _call(self, name: str, params: dict[str, Any]) -> None:
        # No fetch: in pipeline mode the call travels with what follows, and a refusal
        # (lease_lost) is raised at the next sync, the commit at the latest.
        if self.buffered:
            self._calls.append({"fn": name, "now": self.now, **params})
            return
        adapted = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in params.items()}
        self.conn.execute(query(name), {"now": self.now, **adapted})

    def send(self) -> None:
        """Queue the waiting recording calls as one statement (nothing is waited for)."""
        if self._calls:
            calls, self._calls = self._calls, []
            text = dumps_payload(calls)
            self.conn.execute(query("record_results"), {"calls": text})

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

    def lock_due(self, *, limit: int) -> list[WorkRow]:
        """Lock ready queue rows, then due scheduled actions, up to `limit` in all, and
        their processes, until the transaction ends (the batched firing path: the lock is
        the claim; the rows stay pending/active, recorded with no lease token)."""
        return [
            QueueRow.from_dict(r) if r["lane"] == "queue" else ScheduledRow.from_dict(r)
            for r in self._rows("lock_due", {"limit": limit})
        ]

    def process_heads(self, process_ids: Iterable[str]) -> dict[str, str | None]:
        with answered(self.conn, self.sync):
            cursor = self.conn.execute(query("process_heads"), {"ids": list(process_ids)})
        found = cursor.fetchall()
        return {str(pid): (str(head) if head is not None else None) for pid, head in found}

    def limit_batch(self, *, lock_timeout_ms: int, idle_timeout_ms: int) -> None:
        """Bound this transaction: lock waits, and a pause of its worker (see batch.py)."""
        self.conn.execute(
            query("batch_limits"),
            {"lock_timeout": f"{lock_timeout_ms}ms", "idle_timeout": f"{idle_timeout_ms}ms"},
        )

    def complete(self, row: WorkRow, event_hash: str, next_run_at: datetime | None) -> None:
        if isinstance(row, ScheduledRow):
            self._call(
                "complete_scheduled_action",
                {"id": row.id, "token": row.lease_token, "event_hash": event_hash,
                 "next_run_at": next_run_at},
            )  # fmt: skip
        else:
            self._call(
                "complete_automation_work",
                {"id": row.id, "token": row.lease_token, "event_hash": event_hash},
            )

    def skip(self, row: WorkRow, reason: str, next_run_at: datetime | None) -> None:
        if isinstance(row, ScheduledRow):
            self._call(
                "skip_scheduled_action",
                {"id": row.id, "token": row.lease_token, "reason": reason,
                 "next_run_at": next_run_at},
            )  # fmt: skip
        else:
            self._call(
                "skip_automation_work", {"id": row.id, "token": row.lease_token, "reason": reason}
            )

    def fail(self, row: WorkRow, reason: str) -> None:
        name = "fail_scheduled_action" if isinstance(row, ScheduledRow) else "fail_automation_work"
        self._call(name, {"id": row.id, "token": row.lease_token, "reason": reason})

    def retry(self, row: WorkRow, retry_at: datetime, error: str) -> None:
        name = (
            "reschedule_scheduled_action"
            if isinstance(row, ScheduledRow)
            else "retry_automation_work"
        )
        self._call(
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
        self._call(
            "log_worker_attempt",
            {
                "kind": kind,
                "level": level,
                "code": code,
                "process_id": process_id,
                "action": action,
                "event_hash": event_hash,
                "message": message,
                "detail": detail or {},
            },
        )

    def next_wakeup(self) -> datetime | None:
        row = self.conn.execute(query("next_wakeup")).fetchone()
        return row[0] if row else None

    def process_head(self, process_id: str) -> str | None:
        row = self.conn.execute(query("process_head"), {"id": process_id}).fetchone()
        return row[0] if row else None
