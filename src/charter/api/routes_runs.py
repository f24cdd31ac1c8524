"""Runs of the principal's automations (`runs:read`): the ledger, newest first, and one
run with its step journal. Another principal's runs are 404, never 403."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from charter.api.auth import require
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.automations import control, ledger
from charter.core.errors import Malformed
from charter.db.database import Role

router = APIRouter(tags=["runs"])
Context = Annotated[Services, Depends(services)]
Reader = Annotated[TokenInfo, Depends(require("runs:read"))]


@router.get("/v1/runs")
def list_runs(
    context: Context,
    token: Reader,
    status: Annotated[
        str | None,
        Query(
            description="Only runs in this status.",
            json_schema_extra={"enum": list(ledger.RUN_STATUSES)},
        ),
    ] = None,
    automation_id: Annotated[str | None, Query(description="Only runs of this automation.")] = None,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page.")] = None,
    limit: Annotated[int, Query(description="Runs per page (1 to 500).")] = control.DEFAULT_PAGE,
) -> JSONResponse:
    """A page of the principal's runs, newest first: `{"items", "next_cursor"}`."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        runs, following = ledger.list_runs(
            conn,
            token.principal,
            status=status,
            automation_id=_filter_id(automation_id),
            cursor=cursor,
            limit=control.check_limit(limit),
        )
    return JSONResponse({"items": [r.to_json() for r in runs], "next_cursor": following})


@router.get("/v1/runs/{run_id}")
def show_run(run_id: str, context: Context, token: Reader) -> JSONResponse:
    """A run (with its immutable plan snapshot) and its step journal in plan order."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        run = ledger.get_run(conn, token.principal, run_id)
        steps = ledger.run_steps(conn, run.id)
    return JSONResponse({**run.to_json(), "steps": [s.to_json() for s in steps]})


def _filter_id(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Malformed(f"automation_id must be a UUID, got {value[:60]!r}") from None
