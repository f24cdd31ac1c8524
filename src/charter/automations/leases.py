"""Leases: every transition a machine makes on a run commits under the run's current
lease.

Each function runs inside the caller's transaction on an engine-role connection, and
every decision is taken by a statement the database serializes (docs/architecture.md):
a claim is `FOR UPDATE SKIP LOCKED`, and every step transition first locks the run
under the caller's current, unexpired lease (`hold_lease`), then writes the step
journal (`journal`).

The rules of docs/machines.md this keeps: 4 — a run advances through its plan in order
and every step transition commits under the current lease; 5 — a step may start only
under a lease the service confirms; 7 — a transient failure releases the run to a
bounded future retry time and keeps the journal.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from charter import wire
from charter.automations.dpop import MachineIdentity
from charter.automations.journal import (
    EndedSteps,
    complete_held,
    fail_running_steps,
    finish_run,
    journal_running,
    plan_step_ids,
    start_held,
)
from charter.automations.ledger import RunRecord, StepRecord, run_steps
from charter.core.errors import LeaseLost, Malformed, NotFound
from charter.core.errors.automations import RunIncomplete
from charter.core.ijson import check_value
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.errors import translated
from charter.db.queries import query
from charter.wire import automations as wire_automations

Conn = psycopg.Connection[tuple[Any, ...]]

DEFAULT_LEASE_SECONDS = 30.0
MIN_LEASE_SECONDS = 1.0
MAX_LEASE_SECONDS = 600.0
DEFAULT_RETRY_DELAY_SECONDS = 5.0
MAX_RETRY_DELAY_SECONDS = 3600.0  # a released run is claimable again within an hour
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Lease:
    run_id: uuid.UUID
    token: uuid.UUID
    expires_at: datetime

    def to_json(self) -> JsonObject:
        return wire.to_json(self, wire_automations.Lease)


@dataclass(frozen=True)
class Claim:
    """A claimed run: its immutable plan snapshot, the lease and the journal so far."""

    run: RunRecord
    lease: Lease
    journal: list[StepRecord]
    started: StepRecord | None = None  # the first incomplete step, when asked to start it

    @property
    def traceparent(self) -> str | None:
        """The trace the run's steps continue (None: they start their own)."""
        return self.run.traceparent

    def to_json(self) -> JsonObject:
        return wire.to_json(self, wire_automations.Claim)


def claim_run(
    conn: Conn,
    machine: MachineIdentity,
    *,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    now: datetime | None = None,
    start: bool = False,
) -> Claim | None:
    """Claim a run for the machine's target and principal, or None when there is none.

    A running run whose lease expired is taken over first (it resumes at its first
    incomplete step); otherwise the oldest pending run whose retry time has come. With
    `start`, that first incomplete step is journalled running in the same transaction
    (as `start_step` would, one request fewer) and answered as `started`.
    """
    params = {
        "machine_id": machine.id,
        "target": machine.target,
        "principal": machine.principal,
        "lease_seconds": _lease_seconds(lease_seconds),
        "now": now,
    }
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query("claim_expired_run"), params).fetchone()
        if row is None:
            row = cur.execute(query("claim_pending_run"), params).fetchone()
    if row is None:
        return None
    run = RunRecord.from_dict(row)
    assert run.lease_token is not None
    assert run.lease_expires_at is not None
    lease = Lease(run.id, run.lease_token, run.lease_expires_at)
    journal = run_steps(conn, run.id)
    if not start:
        return Claim(run, lease, journal)
    order = plan_step_ids(run)
    done = {step.step_id for step in journal if step.status == "completed"}
    first = next((step_id for step_id in order if step_id not in done), None)
    if first is None:  # every step completed: only the run's completion is left
        return Claim(run, lease, journal)
    # Every step before `first` is completed: nothing for `start_held` to check.
    started = journal_running(conn, run, first, order.index(first), now)
    journal = [step for step in journal if step.step_id != first] + [started]
    journal.sort(key=lambda step: step.position)
    return Claim(run, lease, journal, started)


def renew_lease(
    conn: Conn,
    run_id: uuid.UUID | str,
    machine: MachineIdentity,
    token: str,
    *,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    now: datetime | None = None,
) -> Lease:
    """Extend the machine's current lease; LeaseLost if it expired or was taken over."""
    run = _uuid(run_id)
    with translated():
        row = conn.execute(
            query("renew_lease"),
            {
                "run_id": run,
                "machine_id": machine.id,
                "token": _token(token),
                "lease_seconds": _lease_seconds(lease_seconds),
                "now": now,
            },
        ).fetchone()
    if row is None:
        raise LeaseLost(f"the lease on run {run} is not current", run_id=str(run))
    return Lease(run, row[0], row[1])


def hold_lease(
    conn: Conn,
    run_id: uuid.UUID | str,
    machine: MachineIdentity,
    token: str,
    *,
    now: datetime | None = None,
) -> RunRecord:
    """Lock the run if `token` is its current, unexpired lease held by `machine`."""
    run = _uuid(run_id)
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("hold_lease"),
            {"run_id": run, "machine_id": machine.id, "token": _token(token), "now": now},
        ).fetchone()
    if row is None:
        raise LeaseLost(f"the lease on run {run} is not current", run_id=str(run))
    return RunRecord.from_dict(row)


def start_step(
    conn: Conn,
    run_id: uuid.UUID | str,
    step_id: str,
    machine: MachineIdentity,
    token: str,
    *,
    now: datetime | None = None,
) -> StepRecord:
    """Journal `step_id` as running under the current lease, before its action runs.

    Refused when the lease is not current (LeaseLost), the step is not in the plan
    (UnknownStep), an earlier step is not completed (StepOutOfOrder) or the step is
    completed already (StepCompleted: a completed step is never invoked again).
    """
    return start_held(conn, hold_lease(conn, run_id, machine, token, now=now), step_id, now)


def complete_step(
    conn: Conn,
    run_id: uuid.UUID | str,
    step_id: str,
    machine: MachineIdentity,
    token: str,
    output: JsonValue,
    *,
    now: datetime | None = None,
    ended: EndedSteps | None = None,
) -> StepRecord:
    """Journal a running step's output under the current lease.

    Repeating the call with the same output after an uncertain acknowledgement answers
    the journal row again; a different output for a completed step is StepCompleted.
    """
    return complete_held(
        conn, hold_lease(conn, run_id, machine, token, now=now), step_id, output, now, ended
    )


def complete_and_start(
    conn: Conn,
    run_id: uuid.UUID | str,
    step_id: str,
    next_step: str,
    machine: MachineIdentity,
    token: str,
    output: JsonValue,
    *,
    lease_seconds: float | None = None,
    now: datetime | None = None,
    ended: EndedSteps | None = None,
) -> tuple[StepRecord, StepRecord, Lease | None]:
    """Journal `step_id`'s output, then `next_step` running, in one transaction: one
    round trip per step instead of two, with the order of the journal unchanged (the
    output is recorded before the run advances; the next step is journalled running
    before its action is invoked). Any refusal undoes both. With `lease_seconds` the
    lease is renewed too (a run of many short steps outlives one lease)."""
    run = hold_lease(conn, run_id, machine, token, now=now)
    done = complete_held(conn, run, step_id, output, now, ended)
    started = start_held(conn, run, next_step, now)
    if lease_seconds is None:
        return done, started, None
    lease = renew_lease(conn, run.id, machine, token, lease_seconds=lease_seconds, now=now)
    return done, started, lease


def complete_run(
    conn: Conn,
    run_id: uuid.UUID | str,
    machine: MachineIdentity,
    token: str,
    output: JsonValue,
    *,
    step: str | None = None,
    now: datetime | None = None,
    ended: EndedSteps | None = None,
) -> RunRecord:
    """Complete a run whose every plan step is completed, under the current lease;
    with `step`, that running step's output (the same `output`) is journalled first, in
    the same transaction (the last step's report and the run's completion, one commit)."""
    run = hold_lease(conn, run_id, machine, token, now=now)
    if step is not None:
        complete_held(conn, run, step, output, now, ended)
    check_value(output)
    done = {s.step_id for s in run_steps(conn, run.id) if s.status == "completed"}
    missing = [step for step in plan_step_ids(run) if step not in done]
    if missing or not plan_step_ids(run):
        raise RunIncomplete(f"run {run.id} has steps not completed: {missing}", missing=missing)
    return finish_run(conn, run.id, "completed", output=output, error=None, now=now)


def fail_run(
    conn: Conn,
    run_id: uuid.UUID | str,
    machine: MachineIdentity,
    token: str,
    error: str,
    *,
    now: datetime | None = None,
    ended: EndedSteps | None = None,
) -> RunRecord:
    """Fail a run for good (a deterministic error), under the current lease; a step
    left running is journalled failed with the same error."""
    run = hold_lease(conn, run_id, machine, token, now=now)
    message = _error(error)
    fail_running_steps(conn, run.id, message, now, "failed", ended)
    return finish_run(conn, run.id, "failed", output=None, error=message, now=now)


def release_run(
    conn: Conn,
    run_id: uuid.UUID | str,
    machine: MachineIdentity,
    token: str,
    error: str,
    *,
    retry_at: datetime | None = None,
    now: datetime | None = None,
    ended: EndedSteps | None = None,
) -> RunRecord:
    """Return a run to the queue after a transient failure (docs/machines.md, rule 7).

    `retry_at` is bounded to [now, now + MAX_RETRY_DELAY_SECONDS] (absent: now +
    DEFAULT_RETRY_DELAY_SECONDS). Completed step outputs stay; a step left running is
    journalled failed and starts again, with the same idempotency key, on the next claim.
    """
    run = hold_lease(conn, run_id, machine, token, now=now)
    message = _error(error)
    fail_running_steps(conn, run.id, message, now, "released", ended)
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("release_run"),
            {
                "run_id": run.id,
                "error": message,
                "retry_at": retry_at,
                "default_delay": DEFAULT_RETRY_DELAY_SECONDS,
                "max_delay": MAX_RETRY_DELAY_SECONDS,
                "now": now,
            },
        ).fetchone()
    assert row is not None
    return RunRecord.from_dict(row)


def _lease_seconds(value: float) -> float:
    if isinstance(value, bool) or not MIN_LEASE_SECONDS <= value <= MAX_LEASE_SECONDS:
        raise Malformed(
            f"lease_seconds must be between {MIN_LEASE_SECONDS:g} and {MAX_LEASE_SECONDS:g}"
        )
    return float(value)


def _token(token: str) -> uuid.UUID:
    try:
        return uuid.UUID(token)
    except (ValueError, TypeError, AttributeError):
        raise Malformed("token must be the lease token the claim returned", field="token") from None


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"no run {value!r}") from None


def _error(error: str) -> str:
    text = " ".join(str(error).split()) or "failed"
    return text[:MAX_ERROR_CHARS]
