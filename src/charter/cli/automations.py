"""`charter automations`: automations, their schedule and webhook triggers, their plan
and manual runs, over the control API (CHARTER_API_URL, CHARTER_TOKEN)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from charter.cli import automation_views as views
from charter.cli import remote, tables
from charter.core import ijson
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue
from charter.core.unset import UNSET, Unset
from charter.sdk.client import Client
from charter.sdk.results import (
    Page,
)

app = typer.Typer(
    help="Automations: schedule and webhook triggers, one plan, runs on a machine target.",
    no_args_is_help=True,
)
schedule_app = typer.Typer(
    help="Schedule triggers: cron in an IANA time zone.", no_args_is_help=True
)
webhook_app = typer.Typer(
    help="Webhook triggers: a source, an event and a write-only secret.", no_args_is_help=True
)
plan_app = typer.Typer(help="The automation's one plan of tool actions.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")
app.add_typer(webhook_app, name="webhook")
app.add_typer(plan_app, name="plan")

T = TypeVar("T")
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
AutomationId = Annotated[str, typer.Argument(help="The automation id.")]
TriggerId = Annotated[str, typer.Argument(help="The trigger id.")]


def client() -> Client:
    """A client for CHARTER_API_URL with CHARTER_TOKEN (tests replace this function)."""
    return Client()


def console() -> Console:
    return Console(soft_wrap=False)


# --- automations ------------------------------------------------------------------------


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="A name for people.")],
    target: Annotated[str, typer.Option("--target", help="The machine target that runs it.")],
    disabled: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create an automation."""
    with client() as api:
        automation = api.create_automation(name, target, enabled=not disabled)
    if as_json:
        remote.print_json(automation.raw)
    else:
        typer.echo(f"created automation {automation.id} ({automation.name} on {automation.target})")


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(help="Automations per page.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="Start at this page cursor.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Follow every page.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Your automations, oldest first, a page at a time (or --all)."""
    with client() as api:
        items, following = pages(lambda c: api.automations(cursor=c, limit=limit), cursor, every)
    if as_json:
        remote.print_json({"items": [a.raw for a in items], "next_cursor": following})
        return
    table = Table("id", "owner", "name", "target", "enabled", "created")
    for automation in items:
        table.add_row(
            automation.id,
            Text(automation.principal or "-"),
            Text(automation.name),
            Text(automation.target),
            views.yes(automation.enabled),
            views.when(automation.created_at),
        )
    tables.show(tables.whole(table, "id"))
    views.more(following)


@app.command("show")
def show(automation_id: AutomationId, as_json: JsonFlag = False) -> None:
    """An automation with its triggers and plan."""
    with client() as api:
        detail = api.automation(automation_id)
    if as_json:
        remote.print_json(detail.raw)
        return
    tables.show(views.detail_panel(detail))


@app.command("update")
def update(
    automation_id: AutomationId,
    name: Annotated[str | None, typer.Option(help="A new name.")] = None,
    target: Annotated[str | None, typer.Option(help="A new machine target.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Rename an automation or move it to another target (pause/resume enable it)."""
    if name is None and target is None:
        raise Malformed("nothing to change: give --name and/or --target")
    with client() as api:
        automation = api.update_automation(automation_id, name=name, target=target)
    views.print_automation(automation, "updated", as_json)


@app.command("delete")
def delete(automation_id: AutomationId) -> None:
    """Delete an automation with its triggers and plan (its runs stay as history)."""
    with client() as api:
        api.delete_automation(automation_id)
    typer.echo(f"deleted automation {automation_id}")


@app.command("pause")
def pause(automation_id: AutomationId, as_json: JsonFlag = False) -> None:
    """Pause: no trigger admits a run until it is resumed."""
    with client() as api:
        automation = api.pause_automation(automation_id)
    views.print_automation(automation, "paused", as_json)


@app.command("resume")
def resume(automation_id: AutomationId, as_json: JsonFlag = False) -> None:
    """Resume a paused automation."""
    with client() as api:
        automation = api.resume_automation(automation_id)
    views.print_automation(automation, "resumed", as_json)


# --- schedule triggers ------------------------------------------------------------------


@schedule_app.command("add")
def schedule_add(
    automation_id: AutomationId,
    cron: Annotated[str, typer.Option("--cron", help="Five fields, e.g. '0 9 * * 1-5'.")],
    timezone: Annotated[str, typer.Option("--timezone", help="IANA, e.g. Europe/Berlin.")],
    max_occurrences: Annotated[
        int | None, typer.Option("--max-occurrences", help="Stop after this many (default: never).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a schedule trigger."""
    with client() as api:
        schedule = api.add_schedule(automation_id, cron, timezone, max_occurrences=max_occurrences)
    views.print_schedule(schedule, "added", as_json)


@schedule_app.command("update")
def schedule_update(
    automation_id: AutomationId,
    trigger_id: TriggerId,
    cron: Annotated[str | None, typer.Option("--cron", help="A new cron expression.")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", help="A new time zone.")] = None,
    enabled: Annotated[
        bool | None, typer.Option("--enable/--disable", help="Turn the trigger on or off.")
    ] = None,
    max_occurrences: Annotated[
        int | None, typer.Option("--max-occurrences", help="A new budget of occurrences.")
    ] = None,
    unbounded: Annotated[
        bool, typer.Option("--unbounded", help="Remove the budget: fire forever.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Change a schedule trigger; what is not given stays."""
    if unbounded and max_occurrences is not None:
        raise Malformed("give --max-occurrences or --unbounded, not both")
    budget: int | Unset | None = None if unbounded else UNSET
    if max_occurrences is not None:
        budget = max_occurrences
    with client() as api:
        schedule = api.update_schedule(
            automation_id,
            trigger_id,
            cron=cron,
            timezone=timezone,
            enabled=enabled,
            max_occurrences=budget,
        )
    views.print_schedule(schedule, "updated", as_json)


@schedule_app.command("remove")
def schedule_remove(automation_id: AutomationId, trigger_id: TriggerId) -> None:
    """Remove a schedule trigger."""
    with client() as api:
        api.remove_schedule(automation_id, trigger_id)
    typer.echo(f"removed schedule trigger {trigger_id}")


# --- webhook triggers -------------------------------------------------------------------


@webhook_app.command("add")
def webhook_add(
    automation_id: AutomationId,
    source: Annotated[str, typer.Option("--source", help="Where the webhooks come from.")],
    event: Annotated[
        str | None, typer.Option("--event", help="Only this event (default: every event).")
    ] = None,
    secret: Annotated[
        str | None, typer.Option("--secret", help="whsec_... (default: a generated one).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a webhook trigger and print its secret: the only time it is shown."""
    with client() as api:
        webhook = api.add_webhook(automation_id, source, event=event, secret=secret)
    if as_json:
        remote.print_json(webhook.raw)
        return
    typer.echo(f"added webhook trigger {webhook.id} ({webhook.source} {webhook.event or '*'})")
    typer.echo(f"secret: {webhook.secret}")
    typer.echo("store it now: it is never shown again", err=True)


@webhook_app.command("rotate")
def webhook_rotate(
    automation_id: AutomationId,
    trigger_id: TriggerId,
    secret: Annotated[
        str | None, typer.Option("--secret", help="whsec_... (default: a generated one).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace a webhook trigger's secret and print the new one: the only time it is shown."""
    with client() as api:
        webhook, chosen = api.rotate_secret(automation_id, trigger_id, secret)
    if as_json:
        remote.print_json({**webhook.raw, "secret": chosen})
        return
    typer.echo(f"rotated the secret of webhook trigger {webhook.id}")
    typer.echo(f"secret: {chosen}")
    typer.echo("store it now: it is never shown again", err=True)


@webhook_app.command("remove")
def webhook_remove(automation_id: AutomationId, trigger_id: TriggerId) -> None:
    """Remove a webhook trigger."""
    with client() as api:
        api.remove_webhook(automation_id, trigger_id)
    typer.echo(f"removed webhook trigger {trigger_id}")


# --- the plan ---------------------------------------------------------------------------


@plan_app.command("set")
def plan_set(
    automation_id: AutomationId,
    file: Annotated[
        str, typer.Argument(help="A JSON plan file ({'version': 1, 'steps': [...]}); - for stdin.")
    ],
    as_json: JsonFlag = False,
) -> None:
    """Set the automation's plan from a JSON file (runs admitted before keep theirs)."""
    document = _read_json(file)
    if not isinstance(document, dict):
        raise Malformed(f"{file}: a plan is a JSON object")
    with client() as api:
        plan = api.set_plan(automation_id, document)
    if as_json:
        remote.print_json(plan.raw)
    else:
        typer.echo(f"set the plan of {plan.automation_id}: {len(plan.steps)} step(s)")


@plan_app.command("show")
def plan_show(automation_id: AutomationId, as_json: JsonFlag = False) -> None:
    """The automation's plan."""
    with client() as api:
        plan = api.plan(automation_id)
    if as_json:
        remote.print_json(plan.raw)
        return
    console().print(views.plan_table(plan))


@plan_app.command("clear")
def plan_clear(automation_id: AutomationId) -> None:
    """Remove the automation's plan: it admits no runs until it has one again."""
    with client() as api:
        api.clear_plan(automation_id)
    typer.echo(f"cleared the plan of {automation_id}")


# --- manual runs ------------------------------------------------------------------------


@app.command("trigger")
def trigger(
    automation_id: AutomationId,
    input_: Annotated[
        str | None, typer.Option("--input", help="The run's input as JSON (default {}).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Admit a pending manual run with a snapshot of the current plan."""
    value = _parse_json(input_, "--input") if input_ is not None else None
    with client() as api:
        run = api.trigger(automation_id, value)
    if as_json:
        remote.print_json(run.raw)
    else:
        typer.echo(f"run {run.id} is {run.status} (target {run.target})")


# --- reading input and pages ----------------------------------------------------------


def pages(
    fetch: Callable[[str | None], Page[T]], cursor: str | None, every: bool
) -> tuple[list[T], str | None]:
    items: list[T] = []
    while True:
        page = fetch(cursor)
        items.extend(page.items)
        cursor = page.next_cursor
        if not every or cursor is None:
            return items, cursor


def _parse_json(text: str, what: str) -> JsonValue:
    try:
        return ijson.loads(text)
    except Malformed as exc:
        raise Malformed(f"{what} is not valid JSON: {exc.message}") from None


def _read_json(file: str) -> JsonValue:
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise Malformed(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        return ijson.loads(data)
    except Malformed as exc:
        raise Malformed(f"{file} is not valid JSON: {exc.message}") from None
