"""Response models of the operator routes, for /openapi.json.

The routes answer with JSONResponse (rows are built as JSON once, not validated twice);
these models describe those answers to readers of the OpenAPI document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from charter.api.listing import alias_field, cursor_field
from charter.api.wire_models import model
from charter.wire import engine as wire

if TYPE_CHECKING:
    # What the pages below name in annotations; made at run time from the wire.
    Process = BaseModel
else:
    Process = model(
        wire.Process,
        detail=True,
        name="Process",
        description="`<process>` (docs/wire-format.md) with its children's ids, as GET "
        "/v1/processes/{id}.",
    )


class ProcessPage(BaseModel):
    items: list[Process]
    next_cursor: str | None = cursor_field()
    processes: list[Process] = alias_field()


class ProcessCount(BaseModel):
    workflow: str
    state: str
    count: int


class Stats(BaseModel):
    processes: list[ProcessCount]
    timers_due_next_hour: int = Field(description="Active scheduled actions due within the hour.")
    queue: dict[str, int] = Field(description="Automatic-action queue rows by status.")
    failed_work: int = Field(description="Scheduled actions and queue rows that failed for good.")
    runs: dict[str, int] = Field(
        description="Runs by status: the token principal's (everyone's for `*`); empty "
        "without `runs:read`."
    )
    machines_seen_recently: int | None = Field(
        description="Machines that authenticated in the last 5 minutes (the principal's, "
        "everyone's for `*`); null without `automations:read`."
    )
    as_of: str = Field(description="The database time the counts were taken at.")


class WorkRow(BaseModel):
    """A scheduled action or an automatic-action queue row, small and readable."""

    id: str
    kind: str = Field(description="`scheduled_action` or `auto_action`.")
    what: str = Field(description="The action it fires.")
    process: str
    workflow: str
    due: str | None = Field(description="When it fires (next occurrence, or retry time).")
    status: str
    attempts: int
    last_error: str | None
    last_attempt_at: str | None
    last_result: str | None
    schedule_id: str | None = None
    every: str | None = None
    retry_at: str | None = None
    queued_at: str | None = None


class ScheduledPage(BaseModel):
    items: list[WorkRow]
    next_cursor: str | None = cursor_field()
    scheduled: list[WorkRow] = alias_field()


class QueuePage(BaseModel):
    items: list[WorkRow]
    next_cursor: str | None = cursor_field()
    queue: list[WorkRow] = alias_field()
