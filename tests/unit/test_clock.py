from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from charter.core.clock import FakeClock, SystemClock


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
