"""`charter runs`: the run ledger of your automations and each run's step journal."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from charter.cli import automation_views, automations, remote, tables
from charter.sdk.results import RunDetail

app = typer.Typer(help="Runs: admitted by triggers, executed on machines.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list")
def list_(
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status: pending, running, completed, failed."
        ),
    ] = None,
    automation: Annotated[
        str | None, typer.Option("--automation", help="Only runs of this automation id.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Runs per page.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="Start at this page cursor.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Follow every page.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Your runs, newest first, a page at a time (or --all)."""
    with automations.client() as api:
        items, following = automations.pages(
            lambda c: api.runs(status=status, automation_id=automation, cursor=c, limit=limit),
            cursor,
            every,
        )
    if as_json:
        remote.print_json({"items": [r.raw for r in items], "next_cursor": following})
        return
    tables.show(automation_views.run_table(items))
    automation_views.more(following)


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="The run id.")], as_json: JsonFlag = False
) -> None:
    """A run, its plan snapshot and its step journal."""
    with automations.client() as api:
        detail = api.run(run_id)
    if as_json:
        remote.print_json(detail.raw)
        return
    tables.show(_panel(detail))


@app.command("cancel")
def cancel(
    run_id: Annotated[str, typer.Argument(help="The run id.")], as_json: JsonFlag = False
) -> None:
    """Cancel a pending or running run (it fails; its machine is stopped at its next call)."""
    with automations.client() as api:
        run = api.cancel_run(run_id)
    if as_json:
        remote.print_json(run.raw)
        return
    typer.echo(f"run {run.id} cancelled ({run.status}: {run.error})")


@app.command("retry")
def retry(
    run_id: Annotated[str, typer.Argument(help="The id of a failed run.")],
    as_json: JsonFlag = False,
) -> None:
    """Retry a failed run: a new run of its automation with the same input."""
    with automations.client() as api:
        run = api.retry_run(run_id)
    if as_json:
        remote.print_json(run.raw)
        return
    typer.echo(f"run {run.id} admitted, retrying {run_id} ({run.status})")


def _panel(detail: RunDetail) -> Panel:
    run = detail.run
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    for label, value in (
        ("owner", run.principal or "-"),
        ("automation", run.automation_id),
        ("trigger", f"{run.trigger_kind} {run.trigger_id or ''}".strip()),
        ("target", run.target),
        ("status", run.status),
        ("attempts", str(run.attempts)),
        ("created", automation_views.when(run.created_at)),
        ("scheduled for", automation_views.when(run.scheduled_for)),
        ("started", automation_views.when(run.started_at)),
        ("finished", automation_views.when(run.finished_at)),
        ("retry at", automation_views.when(run.retry_at)),
        ("lease", run.lease_owner or "-"),
        ("input", _compact(run.input)),
        ("output", _compact(run.output)),
        ("error", run.error or "-"),
    ):
        facts.add_row(label, Text(value))
    snapshot = Table("#", "step", "action", "input", title="plan snapshot")
    steps = run.plan.get("steps")
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        fields = step if isinstance(step, dict) else {}
        snapshot.add_row(
            str(index),
            Text(str(fields.get("id", ""))),
            Text(str(fields.get("actionId", ""))),
            Text(_compact(fields.get("input"))),
        )
    journal = Table(
        "#",
        "step",
        "status",
        "attempts",
        "idempotency key",
        "started",
        "finished",
        "output/error",
        title="step journal",
    )
    for s in detail.steps:
        journal.add_row(
            str(s.position),
            Text(s.step_id),
            s.status,
            str(s.attempts),
            Text(s.idempotency_key),
            automation_views.when(s.started_at),
            automation_views.when(s.finished_at),
            Text(s.error if s.error else _compact(s.output)),
        )
    return Panel(Group(facts, snapshot, journal), title=Text(f"run {run.id}"))


def _compact(value: object) -> str:
    return "-" if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
