"""docs/python.md runs: its Python blocks, in order, as one script, against a real server
(uvicorn on a free port, the module's PostgreSQL, the real clock) with CHARTER_API_URL
and CHARTER_TOKEN set as the tutorial tells its reader to — so the tutorial cannot rot."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.core.clock import SystemClock
from charter.db.database import Database
from tests.integration.apikit import Harness, make_harness
from tests.integration.liveserver import live_server

DOC = Path(__file__).parents[2] / "docs" / "python.md"
BLOCK = re.compile(r"^```python\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    # The tutorial signs with the real time, so the engine runs on the real clock here.
    harness = make_harness(database, clock=SystemClock())
    yield harness
    harness.http.close()


def test_the_tutorial_has_the_steps_it_promises() -> None:
    script = "\n".join(BLOCK.findall(DOC.read_text()))
    for step in (
        "Client.from_env()",
        "deploy_workflow(",
        "add_actor(",
        "submit(",
        "wait_for(",
        "iter_processes(",
        "verify(",
        "AsyncClient",
    ):
        assert step in script, step


def test_the_tutorial_runs_against_a_real_server(
    h: Harness,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocks = BLOCK.findall(DOC.read_text())
    with live_server(h.http.app) as url:
        monkeypatch.setenv("CHARTER_API_URL", url)
        monkeypatch.setenv("CHARTER_TOKEN", h.admin)
        namespace: dict[str, object] = {"__name__": "tutorial"}
        for number, block in enumerate(blocks, 1):
            try:
                exec(compile(block, f"{DOC.name} python block {number}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"python block {number} of {DOC.name} failed") from exc
    printed = capsys.readouterr().out
    assert "tutorial/order 1 False" in printed  # the deployment
    assert "wrong_state 422 False" in printed  # the refusal
    assert "shipped" in printed
    assert re.search(r"order-[0-9a-f]{8}: 3 events verified", printed)
    assert "charter-export/1" in printed
