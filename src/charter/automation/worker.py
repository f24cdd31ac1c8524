"""The automation worker (DESIGN §6.4): an asyncio loop around `run_once()`.

One pass reclaims expired leases, claims due scheduled actions and ready queue rows
(`FOR UPDATE SKIP LOCKED` inside the claim functions) and fires them concurrently.
Between passes the worker sleeps until the earliest due row the database knows of —
one wake-up time, not a timer per row, so memory stays flat however many future
schedules exist — or until a NOTIFY hint, or until the safety sweep interval.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from charter.automation.bookkeeping import Bookkeeping
from charter.automation.firing import Firer, FireResult, FiringPolicy, Outcome
from charter.automation.listener import Listener
from charter.core.clock import Clock, SystemClock
from charter.core.ed25519 import SecretKey
from charter.core.errors import CharterError
from charter.db.database import Database, Role
from charter.engine.process_event import Engine
from charter.engine.work import WorkRow

log = logging.getLogger(__name__)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class WorkerSettings:
    lease_seconds: int = 60
    batch_size: int = 100
    concurrency: int = 8
    sweep_seconds: float = 300.0  # the safety sweep: rescan even without a hint
    error_backoff_seconds: float = 2.0


@dataclass
class PassResult:
    """What one pass did (tests assert on these)."""

    reclaimed: int = 0
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def count(self, result: FireResult) -> None:
        self.outcomes[result.outcome.value] = self.outcomes.get(result.outcome.value, 0) + 1


class AutomationWorker:
    """Fires durable work as the automation actor until stopped."""

    def __init__(
        self,
        database: Database,
        url: str,
        key: SecretKey,
        *,
        engine: Engine | None = None,
        clock: Clock | None = None,
        worker_id: str | None = None,
        settings: WorkerSettings | None = None,
        policy: FiringPolicy | None = None,
    ) -> None:
        self.database = database
        self.url = url
        self.clock = clock or SystemClock()
        self.engine = engine or Engine(database, clock=self.clock)
        self.worker_id = worker_id or default_worker_id()
        self.settings = settings or WorkerSettings()
        self.firer = Firer(database, self.engine, key, self.worker_id, self.clock, policy)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._gate = asyncio.Semaphore(self.settings.concurrency)
        self.fired_total = 0
        self.listener = Listener(url, self.wake)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Finish the firings under way, release what was claimed but not fired, exit."""
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Run until `stop()`; a dying side task stops the worker loudly."""
        listener = asyncio.create_task(self.listener.run(), name="charter-listener")
        loop = asyncio.create_task(self._loop(), name="charter-worker-loop")
        try:
            done, _ = await asyncio.wait({listener, loop}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # re-raise what killed it
        finally:
            for task in (listener, loop):
                task.cancel()
            await asyncio.gather(listener, loop, return_exceptions=True)

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                result = await self.run_once()
            except CharterError as exc:
                if not exc.retryable:
                    raise
                log.warning("worker pass failed (%s); retrying", exc.message)
                await self._sleep(self.settings.error_backoff_seconds)
                continue
            if result.claimed >= self.settings.batch_size:
                continue  # more is due right now
            await self._sleep(await self._seconds_to_next())

    async def run_once(self) -> PassResult:
        """One pass: reclaim expired leases, claim what is due, fire it all."""
        self._wake.clear()
        result = PassResult()
        rows = await asyncio.to_thread(self._claim, result)
        if rows:
            fired = await asyncio.gather(*(self._fire(row) for row in rows))
            for item in fired:
                if item is not None:
                    result.count(item)
        return result

    def _claim(self, result: PassResult) -> list[WorkRow]:
        with self.database.connection(Role.WORKER) as conn:
            books = Bookkeeping(conn, self.worker_id, now=self.clock.now_or_none())
            # Its own transaction: reclaimed rows are free before (and whatever) we claim.
            with conn.transaction():
                scheduled, queued = books.reclaim_expired()
            result.reclaimed = scheduled + queued
            with conn.transaction():
                return self._claim_batch(books, result)

    def _claim_batch(self, books: Bookkeeping, result: PassResult) -> list[WorkRow]:
        lease, batch = self.settings.lease_seconds, self.settings.batch_size
        rows: list[WorkRow] = list(books.claim_queue(lease_seconds=lease, limit=batch))
        rows.extend(books.claim_scheduled(lease_seconds=lease, limit=batch - len(rows)))
        result.claimed = len(rows)
        return rows

    async def _fire(self, row: WorkRow) -> FireResult | None:
        async with self._gate:
            if self._stopping.is_set():
                await asyncio.shield(asyncio.to_thread(self._release, row))
                return None
            try:
                # Shielded: a cancelled worker still records what it already submitted.
                outcome = await asyncio.shield(asyncio.to_thread(self.firer.fire, row))
            except CharterError as exc:
                if not exc.retryable:
                    raise  # a key failure: the worker must stop
                # The database went away mid-fire: the row stays claimed until its lease
                # runs out, then it is fired again (exactly once, by the occurrence key).
                log.warning("firing %s interrupted: %s", row.id, exc.message)
                return None
            if outcome.outcome is Outcome.ACCEPTED:
                self.fired_total += 1
            return outcome

    def _release(self, row: WorkRow) -> None:
        with self.database.connection(Role.WORKER) as conn, conn.transaction():
            Bookkeeping(conn, self.worker_id).release(row)

    async def _seconds_to_next(self) -> float:
        def next_wakeup() -> datetime | None:
            with self.database.connection(Role.WORKER) as conn:
                return Bookkeeping(conn, self.worker_id).next_wakeup()

        try:
            when = await asyncio.to_thread(next_wakeup)
        except CharterError as exc:
            log.warning("cannot read the next wake-up (%s)", exc.message)
            return self.settings.error_backoff_seconds
        if when is None:
            return self.settings.sweep_seconds
        delay = (when - self.clock.now()).total_seconds()
        return max(0.0, min(delay, self.settings.sweep_seconds))

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._wake.is_set():
            return
        sleeper = asyncio.create_task(self.clock.sleep(seconds))
        waker = asyncio.create_task(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
