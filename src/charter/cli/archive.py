"""`charter archive`: move finished processes out of the hot tables into verified bundle
files (`run`), and check an archive directory offline (`verify`)."""

from __future__ import annotations

import getpass
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from charter.archive.files import bundle_files, read_bundle
from charter.archive.run import DEFAULT_LIMIT, archive_due
from charter.audit.verify_stored import verify_bundle
from charter.cli.tables import show, whole
from charter.core import ijson
from charter.core.config import Settings
from charter.core.errors import ConfigurationError, Malformed
from charter.db.database import Database
from charter.db.embedded import database_url
from charter.tlog.config import LogSettings

ARCHIVE_DIR_ENV = "CHARTER_ARCHIVE_DIR"

app = typer.Typer(
    help="Archive finished processes whose retention ran out, and check the archive.",
    no_args_is_help=True,
)


def archive_directory(given: Path | None) -> Path:
    """`--dir`, else CHARTER_ARCHIVE_DIR; ConfigurationError when neither says."""
    if given is not None:
        return given
    from_env = os.environ.get(ARCHIVE_DIR_ENV)
    if not from_env:
        raise ConfigurationError(f"say where the archive is: --dir DIR or {ARCHIVE_DIR_ENV}")
    return Path(from_env)


def archiver() -> str:
    """Who archives, as the tombstones record it."""
    return f"charter archive run ({getpass.getuser()}@{socket.gethostname()})"


@app.command("run")
def run(
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help=f"The archive directory (default: ${ARCHIVE_DIR_ENV}).",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Archive at most this many processes.")] = (
        DEFAULT_LIMIT
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print what was done as JSON.")] = False,
) -> None:
    """Archive every process whose workflow's retention ran out: each is written as a
    verified bundle to DIR/<yyyy>/<mm>/<id>.json, then removed from the hot tables,
    leaving a tombstone. Processes with a child, live automation or a legal hold stay."""
    target = archive_directory(directory)
    target.mkdir(parents=True, exist_ok=True)
    log = LogSettings.from_env().log_directory()
    with database_url(Settings.from_env()) as url, Database(url, max_size=2) as database:
        done = archive_due(database, target, now=datetime.now(UTC), by=archiver(), limit=limit,
                           log_directory=log if log.exists() else None)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(done.to_json(), indent=1))
        return
    for item in done.archived:
        typer.echo(f"archived {item.process_id} -> {item.path} (sha256 {item.sha256[:12]}…)")
    for kept in done.kept:
        typer.echo(f"kept {kept.process_id}: {kept.why}")
    typer.echo(f"{len(done.archived)} archived, {len(done.kept)} kept")


@app.command("verify")
def verify(
    directory: Annotated[
        Path, typer.Argument(help="The archive directory.", file_okay=False, exists=True)
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the reports as JSON.")] = False,
) -> None:
    """Verify every bundle of an archive directory offline (signatures, chains, replay),
    with no database. Exit status 1 when one does not verify."""
    results: list[tuple[Path, str, list[str]]] = []
    for path in bundle_files(directory):
        data, digest = read_bundle(path)
        try:
            report = verify_bundle(ijson.loads(data), replay=True)
            problems = [f"{p.code}: {p.message}" for p in report.problems]
        except Malformed as exc:
            problems = [f"malformed_bundle: {exc.message}"]
        results.append((path.relative_to(directory), digest, problems))
    failed = [r for r in results if r[2]]
    if as_json:
        shown = [
            {"path": str(p), "sha256": d, "ok": not pr, "problems": pr} for p, d, pr in results
        ]
        typer.echo(json.dumps({"bundles": shown, "ok": not failed}, indent=1))
    else:
        table = whole(Table("bundle", "sha256", "result"), "bundle")
        for path, digest, problems in results:
            table.add_row(str(path), digest[:12] + "…", "ok" if not problems else problems[0])
        show(table)
        typer.echo(f"{len(results)} bundles, {len(failed)} failed")
    if failed:
        raise typer.Exit(1)
