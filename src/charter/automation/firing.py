"""Firing one claimed work row: sign as the automation actor, submit through
process_event, classify the result, record it through the bookkeeping functions.

Results (first seed, "Result categories"): accepted → completed, exhausted or
rescheduled; business skip → skipped (a recurring row goes on); transient → the same
occurrence is retried later; permanent → failed once the retry budget is spent; key
failure → WorkerKeyError, fatal to the worker, the row released untouched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from charter.automation.bookkeeping import Bookkeeping
from charter.automation.recurrence import next_run_at
from charter.core.clock import Clock
from charter.core.crashpoints import FIRED_BEFORE_BOOKKEEPING, crash_point
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.errors import CharterError, LeaseLost, StalePrev
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine.process_event import Engine
from charter.engine.work import ScheduledRow, WorkRow, fired_input

log = logging.getLogger(__name__)

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


class Firer:
    """Fires claimed rows for one worker."""

    def __init__(
        self,
        database: Database,
        engine: Engine,
        key: SecretKey,
        worker_id: str,
        clock: Clock,
        policy: FiringPolicy | None = None,
    ) -> None:
        self.database = database
        self.engine = engine
        self.key = key
        self.worker_id = worker_id
        self.clock = clock
        self.policy = policy or FiringPolicy()

    def fire(self, row: WorkRow) -> FireResult:
        """Submit the row's event and record what happened; never raises for a row."""
        result = self._submit(row)
        if result.outcome is Outcome.ACCEPTED:
            crash_point(FIRED_BEFORE_BOOKKEEPING)
        if result.code in KEY_FAILURES:
            self._release(row)
            raise WorkerKeyError(f"the engine refused the automation key: {result.message}")
        return self._record(result)

    def _submit(self, row: WorkRow) -> FireResult:
        last: CharterError | None = None
        for _ in range(self.policy.stale_retries + 1):
            head = self._head(row.process_id)
            envelope = Envelope(
                v=1,
                process=row.process_id,
                workflow=row.workflow_path,
                action=row.action_name,
                input=fired_input(row),
                prev=head,
                actor=self.key.public_key_hex,
                at=format_rfc3339(self.clock.now()),
            )
            try:
                accepted = self.engine.process_event(sign(envelope, self.key))
            except StalePrev as exc:
                last = exc  # another event moved the head: read it again and re-sign
                continue
            except CharterError as exc:
                fired = exc.context.get("event_hash") if exc.code == ALREADY_FIRED else None
                if isinstance(fired, str):
                    # Fired before (by us before a crash, or by a racing worker): the
                    # occurrence happened, so it is completed, not skipped or retried.
                    return FireResult(row, Outcome.ACCEPTED, event_hash=fired, code=exc.code)
                message = f"{exc.code}: {exc.message}"
                return FireResult(row, _classify(exc.code), code=exc.code, message=message)
            except Exception as exc:  # an engine bug must not kill the worker loop
                log.exception("firing %s failed unexpectedly", row.id)
                return FireResult(row, Outcome.FAILED, code="internal", message=repr(exc))
            return FireResult(row, Outcome.ACCEPTED, event_hash=accepted.hash)
        assert last is not None
        return FireResult(row, Outcome.RETRY, code=last.code, message="the head kept moving")

    def _record(self, result: FireResult) -> FireResult:
        row, now = result.row, self.clock.now()
        try:
            with self.database.connection(Role.WORKER) as conn, conn.transaction():
                books = Bookkeeping(conn, self.worker_id, now=self.clock.now_or_none())
                outcome = result.outcome
                if outcome is Outcome.ACCEPTED:
                    assert result.event_hash is not None
                    books.complete(row, result.event_hash, _next(row, now, fired=True))
                elif outcome is Outcome.SKIPPED:
                    books.skip(row, result.message, _next(row, now, fired=False))
                elif outcome is Outcome.RETRY or (
                    outcome is Outcome.FAILED
                    and row.occurrence_attempts + 1 < self.policy.max_attempts
                ):
                    # The budget and the backoff count this occurrence's attempts only: a
                    # schedule that fired a hundred times starts each occurrence afresh.
                    retry_at = self.policy.retry_at(now, row.occurrence_attempts)
                    books.retry(row, retry_at, result.message)
                    result = FireResult(row, Outcome.RETRY, result.event_hash, result.code,
                                        result.message)  # fmt: skip
                elif outcome is Outcome.FAILED:
                    books.fail(row, result.message)
                books.log(
                    f"{row.kind}.{result.outcome.value}",
                    level="info" if result.outcome is Outcome.ACCEPTED else "warning",
                    code=result.code,
                    process_id=row.process_id,
                    action=row.action_name,
                    event_hash=result.event_hash,
                    message=result.message,
                    detail={"work_id": str(row.id), "worker": self.worker_id},
                )
        except LeaseLost as exc:
            # Paused past our lease, or the row was cancelled: its state is not ours.
            log.warning("bookkeeping for %s refused: %s", row.id, exc.message)
            return FireResult(row, Outcome.LOST, result.event_hash, "lease_lost", exc.message)
        return result

    def _head(self, process_id: str) -> str | None:
        with self.database.connection(Role.WORKER) as conn:
            return Bookkeeping(conn, self.worker_id).process_head(process_id)

    def _release(self, row: WorkRow) -> None:
        with self.database.connection(Role.WORKER) as conn, conn.transaction():
            Bookkeeping(conn, self.worker_id).release(row)


def _classify(code: str) -> Outcome:
    if code in BUSINESS_SKIPS:
        return Outcome.SKIPPED
    if code in TRANSIENT:
        return Outcome.RETRY
    # Anything else — `duplicate` without an earlier firing of this occurrence included
    # (say, a spawn whose child exists) — is a permanent failure after the retry budget.
    return Outcome.FAILED


def _next(row: WorkRow, now: datetime, *, fired: bool) -> datetime | None:
    return next_run_at(row, now, fired=fired) if isinstance(row, ScheduledRow) else None
