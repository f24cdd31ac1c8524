"""Wake-up hints sent from a thread of their own, off the path of the request that
committed what they announce.

`send_hints` after the COMMIT costs the committing thread one more transaction (BEGIN,
the NOTIFY, COMMIT: a round trip it waits for). Under concurrent `POST /v1/events`
clients that is a large share of each submission's time in the engine (bench/RESULTS.md
has the figure). A `HintSender` takes the hints instead, so the answer goes out after the
event's own COMMIT, and its thread sends whatever has accumulated meanwhile in one
statement: under load, many requests' hints share a transaction.

Hints are hints (docs/automation.md): one lost here (the process dying before its thread sent
it, the database refusing) costs a listener latency, never work; the worker's sweep and
its DB-derived wake-up find every row. The order of hints is kept: one queue, one thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

from charter.db.database import Database, Role
from charter.db.hints import Hint, send_hints

log = logging.getLogger(__name__)

_STOP = None  # the queue item that ends the thread, after everything queued before it
MAX_BATCH = 500  # hints per NOTIFY statement: a bound on one transaction's work


class HintSender:
    """Queues hints and sends them, oldest first, from one daemon thread."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._queue: queue.SimpleQueue[list[Hint] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.sent = 0  # hints handed to the database (tests observe this, not timing)

    def post(self, hints: Sequence[Hint]) -> None:
        """Queue `hints` for sending; returns at once. After `close()`, sends them inline."""
        if not hints:
            return
        with self._lock:
            if not self._closed:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="charter-hints", daemon=True
                    )
                    self._thread.start()
                self._queue.put(list(hints))
                return
        self._send(list(hints))  # closed: no thread left to send them

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued, then stop the thread (waiting at most `timeout` s)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = list(first)
            # Whatever else is queued already goes in the same transaction.
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.extend(item)
            self._send(batch)

    def _send(self, batch: list[Hint]) -> None:
        try:
            with self.database.connection(Role.ENGINE) as conn:
                # One refused hint must not take its batch-mates with it: if the batch
                # is refused (send_hints logs why), each is tried on its own.
                if send_hints(conn, batch):
                    self.sent += len(batch)
                elif len(batch) > 1:
                    self.sent += sum(send_hints(conn, [one]) for one in batch)
        except Exception as exc:  # a pool timeout, a closed pool: never kill the thread
            log.warning("could not send %d wake-up hint(s): %s", len(batch), exc)
