"""How many processes of a workflow path are in each state, by revision (`processes:read`).

`/v1/workflows/{path:path}` would take `a/b/states` for a path: this router is included
before the registry's, so a trailing `/states` always means these counts, and no
workflow may be deployed at a path that ends in `/states` (the registry refuses it).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from charter import wire
from charter.api.auth import require
from charter.api.contract import WORKFLOW_PATH, answers
from charter.api.listing import listing
from charter.api.models import WorkflowStates
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.db.database import Role
from charter.engine.registry import state_counts

router = APIRouter(tags=["workflows"])
Context = Annotated[Services, Depends(services)]


@router.get(
    "/v1/workflows/{path:path}/states",
    **answers(WorkflowStates, 404, why={404: "`unknown_workflow`: nothing deployed there."}),
)
def list_workflow_states(
    path: Annotated[
        str,
        Path(description="A workflow path.", json_schema_extra={"pattern": WORKFLOW_PATH}),
    ],
    context: Context,
    _token: Annotated[TokenInfo, Depends(require("processes:read"))],
) -> JSONResponse:
    """How many processes at a path are in each state, grouped by the revision their last
    event was decided under: newest revision first, then by state."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        counts = state_counts(conn, path)
    return JSONResponse(listing([wire.to_json(c) for c in counts]))
