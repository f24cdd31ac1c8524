"""Actors: list (`processes:read`); register, rotate keys, roles, disable (`actors:write`).

Listing actors takes only `processes:read`: events name their actors, and a reader of
events needs to see who they are. The automation actor's key signs every automated
event: registering it, rotating its key, disabling or enabling it takes a `*` token,
and its roles never change (AUTOMATION alone, `automation_roles_fixed`). Every change
is written to system_log with the token's principal.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from charter.api import schemas
from charter.api.auth import require
from charter.api.bodies import fields, json_body, strings, text
from charter.api.contract import PRINCIPAL, answers
from charter.api.listing import listing
from charter.api.models import Actor, Actors
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.core.errors import Forbidden
from charter.core.jsontypes import JsonValue
from charter.db.database import Role
from charter.engine import actors
from charter.engine.records import AUTOMATION_ACTOR_ID

router = APIRouter(tags=["actors"])
Context = Annotated[Services, Depends(services)]
Reader = Annotated[TokenInfo, Depends(require("processes:read"))]
Writer = Annotated[TokenInfo, Depends(require("actors:write"))]
Body = Annotated[JsonValue, Depends(json_body)]
ActorId = Annotated[str, Path(description="An actor id.", json_schema_extra={"pattern": PRINCIPAL})]
_NOT_FOUND = {404: "`not_found`: no such actor."}
_KEY = {422: "`invalid_public_key`: not a canonical Ed25519 key, or a small-order one."}
_STAR = {403: "`forbidden`: the token lacks `actors:write`, or (for the automation actor) `*`."}
_FIXED = "`automation_roles_fixed`: the automation actor holds AUTOMATION alone."


def _changer(token: TokenInfo) -> actors.Changer:
    return actors.Changer(token.principal, token.id)


def _guard_automation(actor_id: str, token: TokenInfo, what: str) -> None:
    """The automation actor's key and status change only with a `*` token."""
    if actor_id == AUTOMATION_ACTOR_ID and not token.admin:
        raise Forbidden(
            f"{what} the automation actor takes a '*' token: its key signs every "
            "automated event (this token has actors:write only)",
            scope="*",
        )


@router.get("/v1/actors", **answers(Actors))
def list_actors(context: Context, _token: Reader) -> JSONResponse:
    """Every actor with its roles and active key."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        found = actors.list_actors(conn)
    return JSONResponse(listing([a.to_json() for a in found], deprecated_key="actors"))


@router.get("/v1/actors/{actor_id}", **answers(Actor, 404, why=_NOT_FOUND))
def get_actor(actor_id: ActorId, context: Context, _token: Reader) -> JSONResponse:
    """One actor."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        return JSONResponse(actors.get_actor(conn, actor_id).to_json())


@router.post(
    "/v1/actors",
    openapi_extra=schemas.ACTOR,
    **answers(
        Actor, 409, 422,
        status=201,
        why={
            **_STAR,
            409: "`duplicate`: the id or key is taken.",
            422: f"{_KEY[422]} {_FIXED}",
        },
    ),
)  # fmt: skip
def add_actor(body: Body, context: Context, token: Writer) -> JSONResponse:
    """Register an actor with its first key (checked: canonical, not small-order). The
    automation actor takes a `*` token and the AUTOMATION role alone."""
    request = fields(body, {"id", "public_key", "roles"})
    actor_id, roles = text(request, "id"), strings(request, "roles")
    actors.check_roles(actor_id, roles)
    _guard_automation(actor_id, token, "registering")
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = actors.add_actor(
            conn, actor_id, text(request, "public_key"), roles, by=_changer(token)
        )
    return JSONResponse(record.to_json(), status_code=201)


@router.post(
    "/v1/actors/{actor_id}/keys",
    openapi_extra=schemas.KEY,
    **answers(
        Actor, 404, 409, 422,
        why={**_STAR, **_NOT_FOUND, 409: "`duplicate`: the key is taken.", **_KEY},
    ),
)  # fmt: skip
def rotate_actor_key(
    actor_id: ActorId, body: Body, context: Context, token: Writer
) -> JSONResponse:
    """Give the actor a new key; the old one is retired and still verifies its events
    (the automation actor's: a `*` token only)."""
    request = fields(body, {"public_key"})
    _guard_automation(actor_id, token, "rotating the key of")
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = actors.rotate_key(conn, actor_id, text(request, "public_key"), by=_changer(token))
    return JSONResponse(record.to_json())


@router.post(
    "/v1/actors/{actor_id}/roles",
    openapi_extra=schemas.ROLES,
    **answers(Actor, 404, 422, why={**_NOT_FOUND, 422: _FIXED}),
)
def set_actor_roles(actor_id: ActorId, body: Body, context: Context, token: Writer) -> JSONResponse:
    """Replace the actor's roles (never the automation actor's: 422
    `automation_roles_fixed`)."""
    request = fields(body, {"roles"})
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = actors.set_roles(conn, actor_id, strings(request, "roles"), by=_changer(token))
    return JSONResponse(record.to_json())


@router.post("/v1/actors/{actor_id}/disable", **answers(Actor, 404, why={**_STAR, **_NOT_FOUND}))
def disable_actor(actor_id: ActorId, context: Context, token: Writer) -> JSONResponse:
    """Disable the actor: its key signs nothing new; its history stays verifiable (the
    automation actor: a `*` token only)."""
    _guard_automation(actor_id, token, "disabling")
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = actors.set_disabled(conn, actor_id, True, by=_changer(token))
    return JSONResponse(record.to_json())


@router.post("/v1/actors/{actor_id}/enable", **answers(Actor, 404, why={**_STAR, **_NOT_FOUND}))
def enable_actor(actor_id: ActorId, context: Context, token: Writer) -> JSONResponse:
    """Enable a disabled actor again (the automation actor: a `*` token only)."""
    _guard_automation(actor_id, token, "enabling")
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = actors.set_disabled(conn, actor_id, False, by=_changer(token))
    return JSONResponse(record.to_json())
