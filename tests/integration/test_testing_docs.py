"""docs/testing.md holds: its worked example is the shipped scenario and fails as shown
when the deadline is longer, the output it shows is the shipped files', and its Python
blocks run (against a real PostgreSQL)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from charter.db.database import Database
from charter.testing import Scenario, ScenarioDatabase
from charter.testing.runner import run_spec
from charter.testing.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "testing.md").read_text()
SHIPPED = ROOT / "examples" / "scenarios"
EXAMPLE = "examples/scenarios/onboarding-sla-escalation.scenario.json"
LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(scope="module")
def scenarios(database: Database) -> ScenarioDatabase:
    return ScenarioDatabase(database)


def fenced(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```\n", DOC, re.MULTILINE | re.DOTALL)


def output(starting: str) -> list[str]:
    """The lines of the one plain fenced block that starts with `starting`."""
    [block] = [b for b in fenced("") if b.startswith(starting)]
    return block.splitlines()


def test_the_worked_example_is_the_shipped_scenario() -> None:
    [block] = fenced("json scenario")
    assert json.loads(block) == json.loads((ROOT / EXAMPLE).read_text())


def test_the_output_shown_is_the_shipped_scenarios() -> None:
    files = sorted(f"examples/scenarios/{p.name}" for p in SHIPPED.glob("*.json"))
    shown = output("PASS ")
    assert shown == [*(f"PASS {name}" for name in files), f"{len(files)} passed, 0 failed"]


def test_a_longer_deadline_fails_as_shown(tmp_path: Path, scenarios: ScenarioDatabase) -> None:
    onboarding = json.loads((ROOT / "examples" / "onboarding.json").read_text())
    [deadline] = [s for s in onboarding["actions"]["start_screening"]["schedule"]
                  if s["id"] == "screening-deadline"]  # fmt: skip
    deadline["in"] = "72h"
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "onboarding.json").write_text(json.dumps(onboarding))
    spec = tmp_path / "scenarios" / "case.scenario.json"
    spec.write_text((ROOT / EXAMPLE).read_text())
    result = run_spec(load_spec(spec, EXAMPLE), scenarios)
    assert [result.line(), "0 passed, 1 failed"] == output("FAIL ")


def test_the_python_blocks_run(
    pg_admin_url: str, monkeypatch: pytest.MonkeyPatch, scenarios: ScenarioDatabase
) -> None:
    monkeypatch.chdir(ROOT)
    scenario_block, shared_block, conftest_block, fixture_block = fenced("python")
    assert conftest_block.strip() == 'pytest_plugins = ["charter.testing.pytest_plugin"]'
    exec(compile(scenario_block, "docs/testing.md", "exec"), {})
    shared = shared_block.replace(LOCAL_SERVER, pg_admin_url)
    exec(compile(shared, "docs/testing.md", "exec"), {})
    defined: dict[str, Any] = {}
    exec(compile(fixture_block, "docs/testing.md", "exec"), defined)
    defined["test_the_deadline_escalates"](
        lambda *args, **kwargs: Scenario(*args, database=scenarios, **kwargs)
    )
