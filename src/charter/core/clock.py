"""Injectable time.

Time-based logic takes a `Clock`; tests pass a `FakeClock` and move it by hand, so
timers and leases are exact without real waiting. The database clock rules in SQL:
queries take `coalesce(%(now)s, now())` with `now_or_none()`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""

    def now_or_none(self) -> datetime | None:
        """The time to pass to SQL: None lets the database clock decide."""

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""


class SystemClock:
    """The real clock; SQL uses the database's own `now()`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def now_or_none(self) -> datetime | None:
        return None

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told; sleepers wake when it passes their deadline."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start")
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    def now_or_none(self) -> datetime | None:
        return self._now

    async def sleep(self, seconds: float) -> None:
        deadline = self._now + timedelta(seconds=max(0.0, seconds))
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((deadline, future))
        try:
            await future
        finally:
            self._sleepers = [(d, f) for d, f in self._sleepers if f is not future]

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move time forward and wake every sleeper whose deadline has passed."""
        self._now += timedelta(seconds=seconds, **delta)
        for deadline, future in list(self._sleepers):
            if deadline <= self._now and not future.done():
                future.set_result(None)
        return self._now

    def set(self, when: datetime) -> datetime:
        if when < self._now:
            raise ValueError("FakeClock does not go backwards")
        return self.advance((when - self._now).total_seconds())


async def wait_any(clock: Clock, seconds: float | None, *events: asyncio.Event) -> bool:
    """Wait until one of `events` is set or `seconds` of `clock`'s time have passed
    (`None`: no time limit). True when an event ended the wait, False on the time.

    A sleep raced against a stop or wake-up event, on the injectable clock, so a test
    moves time instead of waiting for it."""
    if any(event.is_set() for event in events):
        return True
    if seconds is not None and seconds <= 0:
        return False
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    sleeper = asyncio.ensure_future(clock.sleep(seconds)) if seconds is not None else None
    pending = {*waiters, *([sleeper] if sleeper is not None else [])}
    try:
        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return any(event.is_set() for event in events)
