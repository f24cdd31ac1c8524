"""Long-poll claims: one LISTEN connection per API process wakes the claims that wait.

Whatever makes a run claimable at once (admission, a release due now) sends a
`runs_claimable` hint naming the run's principal and target, after the commit that
made it so (db/hints.py's rule: no NOTIFY inside a writing transaction). The API
process keeps one LISTEN connection on that channel and fans each hint out, through
asyncio events, to the claim requests of that principal and target that are waiting:
a waiting request holds no database connection.

Hints are hints (docs/automation.md): a waiter also re-checks every `recheck` seconds, and
every (re)connect of the listener wakes every waiter, so a lost hint (a crash between
the commit and its hint, the listener reconnecting) costs latency, never a run. Runs
that become claimable with no commit (a lease that lapses, a retry time that comes)
are found by that re-check as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator

import psycopg

from charter.automations.ledger import RunRecord
from charter.db.hints import Hint, hint
from charter.db.listening import ListenLoop

CHANNEL = "runs_claimable"
DEFAULT_RECHECK_SECONDS = 1.0

Key = tuple[str, str]  # (principal, target)


def run_hint(principal: str, target: str) -> Hint:
    """The hint that a run of `principal` on `target` may be claimed now."""
    return hint(CHANNEL, {"principal": principal, "target": target})


def run_hints(runs: Iterable[RunRecord]) -> list[Hint]:
    """One hint per principal and target of `runs` (send after their commit)."""
    return list(dict.fromkeys(run_hint(run.principal, run.target) for run in runs))


class RunWakeups:
    """The API process's LISTEN connection and the claim requests waiting on it.

    Started by the first request that waits, on the running event loop (a new loop,
    as a test client may bring, starts a new listener); `aclose()` stops it.
    """

    def __init__(
        self, url: str, *, recheck: float = DEFAULT_RECHECK_SECONDS, max_backoff: float = 5.0
    ) -> None:
        if not recheck > 0:
            raise ValueError("the claim re-check interval must be positive")
        self.url = url
        self.recheck = recheck  # seconds between re-checks of a waiting claim
        self.max_backoff = max_backoff
        self.connected = asyncio.Event()  # the LISTEN is in place (tests wait for it)
        self.hints_received = 0  # counters: what tests observe instead of timing
        self.waiters_woken = 0
        self.draining = False
        self._waiters: dict[Key, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def waiting(self, principal: str, target: str) -> Iterator[asyncio.Event]:
        """An event set by every hint for `principal`'s runs on `target` (and on every
        reconnect) while the block runs. Register before the last check of the table,
        so a hint sent in between is not missed."""
        self._ensure_listening()
        event = asyncio.Event()
        waiters = self._waiters.setdefault((principal, target), set())
        waiters.add(event)
        try:
            yield event
        finally:
            waiters.discard(event)
            if not waiters:
                self._waiters.pop((principal, target), None)

    def drain(self) -> None:
        """The server is stopping: every waiting claim answers now (204), so no long
        poll holds the shutdown up for the rest of its wait."""
        self.draining = True
        self._wake(None)

    def waiting_count(self, principal: str, target: str) -> int:
        """How many claim requests wait for `principal`'s runs on `target`."""
        return len(self._waiters.get((principal, target), ()))

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if task.get_loop() is not asyncio.get_running_loop():
            return  # its loop is gone (or another's): nothing here can await it
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # --- the listener -----------------------------------------------------------------

    def _ensure_listening(self) -> None:
        loop = asyncio.get_running_loop()
        task = self._task
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self.connected = asyncio.Event()
        self._task = loop.create_task(self._listen(), name="charter-run-wakeups")

    def _wake(self, key: Key | None) -> None:
        if key is None:
            groups: Iterable[set[asyncio.Event]] = list(self._waiters.values())
        else:
            groups = [self._waiters.get(key, set())]
        for waiters in groups:
            for event in waiters:
                event.set()
                self.waiters_woken += 1

    async def _listen(self) -> None:
        """Listen until cancelled; on connection loss reconnect with backoff."""
        await ListenLoop(
            self.url,
            name="charter-run-wakeups",
            listen_query="listen_for_runs",
            on_notify=self._hinted,
            # Whatever was hinted while we were away, or while the connection was going:
            # every waiter re-checks.
            on_connected=lambda _connects: self._wake(None),
            on_lost=lambda: self._wake(None),
            first_backoff=0.2,
            max_backoff=self.max_backoff,
            connected=self.connected,
        ).run()

    def _hinted(self, notification: psycopg.Notify) -> None:
        self.hints_received += 1
        self._wake(_key(notification.payload))


def _key(payload: str) -> Key | None:
    """The (principal, target) a hint names; None (wake everyone) if it names none."""
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    if isinstance(value, dict):
        principal, target = value.get("principal"), value.get("target")
        if isinstance(principal, str) and isinstance(target, str):
            return principal, target
    return None
