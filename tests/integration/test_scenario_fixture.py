"""The `charter_scenario` fixture, enabled as a project would (docs/testing.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.testing import ScenarioFactory

pytest_plugins = ["charter.testing.pytest_plugin"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "onboarding.json"


@pytest.fixture(scope="session")
def charter_scenario_admin_url(pg_admin_url: str) -> str:
    """The suite's own server (tests/conftest.py), not a throwaway embedded one."""
    return pg_admin_url


def test_the_fixture_gives_scenarios_a_database(charter_scenario: ScenarioFactory) -> None:
    scenario = charter_scenario(
        EXAMPLE, actors={"alice": ["customer"]}, start="2026-06-18T10:00:00Z"
    )
    scenario.act("alice", "open", {"name": "Ada"})
    scenario.act("alice", "submit_onboarding")
    scenario.advance("48h")
    assert scenario.state() == "escalated"
