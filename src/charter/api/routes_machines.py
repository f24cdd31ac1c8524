"""Machine registration (`/v1/machines`, bearer token): administration.

`automations:write` registers, disables and enables a machine of the token's principal
(`*` may name any principal), `automations:read` lists them. The machines themselves
speak the DPoP-authenticated machine API (`routes_machine`).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from charter.api.auth import require
from charter.api.automation_models import Machine, Machines
from charter.api.bodies import fields, json_body, text
from charter.api.contract import NAME, PRINCIPAL, answers
from charter.api.listing import listing
from charter.api.schemas import request_body
from charter.api.state import Services, services
from charter.auth.tokens import ALL_SCOPES, TokenInfo
from charter.automations import machines
from charter.core import identifiers
from charter.core.errors import Forbidden, Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Role

router = APIRouter(tags=["machines"])
Context = Annotated[Services, Depends(services)]
Body = Annotated[JsonValue, Depends(json_body)]
Writer = Annotated[TokenInfo, Depends(require("automations:write"))]
Reader = Annotated[TokenInfo, Depends(require("automations:read"))]

_NAME = identifiers.NAME
MachineId = Annotated[str, Path(description="A machine's id.", json_schema_extra={"pattern": NAME})]
_NO_MACHINE = {404: "`not_found`: no such machine of the token's principal."}


@router.post(
    "/v1/machines",
    openapi_extra=request_body(
        {
            "type": "object",
            "required": ["target", "public_jwk"],
            "additionalProperties": False,
            "properties": {
                "target": {"type": "string", "pattern": NAME},
                "public_jwk": {"type": "object", "description": "An OKP Ed25519 public JWK."},
                "id": {"type": "string", "pattern": NAME},
                "principal": {"type": "string", "pattern": PRINCIPAL},
            },
        },
        "A machine: its target, its public key, and optionally its id and (for a `*` "
        "token) its principal.",
    ),
    **answers(
        Machine, 409, 422,
        status=201,
        why={409: "`duplicate`: the id or the key is registered already.",
             422: "The public JWK is not an Ed25519 public key."},
    ),
)  # fmt: skip
def register_machine(context: Context, token: Writer, body: Body) -> JSONResponse:
    """Register a machine: `{"target", "public_jwk", "id"?, "principal"?}` → 201.

    The machine belongs to the token's principal and claims only that principal's runs
    for its target; a `*` token may register it for another `principal`.
    """
    request = fields(body, {"target", "public_jwk"}, {"id", "principal"})
    target = _name(request, "target")
    machine_id = _name(request, "id") if "id" in request else f"m-{secrets.token_hex(6)}"
    principal = token.principal
    if "principal" in request:
        if ALL_SCOPES not in token.scopes:
            raise Forbidden("only a '*' token may register a machine for another principal")
        principal = text(request, "principal")
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        machine = machines.register_machine(
            conn,
            machine_id=machine_id,
            target=target,
            principal=principal,
            public_jwk=request["public_jwk"],
            now=context.engine.clock.now_or_none(),
        )
    return JSONResponse(machine.to_json(), status_code=201)


@router.get("/v1/machines", **answers(Machines))
def list_machines(context: Context, token: Reader) -> JSONResponse:
    """The token principal's machines (every machine for a `*` token), each with
    `last_seen_at` and `runs_in_progress`; `can_change` says whether this token may
    disable and enable them (`automations:write`), so a client shows only what works."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        found = machines.list_machines(conn, token.principal, everyone=ALL_SCOPES in token.scopes)
    items = [m.to_json() for m in found]
    can_change = token.grants("automations:write")
    return JSONResponse(listing(items, deprecated_key="machines", can_change=can_change))


@router.post("/v1/machines/{machine_id}/disable", **answers(Machine, 404, why=_NO_MACHINE))
def disable_machine(machine_id: MachineId, context: Context, token: Writer) -> JSONResponse:
    """Disable a machine: its DPoP proofs are refused from now on."""
    return _set_disabled(context, token, machine_id, disabled=True)


@router.post("/v1/machines/{machine_id}/enable", **answers(Machine, 404, why=_NO_MACHINE))
def enable_machine(machine_id: MachineId, context: Context, token: Writer) -> JSONResponse:
    """Enable a disabled machine again."""
    return _set_disabled(context, token, machine_id, disabled=False)


def _set_disabled(
    context: Services, token: TokenInfo, machine_id: str, *, disabled: bool
) -> JSONResponse:
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        machine = machines.set_machine_disabled(
            conn,
            machine_id,
            token.principal,
            disabled=disabled,
            everyone=ALL_SCOPES in token.scopes,
            now=context.engine.clock.now_or_none(),
        )
    return JSONResponse(machine.to_json())


def _name(body: JsonObject, key: str) -> str:
    value = text(body, key)
    if not _NAME.fullmatch(value):
        raise Malformed(f"{key} must match {_NAME.pattern}", field=key)
    return value
