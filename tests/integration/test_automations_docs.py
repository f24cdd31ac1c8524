"""docs/automations.md is a tutorial CI runs: its `sh` blocks, in order, as one bash
session, with the real `charter` CLI (subprocesses) against a real server (uvicorn on a
free port, this module's database), then the runs it made are checked in the database.

The tutorial uses jq, curl and openssl, as a reader would; the test fails, not skips,
when one is missing, so CI cannot pass without running the tutorial."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from charter.core.clock import SystemClock
from charter.core.config import Settings
from charter.db.database import Database, connect
from tests.integration.apikit import make_harness
from tests.integration.liveserver import free_port, live_server

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "automations.md"
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def shell_blocks(markdown: str) -> list[str]:
    return _SH_BLOCK.findall(markdown)


def test_the_tutorial_has_the_whole_flow_in_sh_blocks() -> None:
    script = "\n".join(shell_blocks(TUTORIAL.read_text(encoding="utf-8")))
    for command in (
        "charter tokens create", "charter machine register", "charter automations create",
        "charter automations plan set", "charter automations schedule add",
        "charter automations webhook add", "/events", "charter machine run",
        "charter runs show", "charter runs cancel", "charter runs retry",
    ):  # fmt: skip
        assert command in script, command


def _runs(database: Database, principal: str) -> list[dict[str, Any]]:
    with connect(database.url) as conn:
        rows = conn.execute(
            "SELECT to_jsonb(r) FROM charter.runs r WHERE principal = %s ORDER BY created_at",
            (principal,),
        ).fetchall()
        steps = conn.execute(
            "SELECT s.run_id::text, s.step_id, s.status FROM charter.run_steps s "
            "JOIN charter.runs r ON r.id = s.run_id WHERE r.principal = %s",
            (principal,),
        ).fetchall()
    runs: list[dict[str, Any]] = []
    for (run,) in rows:
        assert isinstance(run, dict)
        runs.append(run)
    for run in runs:
        run["journal"] = {step: status for run_id, step, status in steps if run_id == run["id"]}
    return runs


def test_the_tutorial_runs_against_a_real_server(database: Database, tmp_path: Path) -> None:
    missing = [tool for tool in ("bash", "jq", "curl", "openssl") if shutil.which(tool) is None]
    assert not missing, f"the tutorial needs {missing} on PATH"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The real clock: the CLI signs DPoP proofs and webhook timestamps with it.
    harness = make_harness(database, settings=Settings(api_url=url), clock=SystemClock())
    script = "\n".join(shell_blocks(TUTORIAL.read_text(encoding="utf-8")))
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("CHARTER_", "OTEL_"))
    }
    env |= {
        # The venv's `charter` first, as an installed one would be.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "CHARTER_API_URL": url,
        "CHARTER_DATABASE_URL": database.url,
        "CHARTER_HOME": str(tmp_path / "home"),
    }
    with live_server(harness.http.app, port=port):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"

    webhook, manual, retried = _runs(database, "tutorial")
    assert webhook["trigger_kind"] == "webhook"
    assert webhook["status"] == "completed"
    assert webhook["input"]["payload"] == {"type": "order.paid", "data": {"order": 42}}
    assert webhook["journal"] == {"check": "completed", "follow-up": "completed"}
    assert manual["status"] == "failed"
    assert manual["error"] == "cancelled by an operator"
    assert manual["journal"] == {}
    assert retried["status"] == "completed"
    assert retried["input"] == manual["input"]
    assert retried["journal"] == {"check": "completed", "follow-up": "completed"}
