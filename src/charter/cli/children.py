"""The child processes a command supervises: spawned, stopped with SIGTERM, never left
behind.

`charter up` runs its API and its worker (with cron admission) each in a process of its
own, so that the two use two cores instead of sharing one interpreter lock; `charter
serve --workers N` runs N API processes. Each child is spawned, not forked (no database
connection crosses a fork), ignores SIGINT (a Ctrl-C reaches the whole process group:
the parent stops its children with SIGTERM, in order) and asks the kernel to send it
SIGTERM when its parent dies (PR_SET_PDEATHSIG on Linux; elsewhere a thread watches the
parent's pid), so a `kill -9` of the parent leaves no child running.

`Family` is the parent's side: start every child, wait until a signal or until one
child exits by itself, then stop the others. A child that exits by itself is reported
(`died`): the command stops everything and exits 1 (a service manager restarts it), it
does not restart the child behind the operator's back.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_CHECK_SECONDS = 0.5
POLL_SECONDS = 0.1
JOIN_SECONDS = 60.0
logger = logging.getLogger("charter.up")


def die_with_parent(parent: int) -> None:
    """In a child: receive SIGTERM (the child's clean stop) when `parent` dies; and
    SIGINT ignored, since the parent relays a Ctrl-C as SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            _watch_parent_in_thread(parent)
    else:  # pragma: no cover - Linux is what the tests run on
        _watch_parent_in_thread(parent)
    if os.getppid() != parent:  # it died before we asked
        os.kill(os.getpid(), signal.SIGTERM)


def _watch_parent_in_thread(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(PARENT_CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="charter-parent-watch", daemon=True).start()


@dataclass(frozen=True)
class Died:
    """A child that exited by itself while the command ran."""

    name: str
    pid: int | None
    exitcode: int | None

    @property
    def message(self) -> str:
        code = self.exitcode
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else (f"exited with code {code}")
        )
        return f"the {self.name} process (pid {self.pid}) {how}; stopping everything"


class Family:
    """Children started together and stopped together."""

    def __init__(self, children: Sequence[SpawnProcess]) -> None:
        self.children = list(children)
        self.beside_result: object = None

    def start(self) -> None:
        for child in self.children:
            child.start()

    async def run(
        self, beside: Awaitable[object] | None = None, *, until_beside: bool = False
    ) -> Died | None:
        """Until SIGINT/SIGTERM (None), a child's own exit (that child) or, with
        `until_beside`, the end of `beside` (None). `beside` (the demo) runs meanwhile; its
        failure is raised, its result kept in `beside_result`."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        side = asyncio.ensure_future(beside) if beside is not None else None
        try:
            while not stop.is_set():
                for child in self.children:
                    if not child.is_alive():
                        return Died(child.name, child.pid, child.exitcode)
                if side is not None and side.done():
                    self.beside_result = side.result()  # raises why the demo failed
                    side = None
                    if until_beside:
                        return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), POLL_SECONDS)
            return None
        finally:
            if side is not None:
                side.cancel()
                await asyncio.gather(side, return_exceptions=True)
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    def stop(self) -> list[int | None]:
        """SIGTERM to every child still running (its own handler stops it cleanly), a
        SIGKILL to one that has not stopped in JOIN_SECONDS; their exit codes."""
        for child in self.children:
            if child.is_alive():
                child.terminate()
        for child in self.children:
            if child.pid is None:
                continue
            child.join(JOIN_SECONDS)
            if child.is_alive():
                logger.error(
                    "%s process did not stop in %s s; killing it", child.name, JOIN_SECONDS
                )
                child.kill()
                child.join()
        return [child.exitcode for child in self.children]


def clean_exit(code: int | None) -> bool:
    """A child stopped by our SIGTERM: exit 0 from its handler, or -SIGTERM when the
    signal came before the handler was set (it was still starting)."""
    return code in (0, -signal.SIGTERM)
