"""The workflow registry: list and show (`processes:read`), deploy (`workflows:write`).

Reading definitions takes only `processes:read`: whoever may read a process may read
the rules it runs under; changing them is the separate `workflows:write`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse

from charter.api import schemas
from charter.api.auth import require
from charter.api.bodies import fields, json_body, text
from charter.api.contract import WORKFLOW_PATH, answers
from charter.api.listing import listing
from charter.api.models import Deployed, WorkflowDetail, Workflows
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.core import ijson
from charter.core.errors import UnknownWorkflow
from charter.core.jsontypes import JsonValue
from charter.db.database import Role
from charter.engine.registry import list_deployments, revisions, workflow_json
from charter.engine.store import Store

router = APIRouter(tags=["workflows"])
Context = Annotated[Services, Depends(services)]


@router.get("/v1/workflows", **answers(Workflows))
def list_workflows(
    context: Context, _token: Annotated[TokenInfo, Depends(require("processes:read"))]
) -> JSONResponse:
    """Each deployed path with its current version and revision."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        deployments = list_deployments(conn)
    return JSONResponse(listing([d.to_json() for d in deployments], deprecated_key="workflows"))


@router.get(
    "/v1/workflows/{path:path}",
    **answers(
        WorkflowDetail,
        404,
        why={404: "`unknown_workflow`: nothing deployed there, or no such revision."},
    ),
)
def show_workflow(
    path: Annotated[
        str,
        Path(description="A workflow path.", json_schema_extra={"pattern": WORKFLOW_PATH}),
    ],
    context: Context,
    _token: Annotated[TokenInfo, Depends(require("processes:read"))],
    revision: Annotated[
        int | None,
        Query(ge=1, le=2**31 - 1, description="Show this revision's definition, not the current."),
    ] = None,
) -> JSONResponse:
    """The current definition at a path (or that of `revision`) and every revision,
    newest first."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        history = revisions(conn, path)
        shown = history[0]
        if revision is not None:
            chosen = [d for d in history if d.revision == revision]
            if not chosen:
                raise UnknownWorkflow(
                    f"{path!r} has no revision {revision} (its newest is {history[0].revision})"
                )
            shown = chosen[0]
        text = Store(conn).workflow_definition_text(shown.version)
    if text is None:  # the registry is append-only; a deployment names a stored version
        raise UnknownWorkflow(f"the definition of {path!r} is missing")
    return JSONResponse(workflow_json(history, ijson.loads(text), shown))


@router.post(
    "/v1/workflows",
    openapi_extra=schemas.DEPLOY,
    **answers(
        Deployed, 409, 422,
        status=201,
        description='A new revision, `"unchanged": false`: warnings deploy, problems do not.',
        why={
            409: "A concurrent deploy at the same path won the revision: try again.",
            422: "`invalid_workflow` with every problem and its JSON pointer.",
        },
        also={200: {"model": Deployed, "description": 'The path runs this definition '
                    'already: its current revision, `"unchanged": true`.'}},
    ),
)  # fmt: skip
def deploy_workflow(
    body: Annotated[JsonValue, Depends(json_body)],
    context: Context,
    token: Annotated[TokenInfo, Depends(require("workflows:write"))],
) -> JSONResponse:
    """Validate and deploy a definition at a path (a new revision; old ones stay). The
    definition that is the path's current version already is not deployed again: 200 with
    the current revision and `"unchanged": true`."""
    request = fields(body, {"path", "definition"})
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        deployment = context.engine.registry.deploy(
            conn,
            text(request, "path"),
            request["definition"],
            deployed_by=token.principal,
            deployed_by_token=token.id,
        )
    # 200 and the current revision for the definition deployed there already.
    answer = deployment.deployed_json()
    return JSONResponse(answer, status_code=200 if deployment.unchanged else 201)
