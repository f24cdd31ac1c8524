"""Stop a long-running command on SIGINT/SIGTERM without touching a lock in the handler.

A Python signal handler runs in the main thread between two bytecodes, possibly while
that thread is inside `threading.Event.wait` holding the event's internal lock. A handler
that calls `event.set()` then waits for a lock its own thread holds: the process hangs
for ever. Here the handler only puts the signal number on a `queue.SimpleQueue` (whose
`put` is safe to call from a signal handler, it takes no Python-level lock), and a daemon
thread sets the event.
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Iterable
from types import FrameType


def stop_on_signals(
    stop: threading.Event,
    signums: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> None:
    """Set `stop` soon after any of `signums` arrives (call from the main thread)."""
    received: queue.SimpleQueue[int] = queue.SimpleQueue()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.put(signum)

    def relay() -> None:
        received.get()
        stop.set()

    threading.Thread(target=relay, name="charter-stop-signal", daemon=True).start()
    for signum in signums:
        signal.signal(signum, on_signal)
