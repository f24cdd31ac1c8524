"""`charter up --demo` (the README's first command) shows automation happen."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.processes import charter_env, free_port, start_charter


@pytest.fixture
def charter_home() -> Iterator[Path]:
    home = Path(f"/tmp/charter-demo-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_the_demo_drives_a_process_through_automation_and_verifies_it(
    empty_database_url: str, charter_home: Path
) -> None:
    env = charter_env(CHARTER_DATABASE_URL=empty_database_url, CHARTER_HOME=str(charter_home))
    process = start_charter("up", "--port", str(free_port()), "--demo", env=env)
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert process.poll() is None, "charter up exited:\n" + "".join(seen)
                continue
            seen.append(line)
            if line.startswith("verify "):
                break
        else:
            pytest.fail("the demo did not finish:\n" + "".join(seen))
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    output = "".join(seen)
    assert ": ok" in seen[-1], output
    # The person's two events, then the automation actor's: the automatic action, the SLA
    # escalation and three periodic reviews, each with its cause.
    for action in ("open", "submit_onboarding", "start_screening", "escalate_review"):
        assert action in output
    assert output.count("start_review") == 3
    assert "automatic action" in output
    assert "schedule" in output
    assert process.returncode == 0
    assert (charter_home / "automation.key").stat().st_mode & 0o777 == 0o600
    assert (charter_home / "admin-token").stat().st_mode & 0o777 == 0o600
