"""`POST /events`: Standard Webhooks deliveries admitted as runs (docs/automations.md and
docs/architecture.md).

Routing headers name whose automations and which target the delivery is for; the
signature (not a bearer token) is the authority. Responses:

- 202 `{"runs": [ids]}`: the delivery verified; one pending run per matching trigger
  (an empty list for a replayed `webhook-id` or an event no trigger wants). 202, not
  201: runs are queued for a machine, nothing has executed yet.
- 400: routing headers missing or invalid, body not strict JSON, no source.
- 401: Standard Webhooks headers missing or malformed, timestamp outside ±5 minutes, or
  no matching trigger's secret verifies the signature; nothing is created.
- 413: body over the limit, decided by the app's BodyLimit before this route (or its
  routing headers) is looked at, with or without a Content-Length.
- any other 4xx raised inside passes through with its message;
- 503 `database_unavailable` (or `serialization_conflict`) with `Retry-After`, as every
  route answers when the database cannot be reached or a pooled connection was cut:
  nothing was admitted, and a sender's retry will be;
- anything else is a 500 with one generic message and the request id, the cause only
  in the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from charter.api.contract import answers
from charter.api.models import WebhookAccepted
from charter.api.request_id import request_id
from charter.api.state import Services, services
from charter.automations.admission import receive_event
from charter.automations.ledger import RunRecord
from charter.automations.metrics import WEBHOOK_RUNS, WEBHOOKS_RECEIVED, WEBHOOKS_REFUSED
from charter.core import identifiers
from charter.core.errors import CharterError, Malformed
from charter.db.database import Role

log = logging.getLogger(__name__)

router = APIRouter(tags=["webhooks"])

PRINCIPAL_HEADER = "x-charter-principal"
TARGET_HEADER = "x-charter-target"
# The forms the tokens table and the automations table allow.
_PRINCIPAL = identifiers.PRINCIPAL
_TARGET = identifiers.NAME


class AutomationsFailed(CharterError):
    """Automations service failed"""

    code = "internal"
    http_status = 500


@dataclass(frozen=True)
class EventRoute:
    principal: str
    target: str


def _header(name: str, pattern: str | None, description: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    if pattern is not None:
        schema["pattern"] = f"^{pattern}$"
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": description,
        "schema": schema,
    }


def event_route(request: Request) -> EventRoute:
    """The routing headers, trimmed; Malformed (400) unless both are present and valid."""
    principal = request.headers.get(PRINCIPAL_HEADER, "").strip()
    target = request.headers.get(TARGET_HEADER, "").strip()
    if not principal or not target:
        raise Malformed(
            "webhook routing headers X-Charter-Principal and X-Charter-Target are required"
        )
    if not _PRINCIPAL.fullmatch(principal):
        raise Malformed(f"X-Charter-Principal must match {_PRINCIPAL.pattern}")
    if not _TARGET.fullmatch(target):
        raise Malformed(f"X-Charter-Target must match {_TARGET.pattern}")
    return EventRoute(principal, target)


@router.post(
    "/events",
    openapi_extra={
        "parameters": [
            _header(PRINCIPAL_HEADER, _PRINCIPAL.pattern, "Whose automations it is for."),
            _header(TARGET_HEADER, _TARGET.pattern, "Which target's automations it is for."),
            _header("webhook-id", None, "Standard Webhooks: the delivery's id."),
            _header("webhook-timestamp", r"[0-9]+", "Standard Webhooks: Unix seconds."),
            _header("webhook-signature", None, "Standard Webhooks: `v1,<base64>` ..."),
        ],
        "requestBody": {
            "required": True,
            "description": "The delivery: any strict I-JSON; the signature covers its bytes.",
            "content": {"application/json": {"schema": {}}},
        },
    },
    **answers(
        WebhookAccepted, 401,
        status=202,
        bearer=False,
        description="One pending run per matching trigger (none for a replayed "
        "`webhook-id` or an event no trigger wants).",
        why={
            400: "`malformed`: routing headers missing or invalid, body not strict JSON, "
            "no source.",
            401: "Standard Webhooks headers missing or malformed, timestamp outside ±5 "
            "minutes, or no trigger's secret verifies the signature; nothing is created.",
        },
    ),
)  # fmt: skip
async def receive_webhook(
    request: Request, context: Annotated[Services, Depends(services)]
) -> JSONResponse:
    """Admit a Standard Webhooks delivery as runs of the matching webhook triggers."""
    WEBHOOKS_RECEIVED.inc()
    try:
        route = event_route(request)
        raw_body = await request.body()  # read once: the signature covers these bytes
        runs = await run_in_threadpool(_admit, context, route, request, raw_body)
    except CharterError as exc:
        if 400 <= exc.http_status < 500:
            WEBHOOKS_REFUSED.labels(reason=exc.code).inc()
            raise
        if exc.retryable:
            raise  # 503 with Retry-After, as on every route: the sender tries again later
        rid = request_id(request.scope)
        log.error("request %s: webhook admission failed: %s", rid, exc.message, exc_info=exc)
        raise AutomationsFailed() from None
    except Exception as exc:
        log.error("request %s: webhook admission failed", request_id(request.scope), exc_info=exc)
        raise AutomationsFailed() from None
    WEBHOOK_RUNS.inc(len(runs))
    return JSONResponse({"runs": [str(run.id) for run in runs]}, status_code=202)


def _admit(
    context: Services, route: EventRoute, request: Request, raw_body: bytes
) -> list[RunRecord]:
    with context.database.connection(Role.ENGINE) as conn:
        return receive_event(
            conn,
            principal=route.principal,
            target=route.target,
            headers=request.headers,
            raw_body=raw_body,
            now=context.engine.clock.now(),
        )
