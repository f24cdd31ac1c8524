"""The operator's views across processes (`processes:read`): the process list, counts,
and the global scheduled-action and queue views, all keyset-paginated.

`workflow` is an exact path, or a prefix when it ends with `*` (`billing/*`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import WithJsonSchema

from charter import wire
from charter.api.auth import require
from charter.api.contract import NAME, errors
from charter.api.listing import listing
from charter.api.operator_models import ProcessPage, QueuePage, ScheduledPage, Stats
from charter.api.state import Services, services
from charter.auth.tokens import ALL_SCOPES, TokenInfo
from charter.db.database import Role
from charter.operator import paging, reads
from charter.wire import engine as shapes

router = APIRouter(tags=["operator"])
Context = Annotated[Services, Depends(services)]
Reader = Annotated[TokenInfo, Depends(require("processes:read"))]

WorkflowQuery = Annotated[
    str | None,
    Query(description="A workflow path, or a path prefix ending with `*` (`billing/*`)."),
]
CursorQuery = Annotated[
    str | None,
    Query(
        description="`next_cursor` of the previous page (else 400 `invalid_cursor`).",
        json_schema_extra={"pattern": "^[A-Za-z0-9_-]+$"},
    ),
]
# Read as text and parsed by paging.check_limit, so that every bad value (a word,
# thousands of digits) is `invalid_limit`; the document still says integer.
LimitQuery = Annotated[
    str | None,
    Query(
        description=f"Rows per page, 1 to {paging.MAX_LIMIT}, {paging.DEFAULT_LIMIT} when "
        "absent (else 400 `invalid_limit`)."
    ),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": paging.MAX_LIMIT}),
]
TimeQuery = Annotated[
    str | None,
    Query(description="RFC 3339; exclusive.", json_schema_extra={"format": "date-time"}),
]
_ERRORS = errors(why={400: "`invalid_limit`, `invalid_cursor`, `invalid_filter` or `malformed`."})


@router.get("/v1/processes", response_model=ProcessPage, responses=_ERRORS)
def list_processes(
    context: Context,
    _token: Reader,
    workflow: WorkflowQuery = None,
    state: Annotated[str | None, Query(description="Only processes in this state.")] = None,
    parent: Annotated[str | None, Query(description="Only children of this process.")] = None,
    updated_after: TimeQuery = None,
    updated_before: TimeQuery = None,
    q: Annotated[
        str | None,
        Query(description="The start of a process id.", json_schema_extra={"pattern": NAME}),
    ] = None,
    cursor: CursorQuery = None,
    limit: LimitQuery = None,
) -> JSONResponse:
    """Processes, newest first (by last update, then id), a page at a time."""
    where = reads.ProcessFilter(
        workflow=workflow,
        state=state,
        parent=parent,
        updated_after=paging.moment("updated_after", updated_after),
        updated_before=paging.moment("updated_before", updated_before),
        id_like=paging.id_prefix(q),
    )
    rows = paging.check_limit(limit)
    with context.database.connection(Role.READER) as conn, conn.transaction():
        page = reads.list_processes(conn, where, cursor=cursor, limit=rows)
    return JSONResponse(listing(page.items, page.next_cursor, deprecated_key="processes"))


@router.get("/v1/stats", response_model=Stats, responses=_ERRORS)
def get_stats(context: Context, token: Reader) -> JSONResponse:
    """Counts for an overview: processes by workflow and state, timers due within the
    hour, the queue by status, failed work, runs by status, machines seen recently."""
    now = context.engine.clock.now_or_none()
    everyone = ALL_SCOPES in token.scopes
    with context.database.connection(Role.READER) as conn, conn.transaction():
        body = reads.process_stats(conn, now=now)
        runs = (
            reads.run_stats(conn, principal=token.principal, everyone=everyone)
            if token.grants("runs:read")
            else {}
        )
    machines = None
    if token.grants("automations:read"):
        # DPoP proofs are the engine role's to read, as the machine routes do.
        with context.database.connection(Role.ENGINE) as conn, conn.transaction():
            machines = reads.machines_seen(
                conn, principal=token.principal, everyone=everyone, now=now
            )
    counts = {**body, "runs": runs, "machines_seen_recently": machines}
    return JSONResponse(wire.to_json(counts, shapes.Stats))


def _work_filter(
    status: str | None,
    due_before: str | None,
    workflow: str | None,
    process: str | None,
    statuses: tuple[str, ...],
) -> reads.WorkFilter:
    return reads.WorkFilter(
        status=paging.choice("status", status, statuses),
        due_before=paging.moment("due_before", due_before),
        workflow=workflow,
        process=process,
    )


DueQuery = Annotated[
    str | None,
    Query(
        description="RFC 3339: only work due before this.",
        json_schema_extra={"format": "date-time"},
    ),
]
ProcessQuery = Annotated[str | None, Query(description="Only this process's work.")]


@router.get("/v1/automation/scheduled", response_model=ScheduledPage, responses=_ERRORS)
def list_scheduled(
    context: Context,
    _token: Reader,
    status: Annotated[
        str | None,
        Query(
            description="Only rows in this status.",
            json_schema_extra={"enum": list(reads.SCHEDULED_STATUSES)},
        ),
    ] = None,
    due_before: DueQuery = None,
    workflow: WorkflowQuery = None,
    process: ProcessQuery = None,
    cursor: CursorQuery = None,
    limit: LimitQuery = None,
) -> JSONResponse:
    """Scheduled actions of every process, soonest first: the global timer view."""
    where = _work_filter(status, due_before, workflow, process, reads.SCHEDULED_STATUSES)
    rows = paging.check_limit(limit)
    with context.database.connection(Role.READER) as conn, conn.transaction():
        page = reads.list_scheduled(conn, where, cursor=cursor, limit=rows)
    return JSONResponse(listing(page.items, page.next_cursor, deprecated_key="scheduled"))


@router.get("/v1/automation/queue", response_model=QueuePage, responses=_ERRORS)
def list_queue(
    context: Context,
    _token: Reader,
    status: Annotated[
        str | None,
        Query(
            description="Only rows in this status.",
            json_schema_extra={"enum": list(reads.QUEUE_STATUSES)},
        ),
    ] = None,
    due_before: DueQuery = None,
    workflow: WorkflowQuery = None,
    process: ProcessQuery = None,
    cursor: CursorQuery = None,
    limit: LimitQuery = None,
) -> JSONResponse:
    """Automatic-action queue rows of every process, oldest first: the failure view."""
    where = _work_filter(status, due_before, workflow, process, reads.QUEUE_STATUSES)
    rows = paging.check_limit(limit)
    with context.database.connection(Role.READER) as conn, conn.transaction():
        page = reads.list_queue(conn, where, cursor=cursor, limit=rows)
    return JSONResponse(listing(page.items, page.next_cursor, deprecated_key="queue"))
