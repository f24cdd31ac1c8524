"""`charter verify` and `charter export`: check hash chains, and export them for audit.

`verify ID` checks one stored process, `verify --all` every one, `verify --bundle FILE`
an export file offline: that mode never touches a database (nor starts the embedded
one), so an auditor can run it anywhere. Exit 0 when everything verifies, 1 otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from charter.core import ijson
from charter.core.config import Settings
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.db.embedded import database_url
from charter.engine.evidence import Problem, VerificationReport
from charter.engine.verification import export_bundle, process_ids, verify_bundle, verify_process

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_UNREADABLE = 2


def verify(
    process_id: Annotated[
        str | None, typer.Argument(help="The process to verify.", show_default=False)
    ] = None,
    all_processes: Annotated[
        bool, typer.Option("--all", help="Verify every process, with a progress bar.")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="Verify an export file offline, with no database.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    replay: Annotated[
        bool, typer.Option("--replay", help="Also re-derive state and data from the events.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Verify hashes, signatures, seq, links, spawn causes and heads; exit 1 on any problem."""
    chosen = sum([process_id is not None, all_processes, bundle is not None])
    if chosen != 1:
        raise typer.BadParameter("give exactly one of: a process id, --all, --bundle FILE")
    if bundle is not None:
        raise typer.Exit(_verify_file(bundle, replay=replay, as_json=as_json))
    with database_url(Settings.from_env()) as url, Database(url, max_size=2) as database:
        if process_id is not None:
            report = verify_process(database, process_id, replay=replay)
            raise typer.Exit(_show(process_id, report, as_json=as_json))
        raise typer.Exit(_verify_all(database, replay=replay, as_json=as_json))


def export(
    process_id: Annotated[str, typer.Argument(help="The process to export.", show_default=False)],
) -> None:
    """Print a process's export bundle (charter-export/1) for offline verification."""
    with database_url(Settings.from_env()) as url, Database(url, max_size=1) as database:
        bundle = export_bundle(database, process_id)
    _write_json(bundle, indent=1)


def _verify_file(path: Path, *, replay: bool, as_json: bool) -> int:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        Console(stderr=True).print(f"{path}: cannot read: {exc.strerror or exc}", markup=False)
        return EXIT_UNREADABLE
    try:
        report = verify_bundle(ijson.loads(raw), replay=replay)
    except Malformed as exc:
        # A file that is not I-JSON is bad evidence, not an unusable command line.
        report = VerificationReport.of(0, [Problem(None, "malformed_bundle", exc.message)])
    return _show(str(path), report, as_json=as_json)


def _show(subject: str, report: VerificationReport, *, as_json: bool) -> int:
    status = EXIT_OK if report.ok else EXIT_PROBLEMS
    if as_json:
        _write_json(report.to_json())
        return status
    console = Console()
    if report.ok:
        console.print(f"{subject}: ok ({report.events} events verified)", markup=False)
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


def _verify_all(database: Database, *, replay: bool, as_json: bool) -> int:
    ids = process_ids(database)
    failed: list[tuple[str, VerificationReport]] = []
    events = 0
    # The bar goes to stderr so `--json` output on stdout stays clean.
    progress = Progress(
        TextColumn("verifying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=as_json,
    )
    with progress:
        task = progress.add_task("verify", total=len(ids))
        for process_id in ids:
            report = verify_process(database, process_id, replay=replay)
            events += report.events
            if not report.ok:
                failed.append((process_id, report))
            progress.advance(task)
    if as_json:
        summary: JsonObject = {
            "processes": len(ids),
            "ok": len(ids) - len(failed),
            "events": events,
            "failed": [{"process": pid, **report.to_json()} for pid, report in failed],
        }
        _write_json(summary)
    else:
        _print_summary(len(ids), events, failed)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _print_summary(total: int, events: int, failed: list[tuple[str, VerificationReport]]) -> None:
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


def _write_json(value: JsonObject, *, indent: int | None = None) -> None:
    # ASCII with \u escapes: any terminal encoding will do, and a reader gets back the
    # same strings (envelope_text included, code point for code point).
    typer.echo(json.dumps(value, ensure_ascii=True, allow_nan=False, indent=indent))
