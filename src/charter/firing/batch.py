"""Firing due work as the automation actor: lock, sign, decide, record — one transaction.

One transaction per batch instead of three per fire (claim, event, bookkeeping):

1. `lock_due` locks ready queue rows and due scheduled actions (`FOR UPDATE SKIP LOCKED`)
   and their processes, skipping any row or process another transaction holds: a batch
   never waits for a person's event and two batches cannot deadlock. The lock is the
   claim — no lease is written, the rows stay `pending`/`active`;
2. the engine reads the whole batch's inputs at once and holds the rows itself
   (`EngineBatch`); each row is signed on its process's head and decided by the same
   rules as `process_event`, its writes queued;
3. the events' writes go as one statement, the rows' bookkeeping as another, then one
   COMMIT makes it all visible together; the wake-up hints follow it.

A crash anywhere before the COMMIT rolls everything back: every row is due again,
untouched, and exactly-once still rests on the firing key, not on timing. A refusal the
database raises, or one that follows some of an event's writes (`BatchAborted`), rolls
the batch back; its work is then fired event by event, each in a savepoint of its own
(`Engine.process_within`), so only the refused event is undone.

The batch is bounded (`BatchLimits`): a lock wait longer than a few seconds fails only
that event, and a pause of this worker inside the transaction (SIGSTOP, a stalled VM)
longer than the lease makes PostgreSQL end the session (`idle_in_transaction_session_
timeout`), rolling the batch back rather than holding its locks.

`fire(row)` fires one row claimed earlier under a lease (a committed claim) the same way,
in a transaction of its own.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from charter.core.clock import Clock
from charter.core.crashpoints import FIRED_BEFORE_BOOKKEEPING, crash_point
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Submission, sign
from charter.core.errors import CharterError, LeaseLost, StalePrev
from charter.core.resign import ReadHead, drive, sign_on_head
from charter.db.database import Database, Role, act_as, pipelined_transaction
from charter.db.hints import send_hints
from charter.engine.batch import BatchAborted, EngineBatch
from charter.engine.effects import Tally
from charter.engine.process_event import Accepted, Engine
from charter.engine.work import ScheduledRow, WorkRow
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.metrics import count_fires
from charter.firing.outcomes import (
    KEY_FAILURES,
    FireResult,
    FiringPolicy,
    Outcome,
    WorkerKeyError,
    envelope_for,
    record_result,
    result_of,
)
from charter.logs import log_context
from charter.tracing import span

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
        try:
            return self._batch(stopping, claimed, one_by_one=False)
        except BatchAborted as exc:
            # Rolled back whole: fire the same work again, each event in a savepoint of
            # its own, so the one that cannot happen undoes only itself.
            log.warning("a batch was rolled back (%s); firing it event by event", exc.message)
            return self._batch(stopping, claimed, one_by_one=True)

    def fire(self, row: WorkRow) -> FireResult:
        """Fire one row this worker claimed earlier, in a transaction of its own.

        If the row stopped being ours meanwhile (its lease ran out and another worker
        took it, or it was cancelled), the bookkeeping is refused and the whole
        transaction, the event included, rolls back: the result is LOST."""
        tally = Tally()
        try:
            with self.database.connection(Role.WORKER) as conn:
                with pipelined_transaction(conn) as pipeline:
                    books = Bookkeeping(
                        conn, self.worker_id, now=self.clock.now_or_none(), sync=pipeline.sync
                    )
                    self._limit(books)
                    heads = books.process_heads([row.process_id])
                    result = self._one_by_one(books, row, heads, tally)
                    result = self._record(books, result)
                send_hints(conn, tally.hints)
        except LeaseLost as exc:
            log.warning("bookkeeping for %s refused: %s", row.id, exc.message)
            result = FireResult(row, Outcome.LOST, None, "lease_lost", exc.message)
            count_fires([result], self.clock.now())
            return result
        tally.count()
        count_fires([result], self.clock.now())
        return result

    # --- one transaction ----------------------------------------------------------------

    def _batch(
        self, stopping: Callable[[], bool], claimed: Callable[[int], None], *, one_by_one: bool
    ) -> BatchResult:
        tally = Tally()
        with self.database.connection(Role.WORKER) as conn:
            with pipelined_transaction(conn) as pipeline:
                books = Bookkeeping(
                    conn,
                    self.worker_id,
                    now=self.clock.now_or_none(),
                    buffered=True,
                    sync=pipeline.sync,
                )
                outcome = self._lock_and_fire(books, tally, stopping, claimed, one_by_one)
            send_hints(conn, tally.hints)  # what the batch queued or cancelled, after COMMIT
        tally.count()
        count_fires(outcome.results, self.clock.now())
        return outcome

    def _lock_and_fire(
        self,
        books: Bookkeeping,
        tally: Tally,
        stopping: Callable[[], bool],
        claimed: Callable[[int], None],
        one_by_one: bool,
    ) -> BatchResult:
        outcome = BatchResult()
        self._limit(books)
        rows = books.lock_due(limit=self.limits.size)
        outcome.claimed = len(rows)
        claimed(len(rows))
        if not rows:
            return outcome
        # In process order: two rows of one process fire one after the other, the second
        # on the head the first left.
        rows.sort(key=lambda row: (row.process_id, row.occurrence))
        if one_by_one:
            fired = self._one_savepoint_each(books, rows, tally, stopping)
        else:
            fired = self._all_at_once(books, rows, tally, stopping)
        outcome.results = [self._record(books, result) for result in fired]
        books.send()  # the batch's bookkeeping, one statement, with the COMMIT
        # The worker is stopping: the rest were only locked, and stay as they were.
        outcome.released = len(rows) - len(fired)
        return outcome

    def _all_at_once(
        self, books: Bookkeeping, rows: list[WorkRow], tally: Tally, stopping: Callable[[], bool]
    ) -> list[FireResult]:
        """Fire `rows` through one EngineBatch: their inputs read once, their writes sent
        once. BatchAborted when an event cannot be undone alone."""
        act_as(books.conn, Role.ENGINE)
        batch = EngineBatch(
            self.engine,
            books.conn,
            public_key=self.key.public_key_hex,
            process_ids=[row.process_id for row in rows],
            workflow_paths=[row.workflow_path for row in rows],
            work=[(row.kind, str(row.id)) for row in rows],
            sync=books.sync,
        )
        fired: list[FireResult] = []
        for row in rows:
            if stopping():
                break
            fired.append(self._in_batch(batch, row, tally))
        batch.flush(tally)  # the events' writes, sent at once: a refusal aborts the batch
        act_as(books.conn, Role.WORKER)
        return fired

    def _one_savepoint_each(
        self, books: Bookkeeping, rows: list[WorkRow], tally: Tally, stopping: Callable[[], bool]
    ) -> list[FireResult]:
        heads = books.process_heads({row.process_id for row in rows})
        locked = frozenset(str(row.id) for row in rows)  # by `lock_due`, in this transaction
        fired: list[FireResult] = []
        for row in rows:
            if stopping():
                break
            fired.append(self._one_by_one(books, row, heads, tally, held=locked))
        return fired

    def _limit(self, books: Bookkeeping) -> None:
        books.limit_batch(
            lock_timeout_ms=int(self.limits.lock_timeout_seconds * 1000),
            idle_timeout_ms=self.limits.lease_seconds * 1000,
        )

    # --- one row ------------------------------------------------------------------------

    def _in_batch(self, batch: EngineBatch, row: WorkRow, tally: Tally) -> FireResult:
        """Fire `row` in the engine's batch (its writes queued until the batch flushes)."""
        if _cancelled(row, tally):
            return _cancelled_result(row, None)
        # No re-signing here: the batch locked the row's process, so its head is the one
        # `batch.head` says until this transaction ends; a stale_prev cannot be outrun.
        result = self._submit(
            row, lambda _: batch.head(row.process_id), lambda s: batch.apply(s, tally), 0
        )
        return self._after(row, result, tally)

    def _one_by_one(
        self,
        books: Bookkeeping,
        row: WorkRow,
        heads: dict[str, str | None],
        tally: Tally,
        *,
        held: frozenset[str] = frozenset(),
    ) -> FireResult:
        """Fire `row` in a savepoint of its own (re-signing if the head moved); `held`
        names the rows this transaction locked, which may fire without a claim."""
        if _cancelled(row, tally):
            return _cancelled_result(row, None)

        def apply(submission: Submission) -> Accepted:
            return self.engine.process_within(
                books.conn, submission, tally, caller=Role.WORKER, sync=books.sync, held_work=held
            )

        def read_head(step: ReadHead) -> str | None:
            if step.hinted:
                heads[row.process_id] = step.hint  # another event moved it: sign on its head
            return heads.get(row.process_id)

        retries = max(0, self.policy.stale_retries - 1)
        result = self._submit(row, read_head, apply, retries)
        if result.code == "stale_prev":
            result = dataclasses.replace(result, message="the head kept moving")
        if result.event_hash is not None and result.outcome is Outcome.ACCEPTED:
            heads[row.process_id] = result.event_hash
        return self._after(row, result, tally)

    def _submit(
        self,
        row: WorkRow,
        read_head: Callable[[ReadHead], str | None],
        apply: Callable[[Submission], Accepted],
        stale_retries: int,
    ) -> FireResult:
        """Sign `row`'s event on the head and apply it, re-signing on stale_prev at most
        `stale_retries` times: the SDK's one sign-on-head loop (`charter.sdk.signing`),
        with the engine in this transaction as its sender instead of HTTP."""

        def signed(head: str | None) -> Submission:
            envelope = envelope_for(row, head, self.key, self.clock.now(), self.worker_id)
            return sign(envelope, self.key)

        try:
            with (
                log_context(work_id=str(row.id), process_id=row.process_id, action=row.action_name),
                span("charter.fire", _fire_attributes(row)),
            ):
                accepted = drive(sign_on_head(signed, stale_retries), read_head, apply)
        except BatchAborted:
            raise
        except StalePrev as exc:
            return dataclasses.replace(result_of(row, exc), head=exc.context.get("head"))
        except CharterError as exc:
            if exc.code in KEY_FAILURES:
                # The whole transaction rolls back: every row is due again, untouched.
                raise WorkerKeyError(
                    f"the engine refused the automation key: {exc.message}"
                ) from exc
            # A lock wait past the limit or a deadlock undid this event only: the row
            # retries. A lost connection fails the recording too, and with it the whole
            # transaction, which rolls back.
            return result_of(row, exc)
        return FireResult(row, Outcome.ACCEPTED, event_hash=accepted.hash)

    @staticmethod
    def _after(row: WorkRow, result: FireResult, tally: Tally) -> FireResult:
        if result.outcome is Outcome.ACCEPTED:
            crash_point(FIRED_BEFORE_BOOKKEEPING)
            if _cancelled(row, tally):
                # The event replaced or cancelled the very schedule it fired: the engine
                # has finished the row; there is nothing left for us to record.
                return _cancelled_result(row, result.event_hash)
        return result

    def _record(self, books: Bookkeeping, result: FireResult) -> FireResult:
        if result.code == CANCELLED:
            return result  # the engine finished the row; nothing is ours to record
        return record_result(books, result, self.policy, self.clock.now())


CANCELLED = "cancelled"


def _fire_attributes(row: WorkRow) -> dict[str, str | int | bool]:
    return {"charter.work_id": str(row.id), "charter.kind": row.kind,
            "charter.process_id": row.process_id, "charter.action": row.action_name}  # fmt: skip


def _cancelled(row: WorkRow, tally: Tally) -> bool:
    """Whether an event of this transaction cancelled or replaced `row`'s schedule."""
    return isinstance(row, ScheduledRow) and (
        (row.process_id, row.schedule_id) in tally.cancelled_schedules
    )


def _cancelled_result(row: WorkRow, event_hash: str | None) -> FireResult:
    message = (
        "cancelled by an earlier event of this transaction"
        if event_hash is None
        else "the fired event cancelled its own schedule"
    )
    return FireResult(row, Outcome.LOST, event_hash, CANCELLED, message)
