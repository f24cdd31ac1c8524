"""Run `charter` as a real process, as a user would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

import httpx


def charter_env(**overrides: str | None) -> dict[str, str]:
    """The environment for a child `charter`: this interpreter's path, Charter vars cleared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    env.pop("AUTOMATION_ACTOR_SK", None)
    for key, value in overrides.items():
        if value is not None:
            env[key] = value
    return env


def run_charter(
    *args: str, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env),
        check=False,
    )


def start_charter(*args: str, env: Mapping[str, str]) -> subprocess.Popen[str]:
    # With the fault handler on, SIGABRT makes the child print every thread's stack:
    # `stopped` uses it to say where a child that ignores SIGTERM is stuck.
    return subprocess.Popen(
        [sys.executable, "-m", "charter", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONFAULTHANDLER": "1"},
    )


def stopped(process: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """SIGTERM, then the child's stdout and stderr once it exits; one still running after
    `timeout` is aborted and the test fails with the stacks it printed."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, err = process.communicate(timeout=30)
        raise AssertionError(
            f"{process.args!r} did not exit within {timeout:g} s of SIGTERM; "
            f"its stderr ends:\n{err[-6000:]}"
        ) from None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[str], timeout: float = 120) -> httpx.Response:
    """Poll /healthz until it answers 200; fail early if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"charter exited with {process.returncode}:\n{out}\n{err}")
        try:
            response = httpx.get(f"{url}/healthz", timeout=2)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url}/healthz did not become healthy in {timeout} s")
