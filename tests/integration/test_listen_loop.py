"""The one LISTEN loop every listener runs on, against a real PostgreSQL: notifications
arrive, a terminated backend is reconnected and re-listened, and the owner hears of it."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest

from charter.core.clock import FakeClock
from charter.db.listening import ListenLoop

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _until(condition: object, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the condition did not hold in time")
        await asyncio.sleep(0.01)


def _notify(url: str, payload: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('scheduled_actions_changed', %s)", (payload,))


def _terminate(url: str, application_name: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    return int(row[0]) if row else 0


async def test_notifications_arrive_and_a_lost_connection_listens_again(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[str] = []
    connects: list[int] = []
    losses: list[bool] = []
    clock = FakeClock()
    loop = ListenLoop(
        database_url,
        name="charter-test-listener",
        listen_query="listen_for_work",
        on_notify=lambda note: received.append(note.payload),
        on_connected=connects.append,
        on_lost=lambda: losses.append(True),
        clock=clock,
    )
    task = asyncio.create_task(loop.run())
    try:
        await asyncio.wait_for(loop.connected.wait(), 10)
        assert connects == [1]
        await asyncio.to_thread(_notify, database_url, "before")
        await _until(lambda: received == ["before"])

        with caplog.at_level(logging.INFO, logger="charter.db.listening"):
            assert await asyncio.to_thread(_terminate, database_url, "charter-test-listener") == 1
            await _until(lambda: losses == [True])
            assert not loop.connected.is_set()
            # The backoff is the injectable clock's: nothing reconnects until it moves.
            await asyncio.sleep(0.05)
            assert connects == [1]
            clock.advance(loop.first_backoff)
            await asyncio.wait_for(loop.connected.wait(), 10)
        assert connects == [1, 2]
        assert "charter-test-listener lost its connection" in caplog.text
        assert "charter-test-listener listens again (connection 2)" in caplog.text

        await asyncio.to_thread(_notify, database_url, "after")
        await _until(lambda: received == ["before", "after"])
        assert (loop.connects, loop.losses) == (2, 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_server_that_cannot_be_reached_is_retried_with_a_growing_backoff() -> None:
    clock = FakeClock()
    loop = ListenLoop(
        "postgresql://postgres@127.0.0.1:1/nothing",
        name="charter-test-unreachable",
        listen_query="listen_for_work",
        on_notify=lambda note: None,
        first_backoff=0.5,
        max_backoff=2.0,
        clock=clock,
    )
    task = asyncio.create_task(loop.run())
    try:
        waits: list[float] = []
        for _ in range(4):
            # The next sleeper: one whose deadline lies ahead of the clock.
            await _until(lambda: any(d > clock.now() for d, _ in clock._sleepers))
            deadline = max(d for d, _ in clock._sleepers)
            waits.append((deadline - clock.now()).total_seconds())
            clock.set(deadline)
        assert waits == [0.5, 1.0, 2.0, 2.0]
        assert loop.connects == 0
        assert not loop.connected.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
