"""The `charter_scenario` pytest fixture (docs/testing.md).

Enable it in a project's top-level conftest.py (or a test module):

    pytest_plugins = ["charter.testing.pytest_plugin"]

Opt-in on purpose, not a `pytest11` entry point: an entry point would load this module
— the engine, the worker, psycopg — into every pytest run of every environment where
Charter is installed, Charter's own suite included, and a fixture of its would be
offered to projects that never asked for it.

The database: one scratch database per test session, on the PostgreSQL server that
`CHARTER_TEST_ADMIN_URL` names (a superuser URL), else on a throwaway embedded server;
dropped when the session ends. Override the `charter_scenario_admin_url` fixture to
choose the server another way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

import pytest

from charter.testing.sandbox import ScenarioDatabase
from charter.testing.scenario import DEFAULT_START, Definition, Scenario, ScenarioFactory

ADMIN_URL_VARIABLE = "CHARTER_TEST_ADMIN_URL"


@pytest.fixture(scope="session")
def charter_scenario_admin_url() -> str | None:
    """The server scenarios' scratch database is made on; None: a throwaway embedded one."""
    return os.environ.get(ADMIN_URL_VARIABLE) or None


@pytest.fixture(scope="session")
def charter_scenario_database(
    charter_scenario_admin_url: str | None,
) -> Iterator[ScenarioDatabase]:
    """The session's scratch database, shared by every scenario of the session."""
    with ScenarioDatabase.scratch(charter_scenario_admin_url) as database:
        yield database


@pytest.fixture
def charter_scenario(charter_scenario_database: ScenarioDatabase) -> ScenarioFactory:
    """Make `Scenario`s on the session's scratch database:
    `charter_scenario("workflow.json", actors={"alice": ["customer"]}, start="...")`."""

    def make(
        definition: Definition,
        *,
        actors: Mapping[str, Sequence[str]],
        start: datetime | str = DEFAULT_START,
        workflows: Mapping[str, Definition] | None = None,
        process: str | None = None,
    ) -> Scenario:
        return Scenario(
            definition,
            actors=actors,
            start=start,
            database=charter_scenario_database,
            workflows=workflows,
            process=process,
        )

    return make
