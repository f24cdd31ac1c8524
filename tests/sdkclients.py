"""Both SDK clients behind one blocking face, so that one test covers `Client` and
`AsyncClient`: `@pytest.mark.parametrize("kind", KINDS)` and `with connect(kind, url,
token) as client:`.

The asyncio client runs on an event loop in a thread of its own; each call is sent to it
and waited for, so a test may call from several threads at once (a waiter and a writer)
and both calls run concurrently on that loop, as the blocking client's would."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, Self, TypeVar, cast

from charter.sdk import AsyncClient, Client

T = TypeVar("T")
KINDS = ("sync", "async")


def connect(kind: str, *args: Any, **kwargs: Any) -> Client:
    """A `Client(*args, **kwargs)`, or for `async` an `AsyncClient` of the same arguments
    behind the blocking face (typed as a `Client`: it answers the same calls)."""
    if kind == "sync":
        return Client(*args, **kwargs)
    assert kind == "async", kind
    return cast(Client, Blocking(AsyncClient(*args, **kwargs)))


class Blocking:
    """An AsyncClient called from blocking code: its coroutines are awaited and its
    async iterators walked on the loop, `with` is `async with`, `close` is `aclose`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._client, name)
        if inspect.iscoroutinefunction(member):
            return lambda *args, **kwargs: self._run(member(*args, **kwargs))
        if name.startswith("iter_"):
            return lambda *args, **kwargs: self._walk(member(*args, **kwargs))
        return member

    def __enter__(self) -> Self:
        self._run(self._client.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._run(self._client.__aexit__(*exc))
        finally:
            self._stop()

    def close(self) -> None:
        try:
            self._run(self._client.aclose())
        finally:
            self._stop()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _walk(self, items: AsyncIterator[T]) -> Iterator[T]:
        async def step() -> T:
            return await anext(items)

        while True:
            try:
                yield self._run(step())
            except StopAsyncIteration:
                return

    def _stop(self) -> None:
        """Cancel what still runs on the loop, so that a thread blocked on one of its
        calls (a waiter a failed test left behind) gets CancelledError instead of
        waiting for ever, then stop and close the loop."""
        if self._loop.is_closed():
            return

        async def cancel_the_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_the_rest(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
