from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from charter.core.clock import FakeClock, SystemClock, wait_any


def test_system_clock_is_aware_and_defers_to_the_database() -> None:
    clock = SystemClock()
    assert clock.now().tzinfo is not None
    assert clock.now_or_none() is None


def test_fake_clock_wakes_sleepers_in_deadline_order() -> None:
    start = datetime(2026, 6, 1, tzinfo=UTC)
    clock = FakeClock(start)
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    async def scenario() -> None:
        tasks = [asyncio.create_task(sleeper("late", 10)), asyncio.create_task(sleeper("soon", 1))]
        await asyncio.sleep(0)
        clock.advance(1)
        await asyncio.sleep(0)
        assert woke == ["soon"]
        clock.advance(9)
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    assert woke == ["soon", "late"]
    assert clock.now() == start + timedelta(seconds=10)
    assert clock.now_or_none() == clock.now()


def test_fake_clock_refuses_naive_start_and_going_back() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2026, 1, 1))
    clock = FakeClock()
    with pytest.raises(ValueError, match="backwards"):
        clock.set(clock.now() - timedelta(seconds=1))


async def _settle() -> None:
    """Let the tasks started so far run up to their first real wait."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_wait_any_ends_on_the_clock_or_on_an_event_whichever_comes_first() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        stop = asyncio.Event()
        timed = asyncio.create_task(wait_any(clock, 30, stop))
        await _settle()
        assert not timed.done()
        clock.advance(29)
        await _settle()
        assert not timed.done()
        clock.advance(1)
        assert await timed is False  # the time ran out

        woken = asyncio.create_task(wait_any(clock, 30, stop))
        await _settle()
        stop.set()
        assert await woken is True  # the event ended it, the clock never moved
        assert clock._sleepers == []  # the abandoned sleep left nothing behind

        assert await wait_any(clock, 30, stop) is True  # already set: no wait at all
        assert await wait_any(clock, 0, asyncio.Event()) is False

    asyncio.run(scenario())
