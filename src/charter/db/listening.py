"""One LISTEN connection that stays: every listener of Charter (the worker's wake-ups,
the API's long-poll claims, the live stream) runs on this loop.

It connects in autocommit, runs its LISTEN statements, hands each notification on, and
when the connection is lost reconnects with a capped exponential backoff that starts
again from the beginning once a LISTEN is back in place. Notifications sent while it
was away are lost (hints are hints: the tables are the truth), so `on_connected` tells
its owner each time it listens again, for a rescan. Every loss and every recovery is
logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from charter.core.clock import Clock, SystemClock
from charter.db.database import conninfo
from charter.db.queries import query

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10


class ListenLoop:
    """LISTENs with `listen_query` (a named query) as `name`; `on_notify` gets every
    notification, `on_connected(n)` runs each time the n-th LISTEN is in place, and
    `on_lost()` each time the connection is gone."""

    def __init__(
        self,
        url: str,
        *,
        name: str,
        listen_query: str,
        on_notify: Callable[[psycopg.Notify], object],
        on_connected: Callable[[int], object] | None = None,
        on_lost: Callable[[], object] | None = None,
        first_backoff: float = 0.5,
        max_backoff: float = 30.0,
        connected: asyncio.Event | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.url = url
        self.name = name
        self.listen_query = listen_query
        self.on_notify = on_notify
        self.on_connected = on_connected
        self.on_lost = on_lost
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.connected = connected if connected is not None else asyncio.Event()
        self.clock = clock or SystemClock()
        self.connects = 0  # LISTENs put in place, the first included
        self.losses = 0  # connections lost after their LISTEN was in place

    async def run(self) -> None:
        """Listen until cancelled; a lost connection is reconnected, never raised."""
        backoff = self.first_backoff
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    conninfo(self.url, application_name=self.name),
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT_SECONDS,
                )
            except psycopg.OperationalError as exc:
                log.warning("%s cannot connect (%s); retrying in %.1f s", self.name, exc, backoff)
                await self.clock.sleep(backoff)
                backoff = min(self.max_backoff, backoff * 2)
                continue
            try:
                async with conn:
                    await conn.execute(query(self.listen_query))
                    backoff = self.first_backoff
                    self.connects += 1
                    if self.connects > 1:
                        log.info("%s listens again (connection %d)", self.name, self.connects)
                    self.connected.set()
                    if self.on_connected is not None:
                        self.on_connected(self.connects)
                    async for notification in conn.notifies():
                        self.on_notify(notification)
            except psycopg.OperationalError as exc:
                log.warning(
                    "%s lost its connection (%s); reconnecting in %.1f s", self.name, exc, backoff
                )
            finally:
                self.connected.clear()
            self.losses += 1
            if self.on_lost is not None:
                self.on_lost()
            await self.clock.sleep(backoff)
            backoff = min(self.max_backoff, backoff * 2)
