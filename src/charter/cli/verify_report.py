"""How `charter verify` says what it found: exit codes, a report as text or JSON, the
summary of `--all` and the processes the log holds that the database lacks."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from charter.audit.evidence import VerificationReport
from charter.audit.log_check import MissingProcess
from charter.cli.verify_log import LogCheck
from charter.core.jsontypes import JsonObject

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_UNREADABLE = 2
UNREADABLE_CODE = "unreadable_file"


def log_notes(summary: dict[str, object], check: LogCheck) -> list[str]:
    if not summary:
        return []
    latest = summary["latest_in_log"]
    seq = latest["seq"] if isinstance(latest, dict) else "none"
    return [
        f"log: {summary['origin']} at size {summary['checkpoint_size']}: latest logged seq"
        f" {seq}, {summary['unlogged']} event(s) not logged yet",
        f"log: {check.witnesses.note()}",
    ]


def erasure_notes(report: VerificationReport) -> list[str]:
    """What became of the personal values, in a line, for a process that has any."""
    erasure = report.erasure
    if erasure is None:
        return []
    counts = {key: len(value) for key, value in erasure.items() if isinstance(value, list)}
    if not any(counts.values()):
        return []
    return [
        f"personal values: {counts.get('erased', 0)} erased, {counts.get('withheld', 0)} "
        f"withheld; {counts.get('unverifiable', 0)} check(s) replay could not make without them"
    ]


def show(
    subject: str,
    report: VerificationReport,
    *,
    as_json: bool,
    extra: JsonObject | None = None,
    notes: list[str] | None = None,
) -> int:
    status = EXIT_OK if report.ok else EXIT_PROBLEMS
    if as_json:
        write_json(report.to_json() | (extra or {}))
        return status
    console = Console()
    for note in [*(notes or []), *erasure_notes(report)]:
        console.print(f"{subject}: {note}", markup=False, soft_wrap=True)
    if report.ok:
        console.print(
            f"{subject}: ok ({report.events} events verified)", markup=False, soft_wrap=True
        )
        return status
    table = Table("seq", "code", "message", title=f"{subject}: problems", title_justify="left")
    for problem in report.problems:
        seq = "-" if problem.seq is None else str(problem.seq)
        table.add_row(seq, problem.code, Text(problem.message))
    console.print(table)
    console.print(
        f"{subject}: {len(report.problems)} problem(s) in {report.events} events", markup=False
    )
    return status


def print_summary(total: int, events: int, failed: list[tuple[str, VerificationReport]]) -> None:
    console = Console()
    if failed:
        table = Table("process", "seq", "code", "message", title="failures", title_justify="left")
        for process_id, report in failed:
            for problem in report.problems:
                seq = "-" if problem.seq is None else str(problem.seq)
                table.add_row(Text(process_id), seq, problem.code, Text(problem.message))
        console.print(table)
    console.print(
        f"{total} process(es), {events} events: {total - len(failed)} ok, {len(failed)} failed",
        markup=False,
    )


def print_missing(missing: list[MissingProcess], size: int) -> None:
    """One whole line per process the log holds and the database lacks (keys are 64 hex:
    a table would cut them)."""
    console = Console()
    for gone in missing:
        console.print(
            f"process_missing: key {gone.process_key.hex()}, indexes {gone.first_index}.."
            f"{gone.last_index}, last logged seq {gone.last_seq}",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"log at size {size}: {len(missing)} logged process(es) missing from the database",
        markup=False,
    )


def write_json(value: JsonObject, *, indent: int | None = None) -> None:
    # ASCII with \u escapes: any terminal encoding will do, and a reader gets back the
    # same strings (envelope_text included, code point for code point).
    typer.echo(json.dumps(value, ensure_ascii=True, allow_nan=False, indent=indent))
