"""Scenario tests of workflows in virtual time (docs/testing.md).

`Scenario` drives one workflow on the real engine and the automation worker's own
firing code with an injectable clock; `ScenarioDatabase.scratch()` gives it a throwaway
database; `charter workflows test` runs scenario files (`spec`, `runner`) and
`charter.testing.pytest_plugin` gives pytest the `charter_scenario` fixture.

Only the command line imports this package: nothing of Charter itself stands on it.
"""

from charter.testing.expectations import Expectation
from charter.testing.sandbox import ScenarioDatabase, ScenarioError
from charter.testing.scenario import Scenario, ScenarioFactory

__all__ = ["Expectation", "Scenario", "ScenarioDatabase", "ScenarioError", "ScenarioFactory"]
