"""`charter workflows test SPEC...`: scenario files run on a scratch database in virtual
time (docs/testing.md), one line per scenario and a count, or a JSON report."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import typer

from charter.testing.runner import ScenarioResult, run_specs
from charter.testing.sandbox import ScenarioDatabase
from charter.testing.spec import Spec, SpecError, SpecProblem, conflicts, load_spec

EXIT_FAILED = 1
EXIT_MALFORMED = 2


def run(files: list[Path], *, as_json: bool, admin_url: str | None) -> int:
    """Check every file, then run them all in one scratch database; the exit code."""
    specs: list[Spec] = []
    problems: list[SpecProblem] = []
    for path in files:
        try:
            specs.append(load_spec(path, str(path)))
        except SpecError as exc:
            problems += exc.problems
    problems += conflicts(specs)
    if problems:
        _malformed(problems, as_json)
        return EXIT_MALFORMED
    try:
        with _interruptible() as interrupted, ScenarioDatabase.scratch(admin_url) as database:
            results = run_specs(specs, database, interrupted)
    except KeyboardInterrupt:
        typer.echo("interrupted: the scratch database was dropped", err=True)
        raise
    _report(results, as_json)
    return EXIT_FAILED if any(not result.passed for result in results) else 0


def _malformed(problems: list[SpecProblem], as_json: bool) -> None:
    if as_json:
        report = {"problems": [p.to_dict() for p in problems], "scenarios": [],
                  "passed": 0, "failed": 0}  # fmt: skip
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    for problem in problems:
        typer.echo(f"malformed {problem}", err=True)
    files = len({problem.file for problem in problems})
    typer.echo(f"{len(problems)} problem(s) in {files} file(s); nothing was run", err=True)


def _report(results: list[ScenarioResult], as_json: bool) -> None:
    passed = sum(1 for result in results if result.passed)
    failed = len(results) - passed
    if as_json:
        report = {"problems": [], "scenarios": [result.to_json() for result in results],
                  "passed": passed, "failed": failed}  # fmt: skip
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    for result in results:
        typer.echo(result.line())
    typer.echo(f"{passed} passed, {failed} failed")


@contextmanager
def _interruptible() -> Iterator[Callable[[], bool]]:
    """Ctrl-C and SIGTERM ask the run to stop; it does so between two of the worker's
    transactions (an interrupt raised in the middle of one would leave its connection
    broken), then drops the scratch database on the way out. A second signal stops at
    once."""
    asked = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        if asked.is_set():
            raise KeyboardInterrupt
        asked.set()

    previous = {sent: signal.signal(sent, stop) for sent in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield asked.is_set
    finally:
        for sent, handler in previous.items():
            signal.signal(sent, handler)
