"""What a firing's result means for its work row, and how it is recorded.

Results (docs/automation.md, "The worker"): accepted → completed, exhausted or
rescheduled; business skip → skipped (a recurring row goes on); transient → the same
occurrence is retried later; permanent → failed once the retry budget is spent; key
failure → WorkerKeyError, fatal to the worker, nothing recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope
from charter.core.errors import CharterError
from charter.core.timefmt import format_rfc3339
from charter.engine.work import ScheduledRow, WorkRow, fired_input
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.recurrence import next_run_at

BUSINESS_SKIPS = frozenset(
    {"wrong_state", "condition_failed", "forbidden_role", "unknown_action", "invalid_input"}
)
# `not_due`: the engine's clock is behind the claim's; the same occurrence waits.
TRANSIENT = frozenset({"database_unavailable", "serialization_conflict", "stale_prev", "not_due"})
KEY_FAILURES = frozenset({"bad_signature", "unknown_actor"})
ALREADY_FIRED = "duplicate"


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    SKIPPED = "skipped"
    RETRY = "transient_error"
    FAILED = "failed"
    LOST = "lost"  # our lease is gone: the row's state is someone else's to record


class WorkerKeyError(CharterError):
    """The automation key was refused: the worker must stop."""

    code = "automation_key"


@dataclass(frozen=True)
class FireResult:
    row: WorkRow
    outcome: Outcome
    event_hash: str | None = None
    code: str | None = None
    message: str = ""
    head: str | None = None  # with `stale_prev`: the head to sign on instead


@dataclass(frozen=True)
class FiringPolicy:
    max_attempts: int = 5  # attempts of one occurrence before a permanent error fails it
    stale_retries: int = 8  # re-read the head and re-sign this often on stale_prev
    retry_base_seconds: float = 1.0
    retry_cap_seconds: float = 300.0

    def retry_at(self, now: datetime, attempts: int) -> datetime:
        # The exponent is capped: 2.0 ** 1024 overflows, and the cap is reached long before.
        delay = min(
            self.retry_cap_seconds, self.retry_base_seconds * 2.0 ** min(max(0, attempts), 32)
        )
        return now + timedelta(seconds=delay)


def envelope_for(
    row: WorkRow, head: str | None, key: SecretKey, at: datetime, worker: str
) -> Envelope:
    """The event `worker` fires `row` with on `head`: the row's data plus its provenance."""
    return Envelope(
        v=1,
        process=row.process_id,
        workflow=row.workflow_path,
        action=row.action_name,
        input=fired_input(row, worker),
        prev=head,
        actor=key.public_key_hex,
        at=format_rfc3339(at),
    )


def result_of(row: WorkRow, exc: CharterError) -> FireResult:
    """What a refusal of the engine means for `row` (docs/automation.md)."""
    fired = exc.context.get("event_hash") if exc.code == ALREADY_FIRED else None
    if isinstance(fired, str):
        # Fired before (by us before a crash, or by a racing worker): the occurrence
        # happened, so it is completed, not skipped or retried.
        return FireResult(row, Outcome.ACCEPTED, event_hash=fired, code=exc.code)
    return FireResult(row, classify(exc.code), code=exc.code, message=f"{exc.code}: {exc.message}")


def record_result(
    books: Bookkeeping, result: FireResult, policy: FiringPolicy, now: datetime
) -> FireResult:
    """Record `result` on its row through the bookkeeping functions, and in the system log
    unless it is a plain accepted fire; the result as recorded (a permanent error within
    the budget is a retry)."""
    row, outcome = result.row, result.outcome
    if outcome is Outcome.ACCEPTED:
        assert result.event_hash is not None
        books.complete(row, result.event_hash, _next(row, now, fired=True))
    elif outcome is Outcome.SKIPPED:
        books.skip(row, result.message, _next(row, now, fired=False))
    elif outcome is Outcome.RETRY or (
        outcome is Outcome.FAILED and row.occurrence_attempts + 1 < policy.max_attempts
    ):
        # The budget and the backoff count this occurrence's attempts only: a schedule
        # that fired a hundred times starts each occurrence afresh.
        books.retry(row, policy.retry_at(now, row.occurrence_attempts), result.message)
        result = FireResult(row, Outcome.RETRY, result.event_hash, result.code, result.message)
    elif outcome is Outcome.FAILED:
        books.fail(row, result.message)
    if result.outcome is Outcome.ACCEPTED and result.code is None:
        return result  # the event and the row say it all: no log row per fire
    books.log(
        f"{row.kind}.{result.outcome.value}",
        level="info" if result.outcome is Outcome.ACCEPTED else "warning",
        code=result.code,
        process_id=row.process_id,
        action=row.action_name,
        event_hash=result.event_hash,
        message=result.message,
        detail={"work_id": str(row.id), "worker": books.worker},
    )
    return result


def classify(code: str) -> Outcome:
    if code in BUSINESS_SKIPS:
        return Outcome.SKIPPED
    if code in TRANSIENT:
        return Outcome.RETRY
    # Anything else — `duplicate` without an earlier firing of this occurrence included
    # (say, a spawn whose child exists) — is a permanent failure after the retry budget.
    return Outcome.FAILED


def _next(row: WorkRow, now: datetime, *, fired: bool) -> datetime | None:
    return next_run_at(row, now, fired=fired) if isinstance(row, ScheduledRow) else None
