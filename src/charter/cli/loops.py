"""The event loop the long-running commands run on: uvloop where it is installed.

The API server and the worker spend a large share of their CPU in the event loop itself
(waking on sockets, running callbacks, hopping to and from executor threads); uvloop runs
that loop in C on libuv and takes a measurable part of it off every request and wake-up.
It is a dependency wherever it builds; elsewhere (Windows) the standard loop runs the
same code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None for asyncio's default."""
    try:
        import uvloop
    except ImportError:  # a platform uvloop does not build on
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the fastest loop available."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
