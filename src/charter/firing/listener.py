"""The worker's LISTEN connection: a hint channel that reconnects with backoff.

NOTIFY is only a hint (docs/architecture.md): it is lost while the listener is disconnected, so
every (re)connect is followed by a wake-up that makes the worker rescan the tables.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from charter.db.database import conninfo
from charter.db.queries import query

log = logging.getLogger(__name__)


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
        self.reconnects = 0

    async def run(self) -> None:
        """Listen until cancelled; never returns on connection loss, it reconnects."""
        backoff = 0.5
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    conninfo(self.url, application_name="charter-worker-listener"),
                    autocommit=True,
                    connect_timeout=10,
                )
            except psycopg.OperationalError as exc:
                log.warning("listener cannot connect (%s); retrying in %.1f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(self.max_backoff, backoff * 2)
                continue
            try:
                async with conn:
                    await conn.execute(query("listen_for_work"))
                    backoff = 0.5
                    self.connected.set()
                    if self.on_connected is not None:
                        self.on_connected()
                    self.wake()  # whatever was notified while we were away: rescan
                    async for _ in conn.notifies():
                        self.wake()
            except psycopg.OperationalError as exc:
                log.warning("listener lost its connection (%s); reconnecting", exc)
            finally:
                self.connected.clear()
            self.reconnects += 1
            await asyncio.sleep(backoff)
            backoff = min(self.max_backoff, backoff * 2)
