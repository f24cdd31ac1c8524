"""`charter up` runs the API and the worker as child processes of its own: a timer fires
through the worker's process, Ctrl-C stops every child, a child that dies stops the
rest (exit 1), and a `kill -9` of `up` leaves no child behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import pytest

from charter.core.ed25519 import SecretKey
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from tests.acceptance.automation_world import (
    SCHEDULED,
    SCHEDULED_DEFINITION,
    AutomationEvent,
    Keys,
    automation_events,
    open_processes,
)
from tests.acceptance.processes import charter_env, free_port, start_charter, wait_healthy


@dataclass
class Up:
    process: subprocess.Popen[str]
    url: str
    api: int  # the API's pid
    worker: int  # the worker's pid
    output: list[str]
    metrics: str  # the worker's /metrics


@pytest.fixture
def charter_home() -> Iterator[Path]:
    home = Path(f"/tmp/charter-upp-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _pid(line: str) -> int:
    found = re.search(r"process (\d+)", line)
    assert found, line
    return int(found.group(1))


@pytest.fixture
def up(empty_database_url: str, charter_home: Path) -> Iterator[Up]:
    port, metrics_port = free_port(), free_port()
    env = charter_env(CHARTER_DATABASE_URL=empty_database_url, CHARTER_HOME=str(charter_home))
    process = start_charter("up", "--port", str(port), "--metrics-port", str(metrics_port), env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        assert process.stdout is not None
        output: list[str] = []
        while not any(line.startswith("worker") for line in output):
            output.append(process.stdout.readline())
        api = _pid(next(line for line in output if line.startswith("api")))
        worker = _pid(next(line for line in output if line.startswith("worker")))
        yield Up(process, url, api, worker, output, f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _gone(pids: list[int], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_running(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_timer_fires_in_the_worker_process_and_ctrl_c_stops_every_child(
    up: Up, empty_database_url: str
) -> None:
    parent = psutil.Process(up.process.pid)
    children = {child.pid for child in parent.children()}
    assert {up.api, up.worker} <= children
    assert len({up.process.pid, up.api, up.worker}) == 3

    customer = SecretKey.generate()
    with (
        Database(empty_database_url, max_size=1) as database,
        database.connection(Role.ENGINE) as conn,
    ):
        Engine(database).registry.deploy(conn, SCHEDULED, SCHEDULED_DEFINITION)
        actors.add_actor(conn, "ada", customer.public_key_hex, ["customer"])
        conn.commit()
    [process_id] = open_processes(
        empty_database_url, Keys(customer, customer), scheduled=[datetime.now(UTC)]
    )
    deadline = time.monotonic() + 30
    fired: list[AutomationEvent] = []
    while not fired and time.monotonic() < deadline:
        fired = [e for e in automation_events(empty_database_url) if e.process_id == process_id]
        time.sleep(0.1)
    assert [e.action for e in fired] == ["tick"]
    assert fired[0].worker is not None
    assert f":{up.worker}:" in fired[0].worker  # fired by the worker's own process
    fires = 'charter_automation_fires_total{kind="scheduled_action",outcome="accepted"} 1.0'
    assert fires in httpx.get(up.metrics, timeout=10).text.splitlines()

    up.process.send_signal(signal.SIGINT)
    out, err = up.process.communicate(timeout=60)
    assert up.process.returncode == 0, err
    assert "stopped cleanly" in out
    assert _gone(list(children), timeout=5), "a child of charter up was left running"


def test_a_killed_worker_stops_everything_and_up_exits_1(up: Up) -> None:
    os.kill(up.worker, signal.SIGKILL)
    _, err = up.process.communicate(timeout=60)
    assert up.process.returncode == 1
    assert (
        f"error: the worker process (pid {up.worker}) was killed by signal 9; stopping everything"
        in err
    )
    assert _gone([up.api], timeout=5), "the API process was left running"


def test_a_kill_9_of_up_leaves_no_child_running(up: Up) -> None:
    up.process.kill()
    up.process.communicate(timeout=60)
    assert _gone([up.api, up.worker]), "a child outlived charter up"
