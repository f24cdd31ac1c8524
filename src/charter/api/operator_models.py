"""Response models of the operator routes, for /openapi.json.

The routes answer with JSONResponse (rows are built as JSON once, not validated twice);
these models describe those answers to readers of the OpenAPI document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from charter.api.listing import alias_field, cursor_field
from charter.api.wire_models import model
from charter.wire import engine as wire

if TYPE_CHECKING:
    # What the pages below name in annotations; made at run time from the wire.
    Process = BaseModel
    Stats = BaseModel
    WorkRow = BaseModel
else:
    Process = model(
        wire.Process,
        detail=True,
        name="Process",
        description="`<process>` (docs/wire-format.md) with its children's ids, as GET "
        "/v1/processes/{id}.",
    )
    Stats = model(wire.Stats)
    WorkRow = model(wire.WorkItem)


class ProcessPage(BaseModel):
    items: list[Process]
    next_cursor: str | None = cursor_field()
    processes: list[Process] = alias_field()


class ScheduledPage(BaseModel):
    items: list[WorkRow]
    next_cursor: str | None = cursor_field()
    scheduled: list[WorkRow] = alias_field()


class QueuePage(BaseModel):
    items: list[WorkRow]
    next_cursor: str | None = cursor_field()
    queue: list[WorkRow] = alias_field()
