"""Response models of the operator routes, for /openapi.json.

The routes answer with JSONResponse (rows are built as JSON once, not validated twice);
these models describe those answers to readers of the OpenAPI document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from charter.api.wire_models import model, page_model
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


ProcessPage = page_model(Process, "ProcessPage", old_key="processes")
ScheduledPage = page_model(WorkRow, "ScheduledPage", old_key="scheduled")
QueuePage = page_model(WorkRow, "QueuePage", old_key="queue")
