"""Runs of the principal's automations (`runs:read`): the ledger, newest first, and one
run with its step journal. Another principal's runs are 404, never 403; a `*` token
sees and acts on every principal's."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse

from charter import wire
from charter.api.auth import require
from charter.api.automation_models import Run, RunDetail, RunPage
from charter.api.contract import UUID, answers
from charter.api.listing import listing
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.automations import checks, ledger
from charter.automations.store import Control
from charter.core.errors import Malformed
from charter.core.errors.automations import RunNotFailed
from charter.db.database import Role
from charter.wire import automations

router = APIRouter(tags=["runs"])
Context = Annotated[Services, Depends(services)]
Reader = Annotated[TokenInfo, Depends(require("runs:read"))]
Executor = Annotated[TokenInfo, Depends(require("runs:execute"))]
RunId = Annotated[str, Path(description="A run's id.", json_schema_extra={"pattern": UUID})]
_MISSING = {404: "`not_found`: no such run of the token's principal (of anyone's, for `*`)."}


@router.get("/v1/runs", **answers(RunPage))
def list_runs(
    context: Context,
    token: Reader,
    status: Annotated[
        str | None,
        Query(
            description="Only runs in this status.",
            json_schema_extra={"enum": list(automations.RUN_STATUSES)},
        ),
    ] = None,
    automation_id: Annotated[
        str | None,
        Query(description="Only runs of this automation.", json_schema_extra={"pattern": UUID}),
    ] = None,
    cursor: Annotated[
        str | None,
        Query(
            description="`next_cursor` of the previous page (empty: the first page).",
            json_schema_extra={"pattern": "^[A-Za-z0-9_-]*$"},
        ),
    ] = None,
    limit: Annotated[
        int,
        Query(
            description=f"Runs per page (1 to {checks.MAX_PAGE}).",
            json_schema_extra={"minimum": 1, "maximum": checks.MAX_PAGE},
        ),
    ] = checks.DEFAULT_PAGE,
) -> JSONResponse:
    """A page of the principal's runs (every principal's for `*`), newest first:
    `{"items", "next_cursor"}`."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        runs, following = ledger.list_runs(
            conn,
            token.principal,
            status=status,
            automation_id=_filter_id(automation_id),
            cursor=cursor,
            limit=checks.check_limit(limit),
            everyone=token.admin,
        )
    return JSONResponse(listing([r.to_json() for r in runs], following))


@router.get("/v1/runs/{run_id}", **answers(RunDetail, 404, why=_MISSING))
def show_run(run_id: RunId, context: Context, token: Reader) -> JSONResponse:
    """A run (with its immutable plan snapshot) and its step journal in plan order."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        run = ledger.get_run(conn, token.principal, run_id, everyone=token.admin)
        steps = ledger.run_steps(conn, run.id)
    return JSONResponse(wire.to_json({"run": run, "steps": steps}, automations.RunDetail))


@router.post(
    "/v1/runs/{run_id}/cancel",
    **answers(Run, 404, 409, why={**_MISSING, 409: "`run_finished`: it has finished."}),
)
def cancel_run(run_id: RunId, context: Context, token: Executor) -> JSONResponse:
    """Cancel a pending or running run: it fails with `cancelled by an operator`, and a
    machine holding it is refused from its next call on (409 `run_finished` if it has
    finished already)."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        run = ledger.cancel_run(
            conn,
            token.principal,
            run_id,
            now=context.engine.clock.now_or_none(),
            everyone=token.admin,
        )
    return JSONResponse(run.to_json())


@router.post(
    "/v1/runs/{run_id}/retry",
    **answers(
        Run, 404, 409,
        status=201,
        why={
            **_MISSING,
            409: "`run_not_failed`, or the automation is paused (`automation_paused`) or "
            "has no plan (`no_plan`).",
        },
    ),
)  # fmt: skip
def retry_run(run_id: RunId, context: Context, token: Executor) -> JSONResponse:
    """Retry a failed run: admit a new manual run of its automation with the same input
    and the automation's current plan (409 `run_not_failed` for a run that has not
    failed; 409 when the automation is paused or has no plan). Answers the new run."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        failed = ledger.get_run(conn, token.principal, run_id, everyone=token.admin)
        if failed.status != "failed":
            raise RunNotFailed(f"run {failed.id} is {failed.status}: only a failed run is retried")
        control = Control(conn, token.principal, context.engine.clock, everyone=token.admin)
        run = control.trigger(failed.automation_id, failed.input)
    return JSONResponse(run.to_json(), status_code=201)


def _filter_id(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Malformed(f"automation_id must be a UUID, got {value[:60]!r}") from None
