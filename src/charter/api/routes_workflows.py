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
from charter.api.models import Deployed, DeployPlan, WorkflowDetail, Workflows
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.core import ijson
from charter.core.errors import Malformed, UnknownWorkflow
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Role
from charter.dsl.model import NAME_PATTERN
from charter.engine.registry import list_deployments, parse_definition, revisions, workflow_json
from charter.engine.store import Store
from charter.lifecycle.guard import deploy_guarded
from charter.lifecycle.plan import PlanCursor, Planner
from charter.lifecycle.store import one_snapshot

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
        store = Store(conn)
        text = store.workflow_definition_text(shown.version)
        if text is None:  # the registry is append-only; a deployment names a stored version
            raise UnknownWorkflow(f"the definition of {path!r} is missing")
        personal = context.engine.registry.workflow(store, shown.version).personal()
    return JSONResponse(workflow_json(history, ijson.loads(text), shown, personal))


@router.post(
    "/v1/workflows",
    openapi_extra=schemas.DEPLOY,
    **answers(
        Deployed, 409, 422,
        status=201,
        description='A new revision, `"unchanged": false`: warnings deploy, problems do not.',
        why={
            409: "`strands_processes`: the deploy would strand processes or orphan their "
            "work that no migration covers (`plan`: its counts and first entries; "
            "`uncovered`: what the migration leaves); or `duplicate`: a concurrent deploy "
            "at the same path won the revision, try again.",
            422: "`invalid_workflow` with every problem and its JSON pointer; "
            "`invalid_input`: a migration the new definition cannot carry out.",
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
    the current revision and `"unchanged": true`.

    The deploy is planned first (`POST /v1/workflows/plan`): one that would strand
    processes or orphan their work is refused with 409 `strands_processes`, unless its
    `migration` map covers them or it says `"allow_stranding": true`."""
    request = fields(body, {"path", "definition"}, {"allow_stranding", "migration"})
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        deployment = deploy_guarded(
            conn,
            context.engine.registry,
            text(request, "path"),
            request["definition"],
            deployed_by=token.principal,
            deployed_by_token=token.id,
            allow_stranding=flag(request, "allow_stranding"),
            migration_map=migration_map(request),
        )
    # 200 and the current revision for the definition deployed there already.
    answer = deployment.deployed_json()
    return JSONResponse(answer, status_code=200 if deployment.unchanged else 201)


@router.post(
    "/v1/workflows/plan",
    openapi_extra=schemas.PLAN,
    **answers(
        DeployPlan, 400, 422,
        why={
            400: "`malformed` body or `invalid_cursor`.",
            422: "`invalid_workflow` with every problem and its JSON pointer.",
        },
    ),
)  # fmt: skip
def plan_workflow(
    body: Annotated[JsonValue, Depends(json_body)],
    context: Context,
    _token: Annotated[TokenInfo, Depends(require("workflows:write"))],
) -> JSONResponse:
    """What deploying a definition at a path would do to the processes there, without
    deploying it: the processes it would strand, the timers and queue rows it would
    orphan, and the processes whose history it would not accept (docs/lifecycle.md).
    Counts are whole; each list holds up to 100 entries, `next_cursor` pages on.
    `"replay": false` leaves out the diverging list, the one part that replays histories."""
    request = fields(body, {"path", "definition"}, {"cursor", "replay"})
    replay = flag(request, "replay", default=True)
    path = text(request, "path")
    workflow = parse_definition(path, request["definition"])
    cursor = PlanCursor.decode(text(request, "cursor")) if "cursor" in request else None
    # One snapshot for every read: the counts and the lists agree.
    with context.database.connection(Role.READER) as conn, conn.transaction():
        one_snapshot(conn)
        planner = Planner(conn, context.engine.registry, path, request["definition"], workflow)
        plan = planner.plan(cursor, replay=replay)
    return JSONResponse(plan.to_json())


def flag(body: JsonObject, key: str, *, default: bool = False) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise Malformed(f"{key} must be true or false", field=key)
    return value


def migration_map(body: JsonObject) -> dict[str, str] | None:
    """The `migration.map` of a deploy: old state names to new ones."""
    if "migration" not in body:
        return None
    migration = fields(body["migration"], {"map"})
    found = migration["map"]
    if not isinstance(found, dict) or not found:
        raise Malformed("migration.map must be an object of state names", field="migration")
    for old, new in found.items():
        if (
            not NAME_PATTERN.fullmatch(old)
            or not isinstance(new, str)
            or not NAME_PATTERN.fullmatch(new)
        ):
            raise Malformed(
                f"migration.map {old[:40]!r}: each entry maps a state name to a state name",
                field="migration",
            )
    return {str(old): str(new) for old, new in found.items()}
