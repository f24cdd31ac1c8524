"""`charter db`: migrations and the schema snapshot."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from charter.core.config import Settings
from charter.core.timefmt import format_rfc3339
from charter.db.database import connect
from charter.db.embedded import database_url
from charter.db.migrate import MigrationStatus
from charter.db.migrate import migrate as apply_migrations
from charter.db.migrate import status as migration_status
from charter.db.snapshot import render_schema

app = typer.Typer(help="Database migrations and schema.", no_args_is_help=True)


@app.command()
def migrate() -> None:
    """Apply pending migrations (safe to run twice or from two processes at once)."""
    console = Console()
    with database_url(Settings.from_env()) as url, connect(url) as conn:
        applied = apply_migrations(conn)
    if not applied:
        console.print("Database is up to date; nothing to apply.")
    for migration in applied:
        console.print(f"applied {migration.version:04d}_{migration.name}")


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List every migration and whether it is applied."""
    with database_url(Settings.from_env()) as url, connect(url) as conn:
        rows = migration_status(conn)
    log = _log_witnessing()
    if as_json:
        report = {"migrations": [_status_json(row) for row in rows], "log": log}
        typer.echo(json.dumps(report, indent=2))
        return
    table = Table("version", "name", "applied at", "note")
    pending = 0
    for row in rows:
        if row.applied_at is None:
            pending += 1
        note = (
            "not shipped with this release"
            if not row.known
            else "CHANGED since applied"
            if row.checksum_matches is False
            else "pending"
            if row.applied_at is None
            else ""
        )
        applied = row.applied_at.isoformat(timespec="seconds") if row.applied_at else "-"
        table.add_row(f"{row.version:04d}", row.name, applied, note)
    console = Console()
    console.print(table)
    console.print(f"{len(rows) - pending} applied, {pending} pending")
    if log is not None:
        warning = f": {log['warning']}" if log["warning"] else ""
        console.print(f"transparency log: witnessing {log['mode']}{warning}", markup=False)


def _log_witnessing() -> dict[str, object] | None:
    """How this deployment's transparency log is witnessed, or None without a log: a
    deployment should not learn only from an incident that nothing can see a rollback."""
    from charter.tlog.config import LogSettings
    from charter.tlog.status import witnessing

    settings = LogSettings.from_env()
    return witnessing(settings.policy_path).to_json() if settings.configured else None


def _status_json(row: MigrationStatus) -> dict[str, object]:
    return {
        "version": row.version,
        "name": row.name,
        "applied_at": format_rfc3339(row.applied_at) if row.applied_at else None,
        "known": row.known,
        "checksum_matches": row.checksum_matches,
    }


@app.command()
def schema() -> None:
    """Print the current schema as the snapshot renders it."""
    with database_url(Settings.from_env()) as url, connect(url) as conn:
        text = render_schema(conn)
    typer.echo(text, nl=False)
