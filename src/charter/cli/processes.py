"""`charter show` and `charter history`: a process and its events, over the API."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from charter.cli import remote, tables, when
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.model import MIGRATE_ACTION

app = typer.Typer(help="Processes: list and search.", no_args_is_help=True)

ProcessId = Annotated[str, typer.Argument(help="The process id.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def show(process_id: ProcessId, as_json: JsonFlag = False) -> None:
    """A process: workflow, state, data, head, parent and children."""
    with remote.client() as api:
        process = api.process(process_id).raw
    if as_json:
        remote.print_json(process)
        return
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    children = process.get("children")
    for label, value in (
        ("workflow", process.get("workflow")),
        ("state", process.get("state")),
        ("seq", process.get("seq")),
        ("head", process.get("head")),
        ("parent", process.get("parent") or "-"),
        ("children", ", ".join(map(str, children)) if isinstance(children, list) else "-"),
        ("created", process.get("created_at")),
        ("updated", process.get("updated_at")),
    ):
        facts.add_row(label, Text(str(value if value not in (None, "") else "-")))
    data = Panel(_json_text(process.get("data")), title="data", title_align="left")
    Console().print(Panel(Group(facts, data), title=Text(f"process {process_id}")))


@app.command("list")
def list_(
    workflow: Annotated[
        str | None,
        typer.Option(help="Only this workflow path; a trailing * makes it a prefix (billing/*)."),
    ] = None,
    state: Annotated[str | None, typer.Option(help="Only processes in this state.")] = None,
    parent: Annotated[str | None, typer.Option(help="Only children of this process.")] = None,
    prefix: Annotated[str | None, typer.Option("--id", help="Only ids starting with this.")] = None,
    limit: Annotated[int, typer.Option(help="Processes per page (1 to 500).")] = 50,
    cursor: Annotated[str | None, typer.Option(help="Start at this page cursor.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Processes, most recently updated first, a page at a time."""
    with remote.client() as api:
        page = api.processes(
            workflow=workflow, state=state, parent=parent, q=prefix, limit=limit, cursor=cursor
        ).raw
    if as_json:
        remote.print_json(page)
        return
    table = Table("id", "workflow", "state", "seq", "updated", "parent", title="processes")
    processes = page.get("items")
    for process in processes if isinstance(processes, list) else []:
        row = process if isinstance(process, dict) else {}
        table.add_row(
            Text(str(row.get("id"))),  # whole: what `charter show` and `timers` take
            Text(str(row.get("workflow"))),
            Text(str(row.get("state"))),
            str(row.get("seq")),
            when.human(row.get("updated_at")),
            Text(str(row.get("parent") or "-")),
        )
    tables.show(tables.whole(table, "id", "parent"))
    if page.get("next_cursor"):
        typer.echo(f"more: --cursor {page['next_cursor']}")


def history(process_id: ProcessId, as_json: JsonFlag = False) -> None:
    """Every event: seq, time, actor, action, hash and what caused automated ones."""
    with remote.client() as api:
        events = [event.raw for event in api.events(process_id)]
    if as_json:
        remote.print_json({"events": list(events)})
        return
    table = Table(
        "seq", "at", "actor", "action", "revision", "hash", "caused by",
        title=f"history of {process_id}",
    )  # fmt: skip
    for event in events:
        envelope = event.get("envelope")
        envelope = envelope if isinstance(envelope, dict) else {}
        table.add_row(
            str(event.get("seq")),
            str(envelope.get("at", "")),
            Text(str(event.get("actor_id") or remote.short(envelope.get("actor")))),
            Text(str(envelope.get("action", ""))),
            str(event.get("revision") or ""),
            remote.short(event.get("hash")),
            Text(provenance(event)),
        )
    tables.show(tables.whole(table, "actor"))


def provenance(event: JsonObject) -> str:
    """What caused an event: `scheduled_action ← <hash>`, `auto_action ← <hash>`,
    `spawn ← <parent event>`, `migration <ticket>`, or empty for an actor's own event."""
    envelope = event.get("envelope")
    if not isinstance(envelope, dict):
        return ""
    if event.get("kind") == "spawn":
        return f"spawn ← {remote.short(envelope.get('cause'))}"
    input_ = envelope.get("input")
    if envelope.get("action") == MIGRATE_ACTION and isinstance(input_, dict):
        return f"migration {input_.get('reason')}"
    meta = input_.get("meta") if isinstance(input_, dict) else None
    automation = meta.get("automation") if isinstance(meta, dict) else None
    if not isinstance(automation, dict):
        return ""
    cause = automation.get("scheduled_by_event_hash") or automation.get("queued_by_event_hash")
    return f"{automation.get('kind', 'automation')} ← {remote.short(cause)}"


def _json_text(value: JsonValue) -> Text:
    return Text(json.dumps(value, indent=2, ensure_ascii=False))
