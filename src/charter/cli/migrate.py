"""`charter workflows migrate`: move a workflow's processes from old states to new ones,
each with a `charter:migrate` event signed here with the operator's key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from charter.cli import remote, tables
from charter.cli.migrating import (
    DEFAULT_RETRIES,
    Move,
    Outcome,
    check_reason,
    migratable,
    migrate_processes,
    parse_state_map,
    plan_state_moves,
)
from charter.core.ed25519 import SecretKey, read_secret_key_file
from charter.core.jsontypes import JsonValue
from charter.sdk.client import Client

EXIT_FAILED = 1


def migrate(
    path: Annotated[str, typer.Argument(help="The deployed workflow path.")],
    state_map: Annotated[
        list[str],
        typer.Option(
            "--map",
            help="OLD=NEW: move the processes in state OLD to NEW, a state of the current "
            "definition (repeat for more states; OLD=OLD only cleans up their work).",
            show_default=False,
        ),
    ],
    reason: Annotated[
        str, typer.Option(help="A ticket reference recorded on every event, e.g. OPS-1234.")
    ],
    key_file: Annotated[
        Path | None,
        typer.Option(
            help="The secret key of an actor holding a migration role (not for --dry-run).",
            show_default=False,
        ),
    ] = None,
    cancel: Annotated[
        list[str] | None,
        typer.Option(help="A schedule id to cancel on each process too (repeatable)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print which processes would move where; change nothing."),
    ] = False,
    retries: Annotated[
        int, typer.Option(min=0, help="Re-signs per process after a stale_prev.")
    ] = DEFAULT_RETRIES,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Sign one charter:migrate per process at PATH whose state is an OLD of --map.

    Work of actions the current definition no longer has is cancelled with each event.
    A process another event moves meanwhile is skipped; one the engine refuses is
    failed, with its code. Exits 1 if any failed."""
    moves_to = parse_state_map(state_map)
    check_reason(reason)
    key = None
    if not dry_run:
        if key_file is None:
            raise typer.BadParameter("--key-file is needed to sign the migrations (or --dry-run)")
        key = read_secret_key_file(key_file)
    with remote.client() as api:
        migratable(api, path, moves_to.values())
        moves = plan_state_moves(api, path, moves_to)
        if key is None:
            _show_plan(path, moves, as_json)
            return
        outcomes = migrate_with_progress(
            api, key, moves, reason=reason, cancel=cancel or (), retries=retries,
            quiet=as_json,
        )  # fmt: skip
    show_outcomes(outcomes, as_json)
    if any(outcome.result == "failed" for outcome in outcomes):
        raise typer.Exit(EXIT_FAILED)


def migrate_with_progress(
    api: Client,
    key: SecretKey,
    moves: list[Move],
    *,
    reason: str,
    cancel: Sequence[str] = (),
    cancel_for: Mapping[str, Sequence[str]] | None = None,
    retries: int = DEFAULT_RETRIES,
    quiet: bool = False,
) -> list[Outcome]:
    """`migrate_processes` under a progress bar on stderr (gone at the end if `quiet`)."""
    progress = Progress(
        TextColumn("migrating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=quiet,
    )
    with progress:
        task = progress.add_task("migrate", total=len(moves))
        return migrate_processes(
            api, key, moves, reason=reason, cancel=cancel, cancel_for=cancel_for,
            retries=retries, on_outcome=lambda _: progress.advance(task),
        )  # fmt: skip


def _show_plan(path: str, moves: list[Move], as_json: bool) -> None:
    if as_json:
        plan: list[JsonValue] = [{"process": p.id, "from": p.state, "to": to} for p, to in moves]
        remote.print_json({"dry_run": True, "workflow": path, "moves": plan})
        return
    table = Table("process", "from", "to", title=f"would migrate ({path})", title_justify="left")
    for process, to in moves:
        table.add_row(Text(process.id), Text(process.state), Text(to))
    tables.show(tables.whole(table, "process"))
    typer.echo(f"dry run: {len(moves)} process(es) would move; nothing was changed")


def show_outcomes(outcomes: list[Outcome], as_json: bool) -> None:
    counts = dict.fromkeys(("migrated", "skipped", "failed"), 0)
    for outcome in outcomes:
        counts[outcome.result] += 1
    if as_json:
        remote.print_json({**counts, "results": [o.to_json() for o in outcomes]})
        return
    table = Table("process", "from", "to", "result", "code", "detail", title="migration")
    for o in outcomes:
        table.add_row(
            Text(o.process),
            Text(o.from_state),
            Text(o.to_state),
            o.result if o.seq is None else f"{o.result} (seq {o.seq})",
            Text(o.code or ""),
            Text(o.detail),
        )
    tables.show(tables.whole(table, "process"))
    typer.echo(", ".join(f"{n} {result}" for result, n in counts.items()))
