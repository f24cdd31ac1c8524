"""`charter timers [PROCESS]`: scheduled actions and queued automatic actions, for
people — what fires, when, its status and its last error."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from charter.cli import ids, remote, tables, when
from charter.core.jsontypes import JsonObject, JsonValue
from charter.sdk import WorkFilter

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def timers(
    process: Annotated[
        str | None,
        typer.Argument(help="A process id or a unique start of one; every process if left out."),
    ] = None,
    workflow: Annotated[
        str | None, typer.Option(help="Only this workflow (a trailing * makes it a prefix).")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            help="Only rows in this status (scheduled: active, claimed, done, ...; "
            "queue: pending, claimed, ...); done and exhausted are the same rows."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows of each kind (1 to 500).")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Scheduled and queued work: soonest timers first, then the queue."""
    status = STATUS_ALIASES.get(status, status) if status is not None else None
    with remote.client() as api:
        process_id = ids.resolve_process(api, process) if process else None
        # A status of one view alone (`pending`, `active`) leaves the other empty; one of
        # neither goes to both, and the API names the mistake.
        known = status is None or status in _SCHEDULED + _QUEUE
        scheduled: JsonObject = {"items": [], "next_cursor": None}
        queued: JsonObject = {"items": [], "next_cursor": None}
        rows = WorkFilter(status=status, workflow=workflow, process=process_id)
        if not known or status is None or status in _SCHEDULED:
            scheduled = api.scheduled(rows, limit=limit).raw
        if not known or status is None or status in _QUEUE:
            queued = api.queue(rows, limit=limit).raw
    if as_json:
        remote.print_json({"scheduled": scheduled, "queue": queued})
        return
    where = f" of {process_id}" if process_id else ""
    tables.show(_table(f"scheduled actions{where}", _rows(scheduled), process_id))
    tables.show(_table(f"queued automatic actions{where}", _rows(queued), process_id))
    for page, name in ((scheduled, "scheduled"), (queued, "queue")):
        if page.get("next_cursor"):
            typer.echo(f"more {name} rows than --limit {limit}: narrow with --status or --workflow")


_SCHEDULED = ("active", "claimed", "cancelled", "exhausted", "skipped", "failed")
_QUEUE = ("pending", "claimed", "completed", "skipped", "failed", "cancelled")
# What a person may type for a stored status.
STATUS_ALIASES = {"done": "exhausted"}


def shown_status(row: JsonObject) -> str:
    """A row's status as people read it. The API's `exhausted` means the schedule will not
    fire again: for a one-shot timer that is `done` (it fired); a repeating schedule
    that ran out of its count or passed its until stays `exhausted`."""
    status = str(row.get("status"))
    if status == "exhausted" and row.get("kind") == "scheduled_action" and not row.get("every"):
        return "done"
    return status


def _rows(page: JsonObject) -> list[JsonObject]:
    rows: JsonValue = page.get("items")
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []


def _table(title: str, rows: list[JsonObject], process_id: str | None) -> Table:
    columns = ["what", "when", "status", "attempts", "last error"]
    if process_id is None:
        columns[1:1] = ["process", "workflow"]
    table = tables.whole(Table(*columns, title=title), "process")
    for row in rows:
        cells: list[Text | str] = [
            Text(str(row.get("what"))),
            when.human(row.get("due")),
            shown_status(row),
            str(row.get("attempts")),
            Text(str(row.get("last_error") or "-")),
        ]
        if process_id is None:
            cells[1:1] = [Text(str(row.get("process"))), Text(str(row.get("workflow")))]
        table.add_row(*cells)
    return table
