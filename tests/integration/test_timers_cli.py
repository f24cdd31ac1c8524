"""`charter timers` after timers fired: a one-shot timer that fired reads `done`, a
repeating schedule past its bound reads `exhausted` (the API's status is `exhausted` for
both), and `--status done` finds the fired ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.cli import remote
from charter.core.config import Settings
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.firing.batch import Firer
from charter.firing.keys import ensure_automation_actor
from tests.integration.apikit import Harness, make_harness
from tests.integration.clikit import run_charter

FIRED = "ops/fired-timers"
DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "schedule": [
                {"id": "once", "action": "remind", "in": "1h", "data": {}},
                {"id": "twice", "action": "remind", "every": "1h", "count": 2,
                 "data": {}},
            ],
        },
        "remind": {"role": "AUTOMATION", "from": "open", "to": "open"},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def h(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy(FIRED, DEFINITION)
    clerk = harness.keys["clerk"]
    harness.accept(sign(harness.envelope(clerk, "fired-1", "create", workflow=FIRED), clerk))
    home: Path = tmp_path_factory.mktemp("automation")
    key = ensure_automation_actor(Settings(home=home), database)
    firer = Firer(database, harness.engine, key, "test-worker", harness.clock)
    for _ in range(3):  # 1 h: once and twice; 2 h: twice again, its last
        harness.clock.advance(hours=1)  # type: ignore[attr-defined]
        firer.fire_due()
    yield harness
    harness.http.close()


@pytest.fixture
def cli(h: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(remote, "client", lambda: h.client())

    return lambda *args: run_charter(monkeypatch, capsys, *args)


def _row(out: str, word: str) -> str:
    (line,) = [line for line in out.splitlines() if word in line]
    return line


def test_the_api_calls_both_exhausted(cli: Any) -> None:
    body = json.loads(cli("timers", "fired-1", "--json").out)
    rows = {row["schedule_id"]: row for row in body["scheduled"]["items"]}
    assert rows["once"]["status"] == rows["twice"]["status"] == "exhausted"


def test_a_fired_one_shot_timer_reads_done_and_a_spent_schedule_exhausted(cli: Any) -> None:
    table = cli("timers", "fired-1")
    assert table.code == 0, table.err
    lines = [line for line in table.out.splitlines() if "remind" in line]
    assert len(lines) == 2
    statuses = sorted(
        next(cell.strip() for cell in line.split("│") if cell.strip() in ("done", "exhausted"))
        for line in lines
    )
    assert statuses == ["done", "exhausted"]


def test_status_done_finds_the_fired_rows(cli: Any) -> None:
    found = json.loads(cli("timers", "--status", "done", "--json").out)
    assert len(found["scheduled"]["items"]) == 2
    assert found["queue"]["items"] == []
