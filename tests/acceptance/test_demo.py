"""`charter up --demo` (the README's first command) shows automation happen, and its
closing hint is a line that works when pasted into a shell."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.processes import charter_env, free_port, wait_healthy

SCRIPT = Path(sys.executable).parent / "charter"


@pytest.fixture
def charter_home() -> Iterator[Path]:
    home = Path(f"/tmp/charter-demo-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _charter() -> list[str]:
    """The installed `charter` script, as `make run` starts it (python -m without one)."""
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "charter"]


def test_the_demo_drives_a_process_through_automation_verifies_it_and_exits(
    empty_database_url: str, charter_home: Path
) -> None:
    env = charter_env(CHARTER_DATABASE_URL=empty_database_url, CHARTER_HOME=str(charter_home))
    port = free_port()
    demo = subprocess.run(
        [*_charter(), "up", "--port", str(port), "--demo", "--exit-after-demo"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    output = demo.stdout
    assert demo.returncode == 0, output + demo.stderr
    lines = output.splitlines()
    verdict = next(line for line in lines if line.startswith("verify "))
    assert verdict.endswith(": ok"), output
    # The person's two events, then the automation actor's: the automatic action, the SLA
    # escalation and three periodic reviews, each with its cause.
    for action in ("open", "submit_onboarding", "start_screening", "escalate_review"):
        assert action in output
    assert output.count("start_review") == 3
    assert "automatic action" in output
    assert "schedule" in output
    assert lines[-1] == "stopped cleanly"  # --exit-after-demo: nothing left running
    assert (charter_home / "automation.key").stat().st_mode & 0o777 == 0o600
    assert (charter_home / "admin-token").stat().st_mode & 0o777 == 0o600

    # The hint names the charter that ran and exports what it needs: pasted into a shell
    # with no CHARTER_* variables and no charter on the PATH, it shows the history once
    # Charter serves that port again.
    hint = next(line for line in lines if line.startswith("Explore: "))
    line = hint.removeprefix("Explore: ")
    assert line.startswith(f"export CHARTER_API_URL=http://127.0.0.1:{port} CHARTER_TOKEN=")
    assert f"&& {_charter()[0]}" in line
    process_id = line.rsplit(" ", 1)[-1]
    serve = subprocess.Popen(
        [*_charter(), "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", serve)
        shell_env = charter_env(PATH="/usr/bin:/bin", COLUMNS="200")
        pasted = subprocess.run(
            ["bash", "-c", line],
            capture_output=True,
            text=True,
            timeout=60,
            env=shell_env,
            check=False,
        )
    finally:
        serve.terminate()
        serve.communicate(timeout=60)
    assert pasted.returncode == 0, pasted.stderr
    assert f"history of {process_id}" in pasted.stdout
    assert pasted.stdout.count("start_review") == 3
