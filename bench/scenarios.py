"""Scenario tests in virtual time (docs/testing.md): the wall time a scenario takes per
simulated year, on the real engine and the worker's firing pass.

Three scenarios: the onboarding example approved and then reviewed yearly (one event a
year), the same with a daily reminder (365 events a year: the clock stops at every
occurrence), and the four shipped scenario files run as `charter workflows test` runs
them. Each is repeated; median and min-max of the wall time, and that time divided by
the years simulated.

Run: python bench/scenarios.py [--runs 5] [--years 10]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.testing import Scenario, ScenarioDatabase
from charter.testing.runner import run_spec
from charter.testing.spec import load_spec
from common import print_results, scratch_database

ROOT = Path(__file__).resolve().parents[1]
ONBOARDING = ROOT / "examples" / "onboarding.json"
SHIPPED = sorted((ROOT / "examples" / "scenarios").glob("*.scenario.json"))
ACTORS = {"alice": ["customer"], "ann": ["analyst"]}
START = "2026-06-18T10:00:00Z"
YEAR = timedelta(days=365)


def with_daily_reminder() -> JsonObject:
    """The onboarding example whose approval also starts a daily reminder."""
    definition: JsonObject = json.loads(ONBOARDING.read_text())
    actions = definition["actions"]
    assert isinstance(actions, dict)
    approve = actions["approve"]
    assert isinstance(approve, dict)
    approve["schedule"] = [{"id": "reminder", "action": "remind", "every": "1d", "data": {}}]
    actions["remind"] = {"type": "update", "role": "AUTOMATION", "from": "*",
                         "mutate": {"$inc": {"reminders": 1}}}  # fmt: skip
    return definition


def reviewed_for(definition: JsonObject | Path, years: int) -> Callable[[ScenarioDatabase], int]:
    """A scenario that approves a customer, then lets `years` pass; its automated events."""

    def run(database: ScenarioDatabase) -> int:
        scenario = Scenario(definition, actors=ACTORS, start=START, database=database)
        scenario.act("alice", "open", {"name": "Ada"})
        scenario.act("alice", "submit_onboarding")
        scenario.act("ann", "approve")
        scenario.advance(years * YEAR)
        return len(scenario.events()) - 3  # all but the three acts

    return run


def shipped_files(database: ScenarioDatabase) -> int:
    results = [run_spec(load_spec(path), database) for path in SHIPPED]
    assert all(result.passed for result in results), [r.line() for r in results]
    return sum(sum(result.events.values()) for result in results)


def timed(
    run: Callable[[ScenarioDatabase], int], database: ScenarioDatabase, runs: int
) -> tuple[list[float], int]:
    seconds: list[float] = []
    events = 0
    run(database)  # warm: the deployment, the actors, the caches
    for _ in range(runs):
        began = time.perf_counter()
        events = run(database)
        seconds.append(time.perf_counter() - began)
    return seconds, events


def main(args: argparse.Namespace) -> None:
    cases: list[tuple[str, float, Callable[[ScenarioDatabase], int]]] = [
        (f"onboarding, yearly review, {args.years} years", args.years,
         reviewed_for(ONBOARDING, args.years)),
        (f"+ daily reminder, {args.years} years", args.years,
         reviewed_for(with_daily_reminder(), args.years)),
        (f"the {len(SHIPPED)} shipped scenario files", _years_shipped(), shipped_files),
    ]  # fmt: skip
    rows: list[dict[str, object]] = []
    with scratch_database("scenarios") as url, Database(url, max_size=4) as db:
        database = ScenarioDatabase(db)
        for name, years, run in cases:
            seconds, events = timed(run, database, args.runs)
            median = statistics.median(seconds)
            rows.append({
                "scenario": name,
                "simulated years": f"{years:.2f}",
                "events fired": events,
                "wall ms median (min-max)":
                    f"{median * 1000:,.0f} ({min(seconds) * 1000:,.0f}-{max(seconds) * 1000:,.0f})",
                "wall ms per simulated year": f"{median * 1000 / years:,.1f}",
            })  # fmt: skip
    title = f"Scenario tests in virtual time ({args.runs} runs; median (min-max))"
    print_results(title, rows, width=140)


def _years_shipped() -> float:
    """The virtual time the shipped files simulate, in years."""
    total = timedelta(0)
    for path in SHIPPED:
        for step in load_spec(path).steps:
            total += getattr(step, "delta", timedelta(0))
    return total / YEAR


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each scenario (>= 3)")
    parser.add_argument("--years", type=int, default=10, help="years each review scenario spans")
    args = parser.parse_args()
    if args.runs < 3:
        parser.error("--runs must be at least 3")
    return args


if __name__ == "__main__":
    main(parse())
