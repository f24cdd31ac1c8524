"""Firing due work as the automation actor: claim, sign, apply, record — one transaction.

One transaction per batch instead of three per fire (claim, event, bookkeeping):

1. the claim takes ready queue rows and due scheduled actions (`FOR UPDATE SKIP LOCKED`)
   and locks their processes too, skipping any process another transaction holds, so
   a batch never waits for a person's event and two batches cannot deadlock;
2. the heads of those processes are read once (nobody else can move them now);
3. each row is signed as the automation actor and applied by the engine in a savepoint
   of its own (`Engine.process_within`: the same checks and writes as `process_event`),
   so a refused event undoes only itself; its result is recorded by the bookkeeping
   functions in the same transaction;
4. one COMMIT makes the events, the work rows' new states and the log rows visible
   together. A crash anywhere before it rolls everything back: the rows are due again,
   nothing fired, and exactly-once still rests on the firing key, not on timing.

The batch is bounded (`BatchLimits`): a lock wait longer than a few seconds fails only
that row's savepoint (it retries later), and a pause of this worker inside the
transaction (SIGSTOP, a stalled VM) longer than the lease makes PostgreSQL end the
session, rolling the batch back rather than holding its locks.

`fire(row)` fires one row claimed earlier (under a lease, in a committed transaction)
the same way, in a transaction of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from charter.automation.bookkeeping import Bookkeeping
from charter.automation.outcomes import (
    KEY_FAILURES,
    FireResult,
    FiringPolicy,
    Outcome,
    WorkerKeyError,
    envelope_for,
    record_result,
    result_of,
)
from charter.core.clock import Clock
from charter.core.crashpoints import FIRED_BEFORE_BOOKKEEPING, crash_point
from charter.core.ed25519 import SecretKey
from charter.core.envelope import sign
from charter.core.errors import CharterError, LeaseLost, StalePrev
from charter.db.database import Database, Role
from charter.engine.process_event import Engine, Tally
from charter.engine.work import WorkRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchLimits:
    lease_seconds: int = 60
    size: int = 100
    lock_timeout_seconds: float = 5.0  # a lock held elsewhere longer: that row retries


@dataclass
class BatchResult:
    claimed: int = 0
    results: list[FireResult] = field(default_factory=list)
    released: int = 0  # claimed but given back untouched (the worker is stopping)


class Firer:
    """Fires due work (and single claimed rows) for one worker."""

    def __init__(
        self,
        database: Database,
        engine: Engine,
        key: SecretKey,
        worker_id: str,
        clock: Clock,
        policy: FiringPolicy | None = None,
        limits: BatchLimits | None = None,
    ) -> None:
        self.database = database
        self.engine = engine
        self.key = key
        self.worker_id = worker_id
        self.clock = clock
        self.policy = policy or FiringPolicy()
        self.limits = limits or BatchLimits()

    def fire_due(
        self,
        stopping: Callable[[], bool] = lambda: False,
        claimed: Callable[[int], None] = lambda count: None,
    ) -> BatchResult:
        """Claim up to `limits.size` due rows and fire them, in one transaction;
        `claimed(n)` is told how many rows the claim took as soon as it knows."""
        outcome = BatchResult()
        tally = Tally()
        with (
            self.database.connection(Role.WORKER) as conn,
            conn.pipeline(),
            conn.transaction(),
        ):
            books = Bookkeeping(conn, self.worker_id, now=self.clock.now_or_none())
            self._limit(books)
            rows = books.claim_due_locked(
                lease_seconds=self.limits.lease_seconds, limit=self.limits.size
            )
            outcome.claimed = len(rows)
            claimed(len(rows))
            if not rows:
                return outcome
            heads = books.process_heads({row.process_id for row in rows})
            # In process order: two rows of one process fire one after the other, the
            # second on the head the first left.
            rows.sort(key=lambda row: (row.process_id, row.occurrence))
            for index, row in enumerate(rows):
                if stopping():
                    for rest in rows[index:]:
                        books.release(rest)
                    outcome.released = len(rows) - index
                    break
                outcome.results.append(self._fire_and_record(books, row, heads, tally))
        tally.count()
        return outcome

    def fire(self, row: WorkRow) -> FireResult:
        """Fire one row this worker claimed earlier, in a transaction of its own.

        If the row stopped being ours meanwhile (its lease ran out and another worker
        took it, or it was cancelled), the bookkeeping is refused and the whole
        transaction, the event included, rolls back: the result is LOST."""
        tally = Tally()
        try:
            with (
                self.database.connection(Role.WORKER) as conn,
                conn.pipeline(),
                conn.transaction(),
            ):
                books = Bookkeeping(conn, self.worker_id, now=self.clock.now_or_none())
                self._limit(books)
                heads = books.process_heads([row.process_id])
                result = self._fire_and_record(books, row, heads, tally)
        except LeaseLost as exc:
            log.warning("bookkeeping for %s refused: %s", row.id, exc.message)
            return FireResult(row, Outcome.LOST, None, "lease_lost", exc.message)
        tally.count()
        return result

    def _limit(self, books: Bookkeeping) -> None:
        books.limit_batch(
            lock_timeout_ms=int(self.limits.lock_timeout_seconds * 1000),
            idle_timeout_ms=self.limits.lease_seconds * 1000,
        )

    def _fire_and_record(
        self, books: Bookkeeping, row: WorkRow, heads: dict[str, str | None], tally: Tally
    ) -> FireResult:
        if str(row.id) in tally.cancelled_work:
            # An earlier event of this batch cancelled (or replaced) the row: it is
            # finished, by the engine; firing it would only be refused.
            message = "cancelled by an earlier event of this batch"
            return FireResult(row, Outcome.LOST, None, "cancelled", message)
        result = self._fire(books, row, heads, tally)
        if result.outcome is Outcome.ACCEPTED:
            crash_point(FIRED_BEFORE_BOOKKEEPING)
            if str(row.id) in tally.cancelled_work:
                # The event replaced or cancelled the very schedule it fired: the engine
                # has finished the row; there is nothing left for us to record.
                message = "the fired event cancelled its own schedule"
                return FireResult(row, Outcome.LOST, result.event_hash, "cancelled", message)
        return record_result(books, result, self.policy, self.clock.now())

    def _fire(
        self, books: Bookkeeping, row: WorkRow, heads: dict[str, str | None], tally: Tally
    ) -> FireResult:
        last: CharterError | None = None
        for _ in range(self.policy.stale_retries + 1):
            envelope = envelope_for(row, heads.get(row.process_id), self.key, self.clock.now())
            try:
                accepted = self.engine.process_within(
                    books.conn, sign(envelope, self.key), tally, caller=Role.WORKER
                )
            except StalePrev as exc:
                last = exc  # cannot happen while we hold the process; if it does, re-sign
                heads[row.process_id] = exc.context.get("head")
                continue
            except CharterError as exc:
                if exc.code in KEY_FAILURES:
                    # The whole batch rolls back: every row is due again, untouched.
                    raise WorkerKeyError(
                        f"the engine refused the automation key: {exc.message}"
                    ) from exc
                # A lock wait past the limit or a deadlock undid this savepoint only: the
                # row retries. A lost connection fails the recording too, and with it
                # the whole batch, which rolls back.
                return result_of(row, exc)
            heads[row.process_id] = accepted.hash
            return FireResult(row, Outcome.ACCEPTED, event_hash=accepted.hash)
        assert last is not None
        return FireResult(row, Outcome.RETRY, code=last.code, message="the head kept moving")
