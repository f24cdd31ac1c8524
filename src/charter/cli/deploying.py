"""`charter workflows plan` and `charter workflows deploy`: what a new definition would do
to the processes at its path, and deploying it — refused when it would strand them,
unless `--migrate` moves them (signed here) or `--allow-stranding` says so."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from charter.cli import remote, tables
from charter.cli.migrate import EXIT_FAILED, migrate_with_progress, show_outcomes
from charter.cli.migrating import Move, check_reason, parse_state_map, plan_state_moves
from charter.core import ijson
from charter.core.ed25519 import read_secret_key_file
from charter.core.errors import InvalidWorkflow, Malformed
from charter.core.errors.workflows import StrandsProcesses
from charter.core.jsontypes import JsonObject, JsonValue
from charter.sdk.client import Client
from charter.sdk.results import Deployed, DeployPlan
from charter.wire import parse

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the API's answer as JSON.")]
EXIT_STRANDS = 1
REASONS = {
    "state_removed": "its state is not in the new definition",
    "no_action": "no action runs from its state any more",
    "action_removed": "the new definition has no such action",
    "unreachable": "its action runs from no state the process can reach",
}


def read_definition(file: Path) -> JsonValue:
    try:
        return ijson.loads(file.read_bytes())
    except OSError as exc:
        raise Malformed(f"{file}: cannot read: {exc.strerror or exc}") from None


def plan(
    path: Annotated[str, typer.Argument(help="The deployed workflow path.")],
    file: Annotated[Path, typer.Argument(help="The new definition (JSON).")],
    as_json: JsonFlag = False,
) -> None:
    """What deploying FILE at PATH would do to its live processes; deploys nothing.

    Lists the processes it would strand, the timers and queue rows it would orphan (they
    could only fail), and the processes whose history it would not accept event by event.
    Exits 1 when it strands or orphans anything (a deploy would be refused)."""
    definition = read_definition(file)
    with remote.client() as api:
        pages = list(_pages(api, path, definition))
    if as_json:
        first = pages[0].raw
        merged: JsonObject = {
            "counts": first["counts"],
            **{key: [i for p in pages for i in _list(p.raw, key)] for key in _LISTS},
        }
        remote.print_json(merged)
    else:
        show_plan(pages)
    counts = pages[0].counts
    if counts.stranded or counts.orphaned_work:
        raise typer.Exit(EXIT_STRANDS)


_LISTS = ("stranded", "orphaned_work", "diverging")


def _list(answer: JsonObject, key: str) -> list[JsonValue]:
    found = answer.get(key)
    return list(found) if isinstance(found, list) else []


def _pages(
    api: Client, path: str, definition: JsonValue, *, replay: bool = True
) -> Iterator[DeployPlan]:
    cursor: str | None = None
    while True:
        page = api.plan_workflow(path, definition, cursor=cursor, replay=replay)
        yield page
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def show_plan(pages: list[DeployPlan]) -> None:
    counts = pages[0].counts
    if any(p.stranded for p in pages):
        table = Table("process", "state", "why", title="stranded", title_justify="left")
        for s in (s for p in pages for s in p.stranded):
            table.add_row(Text(s.process), Text(s.state), REASONS.get(s.reason, s.reason))
        tables.show(tables.whole(table, "process"))
    if any(p.orphaned_work for p in pages):
        table = Table("process", "work", "kind", "action", "why", title="orphaned work",
                      title_justify="left")  # fmt: skip
        for o in (o for p in pages for o in p.orphaned_work):
            work = o.schedule_id or remote.short(o.work_id)
            why = REASONS.get(o.reason, o.reason)
            table.add_row(Text(o.process), Text(work), o.kind, Text(o.action), why)
        tables.show(tables.whole(table, "process"))
    if any(p.diverging for p in pages):
        table = Table("process", "seq", "code", "message", title="diverging (informational)",
                      title_justify="left")  # fmt: skip
        for d in (d for p in pages for d in p.diverging):
            table.add_row(Text(d.process), str(d.seq), Text(d.code), Text(d.message))
        tables.show(tables.whole(table, "process"))
    typer.echo(
        f"{counts.stranded} stranded, {counts.orphaned_work} orphaned work, "
        f"{counts.diverging or 0} diverging"
    )


def deploy(
    path: Annotated[str, typer.Argument(help="Where to deploy, e.g. customer/retail/onboarding.")],
    file: Annotated[Path, typer.Argument(help="The workflow JSON file.")],
    allow_stranding: Annotated[
        bool,
        typer.Option(
            "--allow-stranding",
            help="Deploy even if processes are stranded or work orphaned (recorded).",
        ),
    ] = False,
    migrate_map: Annotated[
        list[str] | None,
        typer.Option(
            "--migrate",
            help="OLD=NEW: after deploying, move the processes in OLD to NEW with a signed "
            "charter:migrate (repeatable; needs --key-file and --reason).",
            show_default=False,
        ),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option(
            help="The secret key of an actor holding a migration role.", show_default=False
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(help="A ticket reference recorded on each migration, e.g. OPS-1234."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Deploy a definition at a path over the API (a new revision; old ones are kept).

    Refused (exit 1, nothing deployed) when it would strand processes or orphan their work,
    unless --migrate covers them or --allow-stranding. With --migrate, every process in an
    OLD state is moved to NEW after the deploy, and every process with orphaned work gets a
    migration (to its own state if not mapped) that cancels that work."""
    definition = read_definition(file)
    state_map = parse_state_map(migrate_map) if migrate_map else None
    key = None
    if state_map is not None:
        if key_file is None or reason is None:
            raise typer.BadParameter("--migrate needs --key-file and --reason")
        check_reason(reason)
        key = read_secret_key_file(key_file)
    with remote.client() as api:
        orphans = _orphans(api, path, definition) if state_map is not None else {}
        deployed = _deploy(api, path, definition, allow_stranding, state_map)
        if not as_json:
            _said_deployed(deployed.raw)
        if key is None or state_map is None or reason is None:
            if as_json:
                remote.print_json(deployed.raw)
            return
        moves = _moves(api, path, state_map, orphans)
        outcomes = migrate_with_progress(
            api, key, moves, reason=reason, cancel_for=orphans, quiet=as_json
        )
    if as_json:
        remote.print_json({"deployed": deployed.raw, "migrations": [o.to_json() for o in outcomes]})
    else:
        show_outcomes(outcomes, False)
    if any(outcome.result == "failed" for outcome in outcomes):
        raise typer.Exit(EXIT_FAILED)


def _deploy(
    api: Client,
    path: str,
    definition: JsonValue,
    allow_stranding: bool,
    state_map: Mapping[str, str] | None,
) -> Deployed:
    try:
        return api.deploy_workflow(
            path, definition, allow_stranding=allow_stranding, migration_map=state_map
        )
    except InvalidWorkflow as exc:
        print_problems(exc)
        raise
    except StrandsProcesses as exc:
        found = exc.context.get("plan")
        if isinstance(found, dict):
            show_plan([parse(DeployPlan, found, Malformed)])
        raise


def _orphans(api: Client, path: str, definition: JsonValue) -> dict[str, list[str]]:
    """The processes with orphaned work, each with the schedules a migration cancels."""
    found: dict[str, list[str]] = {}
    # Only the orphaned work is needed: no history is replayed for it.
    for page in _pages(api, path, definition, replay=False):
        for work in page.orphaned_work:
            listed = found.setdefault(work.process, [])
            if work.schedule_id is not None and work.schedule_id not in listed:
                listed.append(work.schedule_id)
    return found


def _moves(
    api: Client, path: str, state_map: Mapping[str, str], orphans: Mapping[str, list[str]]
) -> list[Move]:
    """Every process in a mapped state to its new state, and every other process with
    orphaned work to the state it is in (the migration cancels that work)."""
    moves = plan_state_moves(api, path, state_map)
    moving = {process.id for process, _ in moves}
    for process_id in sorted(set(orphans) - moving):
        process = api.process(process_id)
        moves.append((process, state_map.get(process.state, process.state)))
    return sorted(moves, key=lambda move: move[0].id)


def _said_deployed(deployed: JsonObject) -> None:
    done = "unchanged:" if deployed.get("unchanged") is True else "deployed"
    typer.echo(
        f"{done} {deployed['path']} revision {deployed['revision']} "
        f"(version {remote.short(deployed['version'])})"
    )
    warnings = deployed.get("warnings")
    for warning in warnings if isinstance(warnings, list) else []:
        if isinstance(warning, dict):
            typer.echo(f"warning: {warning.get('pointer')}: {warning.get('message')}", err=True)


def print_problems(exc: InvalidWorkflow) -> None:
    problems = exc.context.get("problems")
    table = Table("pointer", "message", title="workflow problems", title_justify="left")
    for problem in problems if isinstance(problems, list) else []:
        table.add_row(Text(str(problem.get("pointer") or "/")), Text(str(problem.get("message"))))
    if table.row_count:
        Console(stderr=True).print(table)
