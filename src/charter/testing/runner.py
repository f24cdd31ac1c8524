"""Running scenario files: each one's steps on a `Scenario`, until the first that fails.

Every file is one scenario with processes of its own; several files share one database
(`ScenarioDatabase`), one after the other. A step fails when an expectation does not
hold, when an act is refused without `expect_error` (or accepted, or refused otherwise,
with it), or when the scenario cannot go on (`ScenarioError`); the steps after it do
not run. Steps are numbered from 1.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.testing.sandbox import ScenarioDatabase, ScenarioError, slug
from charter.testing.scenario import DEFAULT_START, Scenario
from charter.testing.spec import Act, Advance, Spec, Step


@dataclass(frozen=True)
class Failure:
    step: int  # from 1
    pointer: str  # the step in the file
    message: str


@dataclass
class ScenarioResult:
    file: str
    steps: int  # in the file
    ran: int = 0  # steps that ran, the failed one included
    failure: Failure | None = None
    process: str | None = None
    started: str | None = None  # virtual time
    ended: str | None = None
    seconds: float = 0.0  # wall time
    events: dict[str, int] = field(default_factory=dict)  # per process of the scenario

    @property
    def passed(self) -> bool:
        return self.failure is None

    def line(self) -> str:
        if self.failure is None:
            return f"PASS {self.file}"
        return f"FAIL {self.file}: step {self.failure.step}: {self.failure.message}"

    def to_json(self) -> JsonObject:
        failure: JsonObject | None = None
        if self.failure is not None:
            failure = {"step": self.failure.step, "pointer": self.failure.pointer,
                       "message": self.failure.message}  # fmt: skip
        return {
            "file": self.file,
            "status": "pass" if self.passed else "fail",
            "steps": self.steps,
            "ran": self.ran,
            "failure": failure,
            "process": self.process,
            "virtual_time": {"start": self.started, "end": self.ended},
            "events": dict(self.events),
            "seconds": round(self.seconds, 4),
        }


def run_specs(
    specs: Iterable[Spec],
    database: ScenarioDatabase,
    interrupted: Callable[[], bool] = lambda: False,
) -> list[ScenarioResult]:
    """Run the files one after the other; `interrupted()` True stops the run (between two
    steps, or two of the worker's transactions) with KeyboardInterrupt."""
    results: list[ScenarioResult] = []
    for spec in specs:
        results.append(run_spec(spec, database, interrupted))
    return results


def run_spec(
    spec: Spec, database: ScenarioDatabase, interrupted: Callable[[], bool] = lambda: False
) -> ScenarioResult:
    """Run one scenario file's steps in `database`; the result, passed or failed."""
    result = ScenarioResult(spec.file, len(spec.steps))
    started = time.perf_counter()
    name = slug(Path(spec.file).name.removesuffix(".json").removesuffix(".scenario"))
    scenario = Scenario(
        spec.workflow.file,
        actors=spec.actors,
        start=spec.start or DEFAULT_START,
        database=database,
        workflows={path: found.file for path, found in spec.workflows.items()},
        process=spec.process or f"{name}-{secrets.token_hex(4)}",
        interrupted=interrupted,
    )
    result.process = scenario.process_id
    result.started = format_rfc3339(scenario.now)
    try:
        for number, step in enumerate(spec.steps, 1):
            if interrupted():
                raise KeyboardInterrupt
            result.ran = number
            problem = _run_step(scenario, step)
            if problem is not None:
                result.failure = Failure(number, step.pointer, problem)
                break
    finally:
        result.ended = format_rfc3339(scenario.now)
        result.events = scenario.event_counts()
        result.seconds = time.perf_counter() - started
    return result


def _run_step(scenario: Scenario, step: Step) -> str | None:
    """What went wrong in `step`, or None."""
    try:
        if isinstance(step, Act):
            return _act(scenario, step)
        if isinstance(step, Advance):
            scenario.advance(step.delta)
            return None
        found = scenario.check(step.expectation)
        return "; ".join(found) if found else None
    except ScenarioError as exc:
        return str(exc)


def _act(scenario: Scenario, step: Act) -> str | None:
    who = f"{step.actor}'s {step.action}" + (f" on {step.process!r}" if step.process else "")
    try:
        scenario.act(step.actor, step.action, step.input, process=step.process)
    except CharterError as exc:
        if step.expect_error is None:
            return f"expected {who} to be accepted, got {exc.code}: {exc.message}"
        if exc.code != step.expect_error:
            return (
                f"expected {who} to be refused with {step.expect_error}, "
                f"got {exc.code}: {exc.message}"
            )
        return None
    if step.expect_error is not None:
        return f"expected {who} to be refused with {step.expect_error}, got accepted"
    return None
