"""The machine side of the run ledger: machines, leases and the step journal.

Each function runs inside the caller's transaction on an engine-role connection, and
every decision is taken by a statement the database serializes (docs/architecture.md): a claim is
`FOR UPDATE SKIP LOCKED`, every step transition first locks the run under the caller's
current, unexpired lease (`hold_lease`), the journal key `(run_id, step_id)` makes a
second row impossible and a trigger refuses any change to a completed step.

The rules of docs/machines.md this keeps: 4 — a run advances through its plan in order
and every step transition commits under the current lease; 5 — a step may start only
under a lease the service confirms; 6 — one stable idempotency key per run-step pair;
7 — a transient failure releases the run to a bounded future retry time and keeps the
journal.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter.automations.dpop import MachineIdentity, thumbprint
from charter.automations.ledger import RunRecord, StepRecord, run_steps
from charter.core.errors import CharterError, InvalidPublicKey, LeaseLost, Malformed, NotFound
from charter.core.ijson import check_value
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.rows import RowRecord
from charter.core.timefmt import format_rfc3339
from charter.db.errors import translated
from charter.db.queries import query

Conn = psycopg.Connection[tuple[Any, ...]]

DEFAULT_LEASE_SECONDS = 30.0
MIN_LEASE_SECONDS = 1.0
MAX_LEASE_SECONDS = 600.0
DEFAULT_RETRY_DELAY_SECONDS = 5.0
MAX_RETRY_DELAY_SECONDS = 3600.0  # a released run is claimable again within an hour
MAX_ERROR_CHARS = 4000


class UnknownStep(CharterError):
    """The run's plan has no such step."""

    code = "unknown_step"
    http_status = 404


class StepOutOfOrder(CharterError):
    """An earlier step of the plan is not completed: a run advances in order."""

    code = "step_out_of_order"
    http_status = 409


class StepCompleted(CharterError):
    """The step is completed: it is never invoked again."""

    code = "step_completed"
    http_status = 409


class StepNotStarted(CharterError):
    """The step is not running: journal it as started first."""

    code = "step_not_started"
    http_status = 409


class RunIncomplete(CharterError):
    """Not every step of the plan is completed."""

    code = "run_incomplete"
    http_status = 409


@dataclass(frozen=True)
class MachineRecord(RowRecord):
    id: str
    target: str
    principal: str
    thumbprint: str
    public_jwk: JsonObject
    created_at: datetime
    disabled_at: datetime | None

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "target": self.target,
            "principal": self.principal,
            "thumbprint": self.thumbprint,
            "public_jwk": self.public_jwk,
            "created_at": format_rfc3339(self.created_at),
            "disabled_at": format_rfc3339(self.disabled_at) if self.disabled_at else None,
        }


@dataclass(frozen=True)
class MachineStatus:
    """A machine as the operator sees it: the record, when it last proved itself (while
    that proof is remembered) and how many runs it holds a lease on now."""

    machine: MachineRecord
    last_seen_at: datetime | None
    runs_in_progress: int

    def to_json(self) -> JsonObject:
        return {
            **self.machine.to_json(),
            "last_seen_at": format_rfc3339(self.last_seen_at) if self.last_seen_at else None,
            "runs_in_progress": self.runs_in_progress,
        }


@dataclass(frozen=True)
class Lease:
    run_id: uuid.UUID
    token: uuid.UUID
    expires_at: datetime

    def to_json(self) -> JsonObject:
        return {"token": str(self.token), "expires_at": format_rfc3339(self.expires_at)}


@dataclass(frozen=True)
class Claim:
    """A claimed run: its immutable plan snapshot, the lease and the journal so far."""

    run: RunRecord
    lease: Lease
    journal: list[StepRecord]
    started: StepRecord | None = None  # the first incomplete step, when asked to start it

    def to_json(self) -> JsonObject:
        return {
            "run": self.run.to_json(),
            "lease": self.lease.to_json(),
            "journal": [step.to_json() for step in self.journal],
            "started": self.started.to_json() if self.started is not None else None,
            # The trace the run's steps continue (null: they start their own).
            "traceparent": self.run.traceparent,
        }


# Steps a transaction journalled as ended, with how (`completed`, `failed`: the run
# failed, `released`: it goes back to the queue): the step metrics count them once the
# transaction commits (charter.automations.metrics.observe_steps).
EndedSteps = list[tuple[str, StepRecord]]


def idempotency_key(run_id: uuid.UUID | str, step_id: str) -> str:
    """The one stable key of a run-step pair (docs/machines.md, rule 6): SHA-256 of both, hex."""
    return hashlib.sha256(f"charter.run-step\x00{run_id}\x00{step_id}".encode()).hexdigest()


# --- machines --------------------------------------------------------------------------


def register_machine(
    conn: Conn,
    *,
    machine_id: str,
    target: str,
    principal: str,
    public_jwk: JsonValue,
    now: datetime | None = None,
) -> MachineRecord:
    """Register a machine's DPoP key (Duplicate if the id or the key is taken)."""
    try:
        print_ = thumbprint(public_jwk)
    except InvalidPublicKey as exc:
        raise Malformed(exc.message, field="public_jwk") from None
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("register_machine"),
            {
                "id": machine_id,
                "target": target,
                "principal": principal,
                "thumbprint": print_,
                "public_jwk": Jsonb(public_jwk),
                "now": now,
            },
        ).fetchone()
    assert row is not None
    return MachineRecord.from_dict(row)


def list_machines(conn: Conn, principal: str, *, everyone: bool = False) -> list[MachineStatus]:
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            query("list_machines"), {"principal": principal, "all": everyone}
        ).fetchall()
    return [
        MachineStatus(MachineRecord.from_dict(r), r["last_seen_at"], int(r["runs_in_progress"]))
        for r in rows
    ]


def set_machine_disabled(
    conn: Conn,
    machine_id: str,
    principal: str,
    *,
    disabled: bool,
    everyone: bool = False,
    now: datetime | None = None,
) -> MachineRecord:
    """Disable or re-enable a machine; NotFound for another principal's machine too."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("set_machine_disabled"),
            {
                "id": machine_id,
                "principal": principal,
                "all": everyone,
                "disabled": disabled,
                "now": now,
            },
        ).fetchone()
    if row is None:
        raise NotFound(f"no machine {machine_id}")
    return MachineRecord.from_dict(row)


class DatabaseProofStore:
    """The DPoP proof store on one connection (its caller commits)."""

    def __init__(self, conn: Conn, *, now: datetime | None = None) -> None:
        self._conn = conn
        self._now = now

    def machine_by_thumbprint(self, thumbprint: str) -> MachineIdentity | None:
        with translated(), self._conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(query("machine_by_thumbprint"), {"thumbprint": thumbprint}).fetchone()
        return MachineIdentity(**row) if row else None

    def remember_jti(self, jti: str, machine_id: str, expires_at: datetime) -> bool:
        with translated():
            # Opportunistic pruning: expired rows can never match a proof in the window.
            self._conn.execute(query("prune_dpop_proofs"), {"now": self._now})
            row = self._conn.execute(
                query("remember_dpop_jti"),
                {"jti": jti, "machine_id": machine_id, "expires_at": expires_at, "now": self._now},
            ).fetchone()
        return row is not None


# --- leases ----------------------------------------------------------------------------


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
    # Every step before `first` is completed: nothing for `_start_held` to check.
    started = _journal_running(conn, run, first, order.index(first), now)
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


def plan_step_ids(run: RunRecord) -> list[str]:
    """The step ids of a run's plan snapshot, in order (what the journal may hold)."""
    steps = run.plan.get("steps")
    if not isinstance(steps, list):
        return []
    ids = [s.get("id") for s in steps if isinstance(s, dict)]
    return [step_id for step_id in ids if isinstance(step_id, str)]


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
    return _start_held(conn, hold_lease(conn, run_id, machine, token, now=now), step_id, now)


def _start_held(conn: Conn, run: RunRecord, step_id: str, now: datetime | None) -> StepRecord:
    """`start_step` on a run whose lease this transaction holds already."""
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
    return _journal_running(conn, run, step_id, position, now)


def _journal_running(
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
    return _complete_held(
        conn, hold_lease(conn, run_id, machine, token, now=now), step_id, output, now, ended
    )


def _complete_held(
    conn: Conn,
    run: RunRecord,
    step_id: str,
    output: JsonValue,
    now: datetime | None,
    ended: EndedSteps | None = None,
) -> StepRecord:
    """`complete_step` on a run whose lease this transaction holds already."""
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
    done = _complete_held(conn, run, step_id, output, now, ended)
    started = _start_held(conn, run, next_step, now)
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
        _complete_held(conn, run, step, output, now, ended)
    check_value(output)
    done = {s.step_id for s in run_steps(conn, run.id) if s.status == "completed"}
    missing = [step for step in plan_step_ids(run) if step not in done]
    if missing or not plan_step_ids(run):
        raise RunIncomplete(f"run {run.id} has steps not completed: {missing}", missing=missing)
    return _finish(conn, run.id, "completed", output=output, error=None, now=now)


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
    _fail_running_steps(conn, run.id, message, now, "failed", ended)
    return _finish(conn, run.id, "failed", output=None, error=message, now=now)


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
    _fail_running_steps(conn, run.id, message, now, "released", ended)
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


def _fail_running_steps(
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


def _finish(
    conn: Conn,
    run_id: uuid.UUID,
    status: str,
    *,
    output: JsonValue,
    error: str | None,
    now: datetime | None,
) -> RunRecord:
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
