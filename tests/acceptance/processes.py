"""Run `charter` as a real process, as a user would."""

from __future__ import annotations

import os
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
    return subprocess.Popen(
        [sys.executable, "-m", "charter", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
    )


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
