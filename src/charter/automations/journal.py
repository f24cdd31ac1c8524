"""The step journal of a run whose lease the caller's transaction holds
(`leases.hold_lease` locked the run): a step journalled running, its output, a run
finished.

The journal key `(run_id, step_id)` makes a second row impossible and a trigger
refuses any change to a completed step; every step of a run has one stable
idempotency key (docs/machines.md, rule 6).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter.automations.ledger import RunRecord, StepRecord, run_steps
from charter.core.errors.automations import (
    StepCompleted,
    StepNotStarted,
    StepOutOfOrder,
    UnknownStep,
)
from charter.core.ijson import check_value
from charter.core.jsontypes import JsonValue
from charter.db.errors import translated
from charter.db.queries import query

Conn = psycopg.Connection[tuple[Any, ...]]

# Steps a transaction journalled as ended, with how (`completed`, `failed`: the run
# failed, `released`: it goes back to the queue): the step metrics count them once the
# transaction commits (charter.automations.metrics.observe_steps).
EndedSteps = list[tuple[str, StepRecord]]


def idempotency_key(run_id: uuid.UUID | str, step_id: str) -> str:
    """The one stable key of a run-step pair (docs/machines.md, rule 6): SHA-256 of both, hex."""
    return hashlib.sha256(f"charter.run-step\x00{run_id}\x00{step_id}".encode()).hexdigest()


def plan_step_ids(run: RunRecord) -> list[str]:
    """The step ids of a run's plan snapshot, in order (what the journal may hold)."""
    steps = run.plan.get("steps")
    if not isinstance(steps, list):
        return []
    ids = [s.get("id") for s in steps if isinstance(s, dict)]
    return [step_id for step_id in ids if isinstance(step_id, str)]


def start_held(conn: Conn, run: RunRecord, step_id: str, now: datetime | None) -> StepRecord:
    """`leases.start_step` on a run whose lease this transaction holds already."""
    order = plan_step_ids(run)
    if step_id not in order:
        raise UnknownStep(f"run {run.id} has no step {step_id!r}", step_id=step_id)
    position = order.index(step_id)
    journal = {s.step_id: s for s in run_steps(conn, run.id)}
    for earlier in order[:position]:
        entry = journal.get(earlier)
        if entry is None or entry.status != "completed":
            raise StepOutOfOrder(
                f"step {earlier!r} comes before {step_id!r} and is not completed",
                step_id=step_id,
                pending=earlier,
            )
    return journal_running(conn, run, step_id, position, now)


def journal_running(
    conn: Conn, run: RunRecord, step_id: str, position: int, now: datetime | None
) -> StepRecord:
    """Journal a step running (one more attempt); StepCompleted if it is completed."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("start_step"),
            {
                "run_id": run.id,
                "step_id": step_id,
                "position": position,
                "idempotency_key": idempotency_key(run.id, step_id),
                "now": now,
            },
        ).fetchone()
    if row is None:
        raise StepCompleted(f"step {step_id!r} of run {run.id} is completed", step_id=step_id)
    return StepRecord.from_dict(row)


def complete_held(
    conn: Conn,
    run: RunRecord,
    step_id: str,
    output: JsonValue,
    now: datetime | None,
    ended: EndedSteps | None = None,
) -> StepRecord:
    """`leases.complete_step` on a run whose lease this transaction holds already."""
    check_value(output)
    params = {"run_id": run.id, "step_id": step_id, "output": Jsonb(output), "now": now}
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query("complete_step"), params).fetchone()
        if row is not None and ended is not None:
            ended.append(("completed", StepRecord.from_dict(row)))  # not a repeat
        if row is None:
            row = cur.execute(query("run_step"), params).fetchone()
            if row is None or row["status"] != "completed":
                raise StepNotStarted(
                    f"step {step_id!r} of run {run.id} is not running", step_id=step_id
                )
            if row["output"] != output:
                raise StepCompleted(
                    f"step {step_id!r} of run {run.id} is completed with another output",
                    step_id=step_id,
                )
    return StepRecord.from_dict(row)


def fail_running_steps(
    conn: Conn,
    run_id: uuid.UUID,
    message: str,
    now: datetime | None,
    outcome: str,
    ended: EndedSteps | None,
) -> None:
    """Journal the run's running step (if any) failed with `message`."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            query("fail_running_steps"), {"run_id": run_id, "error": message, "now": now}
        ).fetchall()
    if ended is not None:
        ended.extend((outcome, StepRecord.from_dict(row)) for row in rows)


def finish_run(
    conn: Conn,
    run_id: uuid.UUID,
    status: str,
    *,
    output: JsonValue,
    error: str | None,
    now: datetime | None,
) -> RunRecord:
    """End the run `completed` or `failed` with its output or error."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("finish_run"),
            {
                "run_id": run_id,
                "status": status,
                "output": Jsonb(output) if output is not None else None,
                "error": error,
                "now": now,
            },
        ).fetchone()
    assert row is not None
    return RunRecord.from_dict(row)
