"""The worker's LISTEN connection: the work channels' hints wake the worker.

NOTIFY is only a hint (docs/architecture.md): it is lost while the listener is
disconnected, so every (re)connect is followed by a wake-up that makes the worker rescan
the tables. The connection itself is `charter.db.listening.ListenLoop`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from charter.db.listening import ListenLoop


class Listener:
    """Calls `wake()` on every notification and after every (re)connect."""

    def __init__(
        self,
        url: str,
        wake: Callable[[], None],
        *,
        max_backoff: float = 30.0,
        on_connected: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.wake = wake
        self.max_backoff = max_backoff
        self.on_connected = on_connected
        self.connected = asyncio.Event()
        self._loop = ListenLoop(
            url,
            name="charter-worker-listener",
            listen_query="listen_for_work",
            on_notify=lambda _notification: self.wake(),
            on_connected=self._listening,
            first_backoff=0.5,
            max_backoff=max_backoff,
            connected=self.connected,
        )

    @property
    def reconnects(self) -> int:
        """Connections lost so far (each is followed by a reconnect)."""
        return self._loop.losses

    async def run(self) -> None:
        """Listen until cancelled; never returns on connection loss, it reconnects."""
        await self._loop.run()

    def _listening(self, _connects: int) -> None:
        if self.on_connected is not None:
            self.on_connected()
        self.wake()  # whatever was notified while we were away: rescan
