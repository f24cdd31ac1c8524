"""The sequencer `charter serve` runs, in a child process of its own: it reports to the
API's /metrics, dies with its parent, is started again when killed, and stops cleanly on
a Ctrl-C that reaches the whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import pytest

from charter.db.database import connect
from tests.acceptance.logworld import LogWorld, append_one, scratch_world
from tests.acceptance.processes import free_port, start_charter, wait_healthy


@pytest.fixture
def world(pg_admin_url: str, template_database: str, tmp_path: Path) -> Iterator[LogWorld]:
    with scratch_world(pg_admin_url, template_database, tmp_path / "home", "charter_logp") as world:
        yield world


def _sequencer_pid(parent: int, timeout: float = 60) -> int:
    """The pid of the spawned sequencer child of `parent` (not its resource tracker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in _children(parent):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"multiprocessing-fork" in cmdline:
                return child
        time.sleep(0.1)
    raise AssertionError(f"process {parent} has no sequencer child")


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        children += [int(c) for c in text]
    return children


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited; its (dead) parent has not reaped it
            return True
        time.sleep(0.05)
    return False


def _sequencer_sessions(url: str) -> int:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'charter-sequencer'"
            " AND datname = current_database()"
        ).fetchone()
    return cast(int, row[0]) if row else 0


def _metric(api: str, name: str, want: float, timeout: float = 60) -> None:
    line = f"{name} {want}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if line in httpx.get(f"{api}/metrics").text.splitlines():
            return
        time.sleep(0.1)
    raise AssertionError(f"/metrics never said {line!r}")


def _append(world: LogWorld, count: int) -> None:
    actor, version, (process_id,) = world.seed(1)
    with connect(world.url) as conn:
        for _ in range(count):
            append_one(conn, actor, version, process_id)
        conn.commit()


def test_a_killed_serve_takes_its_sequencer_with_it(world: LogWorld) -> None:
    _append(world, 2)
    port = free_port()
    server = start_charter("serve", "--port", str(port), env=world.env())
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server)
        sequencer = _sequencer_pid(server.pid)
        world.wait_drained(server)
        assert _sequencer_sessions(world.url) == 1
        server.kill()
        server.wait(timeout=30)
        assert _gone(sequencer, timeout=15), "the sequencer outlived the process that ran it"
        deadline = time.monotonic() + 15
        while _sequencer_sessions(world.url) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _sequencer_sessions(world.url) == 0  # the leader lock is free again
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate(timeout=30)


def test_a_killed_sequencer_is_started_again_and_its_figures_reach_metrics(
    world: LogWorld,
) -> None:
    _append(world, 3)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    server = start_charter("serve", "--port", str(port), env=world.env(CHARTER_LOG_PUBLIC="1"))
    try:
        wait_healthy(api, server)
        world.wait_drained(server)
        _metric(api, "charter_log_size", 3.0)
        os.kill(_sequencer_pid(server.pid), signal.SIGKILL)
        _append(world, 2)
        world.wait_drained(server, timeout=120)
        assert world.check_consistent()
        _metric(api, "charter_log_size", 5.0)
        # The figures outlive the killed process: the counter goes on from 3.
        _metric(api, "charter_log_entries_integrated_total", 5.0)
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert "log sequencer process exited with code -9; starting it again" in err


def test_ctrl_c_to_the_process_group_stops_serve_and_its_sequencer_cleanly(
    world: LogWorld,
) -> None:
    _append(world, 1)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "charter", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=world.env(),
        start_new_session=True,  # its own process group, as a terminal's job is
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server)
        sequencer = _sequencer_pid(server.pid)
        world.wait_drained(server)
        os.killpg(server.pid, signal.SIGINT)
        out, err = server.communicate(timeout=90)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.communicate(timeout=30)
    assert server.returncode == 0, err
    assert "stopped cleanly" in out
    assert "Traceback" not in err
    assert _gone(sequencer, timeout=5)


def test_every_api_process_of_serve_workers_reports_the_log(world: LogWorld) -> None:
    _append(world, 2)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    server = start_charter("serve", "--port", str(port), "--workers", "2", env=world.env())
    try:
        wait_healthy(api, server)
        world.wait_drained(server)
        # Each scrape lands on one of the two API processes: all of them must say it.
        for _ in range(8):
            with httpx.Client() as fresh:  # a new connection, maybe another process
                assert "charter_log_size 2.0" in fresh.get(f"{api}/metrics").text.splitlines()
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
