"""The automation worker (docs/automation.md): an asyncio loop that fires batches of due work.

Each batch claims due scheduled actions and ready queue rows, fires them and records the
results in one transaction (`batch.py`). The loop is continuous: as soon as a batch's
claim comes back full, the next batch starts claiming (SKIP LOCKED keeps them apart),
up to `concurrency` batches in flight; with nothing left it sleeps until the earliest
due row the database knows of — one wake-up time, not a timer per row, so memory stays
flat however many future schedules exist — or until a NOTIFY hint, or until the safety
sweep. Expired leases (rows a worker of the leased, multi-transaction path left behind)
are reclaimed on a timer, not on every batch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from charter.core.clock import Clock, SystemClock, wait_any
from charter.core.ed25519 import SecretKey
from charter.core.errors import CharterError
from charter.db.database import Database, Role
from charter.engine.process_event import Engine
from charter.firing.batch import BatchLimits, BatchResult, Firer
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.listener import Listener
from charter.firing.metrics import LEASE_RECLAIMS
from charter.firing.outcomes import FireResult, FiringPolicy, Outcome, WorkerKeyError

log = logging.getLogger(__name__)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class WorkerSettings:
    lease_seconds: int = 60
    batch_size: int = 100  # rows claimed, fired and recorded per transaction
    concurrency: int = 2  # batches in flight at once
    sweep_seconds: float = 30.0  # the safety sweep: rescan even without a hint
    error_backoff_seconds: float = 2.0
    lock_timeout_seconds: float = 5.0


@dataclass
class PassResult:
    """What one batch did (tests assert on these)."""

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
        limits = BatchLimits(
            lease_seconds=self.settings.lease_seconds,
            size=self.settings.batch_size,
            lock_timeout_seconds=self.settings.lock_timeout_seconds,
        )
        self.firer = Firer(database, self.engine, key, self.worker_id, self.clock, policy, limits)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._next_reclaim: datetime | None = None
        self.fired_total = 0
        self.listener = Listener(url, self.wake)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Finish the firing under way in each batch, release the rest of it, exit."""
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
        running: set[asyncio.Task[PassResult]] = set()
        self._wake.set()  # start with a pass: whatever is due now
        try:
            while not self._stopping.is_set():
                if self._wake.is_set() and len(running) < self.settings.concurrency:
                    self._wake.clear()
                    running.add(asyncio.create_task(self.run_once(), name="charter-batch"))
                    continue
                if running:
                    waker = asyncio.create_task(self._wake.wait())
                    done, _ = await asyncio.wait(
                        {*running, waker}, return_when=asyncio.FIRST_COMPLETED
                    )
                    waker.cancel()
                    for task in [t for t in running if t in done]:
                        running.discard(task)
                        await self._settle(task)
                    continue
                await self._sleep(await self._seconds_to_next())
                self._wake.set()  # due time, a hint or the sweep: claim
        finally:
            # Batches in flight see the stop between rows: they commit what they fired
            # and release the rest. Shielded: our own cancellation must not lose them.
            if running:
                await asyncio.shield(asyncio.gather(*running, return_exceptions=True))

    async def _settle(self, task: asyncio.Task[PassResult]) -> None:
        """A batch ended: re-raise what must stop the worker, back off on the rest."""
        try:
            task.result()
        except WorkerKeyError:
            raise  # the engine refused our key: the worker must stop
        except CharterError as exc:
            # The database failed under the batch (or refused it): it rolled back, and
            # every row in it is due again, untouched.
            log.warning("a batch failed (%s: %s); retrying", exc.code, exc.message)
            await self._sleep(self.settings.error_backoff_seconds)
            self._wake.set()

    async def run_once(self) -> PassResult:
        """Reclaim expired leases when their timer says so, then fire one batch."""
        result = PassResult()
        if self._next_reclaim is None or self.clock.now() >= self._next_reclaim:
            # Set before awaiting: batches started together reclaim once, not each.
            self._next_reclaim = self.clock.now() + timedelta(
                seconds=max(1.0, self.settings.lease_seconds / 4)
            )
            result.reclaimed = await asyncio.to_thread(self._reclaim)
        loop = asyncio.get_running_loop()

        def claimed(count: int) -> None:
            if count >= self.settings.batch_size:
                loop.call_soon_threadsafe(self.wake)  # more is due: start the next batch

        # Shielded: a cancelled worker still commits (or rolls back) the batch under way.
        batch: BatchResult = await asyncio.shield(
            asyncio.to_thread(self.firer.fire_due, self._stopping.is_set, claimed)
        )
        result.claimed = batch.claimed
        for fired in batch.results or []:
            result.count(fired)
            if fired.outcome is Outcome.ACCEPTED:
                self.fired_total += 1
        return result

    def _reclaim(self) -> int:
        with self.database.connection(Role.WORKER) as conn, conn.transaction():
            scheduled, queued = Bookkeeping(
                conn, self.worker_id, now=self.clock.now_or_none()
            ).reclaim_expired()
        LEASE_RECLAIMS.inc(scheduled + queued)
        return scheduled + queued

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
        await wait_any(self.clock, seconds, self._wake)
