"""`charter up` and `charter db` as real processes."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.acceptance.processes import (
    charter_env,
    free_port,
    run_charter,
    start_charter,
    wait_healthy,
)


@pytest.fixture
def charter_home() -> Iterator[Path]:
    # Short: the embedded server's Unix socket lives here.
    home = Path(f"/tmp/charter-up-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_up_with_a_database_url_serves_health_and_stops_cleanly(
    empty_database_url: str, stop_signal: signal.Signals
) -> None:
    port = free_port()
    process = start_charter(
        "up", "--port", str(port), env=charter_env(CHARTER_DATABASE_URL=empty_database_url)
    )
    try:
        health = wait_healthy(f"http://127.0.0.1:{port}", process)
        body = health.json()
        assert body["ok"] is True
        assert body["schema_version"] >= 5
        console = httpx.get(f"http://127.0.0.1:{port}/console/", timeout=10)
        assert console.status_code == 200
        assert "Charter console" in console.text
    finally:
        process.send_signal(stop_signal)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"http://127.0.0.1:{port}" in out
    assert f"http://127.0.0.1:{port}/console/" in out
    assert "stopped cleanly" in out


def test_up_on_the_embedded_server_starts_and_stops_it(charter_home: Path) -> None:
    port = free_port()
    env = charter_env(CHARTER_HOME=str(charter_home))
    process = start_charter("up", "--port", str(port), env=env)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
        postmaster = (charter_home / "pgdata" / "postmaster.pid").read_text().split()[0]
        assert psutil.pid_exists(int(postmaster))
        # While it runs, another command reuses the same server.
        status = run_charter("db", "status", env=env)
        assert status.returncode == 0, status.stderr
        assert "0 pending" in status.stdout
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    deadline = time.monotonic() + 30
    while psutil.pid_exists(int(postmaster)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(int(postmaster)), "the embedded server was left running"


def test_up_refuses_a_port_in_use(empty_database_url: str) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_charter(
            "up", "--port", str(port), env=charter_env(CHARTER_DATABASE_URL=empty_database_url)
        )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: 127.0.0.1:{port} is in use; choose another with --port"
    )


def test_db_migrate_twice_then_status(empty_database_url: str) -> None:
    env = charter_env(CHARTER_DATABASE_URL=empty_database_url)
    first = run_charter("db", "migrate", env=env)
    assert first.returncode == 0, first.stderr
    assert "applied 0001_roles_and_schema" in first.stdout
    second = run_charter("db", "migrate", env=env)
    assert second.returncode == 0, second.stderr
    assert "nothing to apply" in second.stdout
    status = run_charter("db", "status", env=env)
    assert "0 pending" in status.stdout


def test_an_unreachable_database_is_one_clear_line() -> None:
    env = charter_env(CHARTER_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    result = run_charter("db", "migrate", env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: connection failed")
