"""The control API of automations (docs/automations.md and docs/api.md): automations, their
schedule and webhook triggers, their one plan, and manual runs.

Reads take `automations:read`, changes `automations:write`, a manual run
`runs:execute`. A principal sees and changes only its own automations: another's ids
are 404, never 403. A `*` token sees and changes every principal's (what it creates
is its own). Bodies are strict I-JSON; unknown or missing keys are 400
`malformed`, bad values 422 with a code per kind (`invalid_automation`,
`invalid_schedule`, `invalid_webhook`, `invalid_plan`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from charter import wire
from charter.api.auth import require
from charter.api.automation_models import (
    Automation,
    AutomationDetail,
    AutomationPage,
    NewWebhook,
    Plan,
    Run,
    Schedule,
    Schedules,
    Webhook,
    Webhooks,
)
from charter.api.bodies import fields, json_body
from charter.api.contract import UUID, answers
from charter.api.listing import listing
from charter.api.schemas import request_body
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.automations import checks
from charter.automations.store import Conn, Control
from charter.automations.wakeups import run_hints
from charter.core.jsontypes import JsonValue
from charter.core.unset import Unset
from charter.db.database import Role
from charter.db.hints import send_hints
from charter.wire import automations

router = APIRouter(tags=["automations"])
Context = Annotated[Services, Depends(services)]
Reader = Annotated[TokenInfo, Depends(require("automations:read"))]
Writer = Annotated[TokenInfo, Depends(require("automations:write"))]
Executor = Annotated[TokenInfo, Depends(require("runs:execute"))]
Body = Annotated[JsonValue, Depends(json_body)]


async def _optional_body(request: Request) -> JsonValue:
    """The body as strict I-JSON; an empty body is `{}`."""
    return await json_body(request) if await request.body() else {}


OptionalBody = Annotated[JsonValue, Depends(_optional_body)]
Cursor = Annotated[
    str | None,
    Query(
        description="`next_cursor` of the previous page (empty: the first page).",
        json_schema_extra={"pattern": "^[A-Za-z0-9_-]*$"},
    ),
]
Limit = Annotated[
    int,
    Query(
        description=f"Items per page (1 to {checks.MAX_PAGE}).",
        json_schema_extra={"minimum": 1, "maximum": checks.MAX_PAGE},
    ),
]
AutomationId = Annotated[
    str, Path(description="An automation's id.", json_schema_extra={"pattern": UUID})
]
TriggerId = Annotated[str, Path(description="A trigger's id.", json_schema_extra={"pattern": UUID})]
_MISSING = {404: "`not_found`: no such automation of the token's principal (of anyone's, for `*`)."}
_TRIGGER_MISSING = {
    404: "`not_found`: no such automation or trigger of the principal's (of anyone's, for `*`)."
}

_NAME = {"type": "string", "minLength": 1, "maxLength": checks.MAX_NAME}
_TARGET = {"type": "string", "pattern": f"^{checks.TARGET.pattern}$"}
_SECRET = {"type": "string", "pattern": "^whsec_[A-Za-z0-9+/]+={0,2}$"}
_NULLABLE_TEXT = {"type": ["string", "null"], "minLength": 1, "maxLength": checks.MAX_SOURCE}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": required or [],
        "additionalProperties": False,
        "properties": properties,
    }


CREATE = request_body(
    _object({"name": _NAME, "target": _TARGET, "enabled": {"type": "boolean"}}, ["name", "target"]),
    "A new automation: its name and the machine target that runs it.",
    {"name": "nightly report", "target": "reports"},
)
UPDATE = request_body(
    _object({"name": _NAME, "target": _TARGET, "enabled": {"type": "boolean"}}),
    "The fields to change; absent keys stay as they are.",
)
_BUDGET = {"type": ["integer", "null"], "minimum": 1, "maximum": checks.MAX_OCCURRENCES}
SCHEDULE = request_body(
    _object(
        {"cron": {"type": "string"}, "timezone": {"type": "string"}, "maxOccurrences": _BUDGET},
        ["cron", "timezone"],
    ),
    "A cron expression in an IANA time zone and an optional budget of occurrences.",
    {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"},
)
SCHEDULE_UPDATE = request_body(
    _object(
        {
            "cron": {"type": "string"},
            "timezone": {"type": "string"},
            "enabled": {"type": "boolean"},
            "maxOccurrences": _BUDGET,
        }
    ),
    "The fields to change; `maxOccurrences: null` makes the schedule unbounded, an absent "
    "key leaves it.",
)
WEBHOOK = request_body(
    _object({"source": _NAME, "event": _NULLABLE_TEXT, "secret": _SECRET}, ["source"]),
    "A webhook source, an optional event (null: every event) and an optional secret; "
    "without one a secret is generated and returned once.",
    {"source": "shop", "event": "order.paid"},
)
WEBHOOK_UPDATE = request_body(
    _object(
        {
            "source": _NAME,
            "event": _NULLABLE_TEXT,
            "enabled": {"type": "boolean"},
            "secret": _SECRET,
        }
    ),
    "The fields to change; a `secret` rotates it (write-only: never returned).",
)
PLAN = request_body(
    _object(
        {
            "version": {"const": 1},
            "steps": {
                "type": "array",
                "minItems": 1,
                "items": _object(
                    {"id": {"type": "string"}, "actionId": {"type": "string"}, "input": {}},
                    ["id", "actionId", "input"],
                ),
            },
            "allowlist": {},
            "limits": {},
        },
        ["version", "steps"],
    ),
    "A version 1 plan: one or more tool-action steps with unique ids.",
    {
        "version": 1,
        "steps": [
            {"id": "fetch", "actionId": "http.request", "input": {"url": "https://example.com"}}
        ],
    },
)
TRIGGER = request_body(
    _object({"input": {}}), "The run's input (any JSON; {} when absent).", {"input": {"n": 1}}
)


_INVALID_AUTOMATION = {
    409: "`duplicate`: the principal has an automation of that name.",
    422: "`invalid_automation`: a bad name, target or enabled flag.",
}
_INVALID_SCHEDULE = {422: "`invalid_schedule`: a bad cron, time zone or budget."}
_INVALID_WEBHOOK = {
    409: "`duplicate`: the automation has a trigger for that source and event.",
    422: "`invalid_webhook`: a bad source, event or secret.",
}


def _control(conn: Conn, token: TokenInfo, context: Services) -> Control:
    return Control(conn, token.principal, context.engine.clock, everyone=token.admin)


def _gone() -> Response:
    return Response(status_code=204)


# --- automations ------------------------------------------------------------------------


@router.post(
    "/v1/automations",
    openapi_extra=CREATE,
    **answers(Automation, 409, 422, status=201, why=_INVALID_AUTOMATION),
)
def create_automation(context: Context, token: Writer, body: Body) -> JSONResponse:
    """Create an automation owned by the token's principal."""
    request = fields(body, {"name", "target"}, {"enabled"})
    changes = checks.automation_changes(request)
    enabled = changes.enabled if isinstance(changes.enabled, bool) else True
    assert isinstance(changes.name, str)
    assert isinstance(changes.target, str)
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).create_automation(
            changes.name, changes.target, enabled
        )
    return JSONResponse(record.to_json(), status_code=201)


@router.get("/v1/automations", **answers(AutomationPage))
def list_automations(
    context: Context, token: Reader, cursor: Cursor = None, limit: Limit = checks.DEFAULT_PAGE
) -> JSONResponse:
    """A page of the principal's automations (every principal's for `*`), oldest first:
    `{"items", "next_cursor"}`."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        found, following = _control(conn, token, context).list_automations(
            cursor=cursor, limit=limit
        )
    return JSONResponse(listing([a.to_json() for a in found], following))


@router.get("/v1/automations/{automation_id}", **answers(AutomationDetail, 404, why=_MISSING))
def show_automation(automation_id: AutomationId, context: Context, token: Reader) -> JSONResponse:
    """An automation with its schedule and webhook triggers (no secrets) and its plan."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        store = _control(conn, token, context)
        record = store.automation(automation_id)
        detail = {
            "automation": record,
            "schedules": store.schedules(record.id),
            "webhooks": store.webhooks(record.id),
            "plan": store.plan_or_none(record.id),
        }
    return JSONResponse(wire.to_json(detail, automations.AutomationDetail))


@router.patch(
    "/v1/automations/{automation_id}",
    openapi_extra=UPDATE,
    **answers(Automation, 404, 409, 422, why={**_MISSING, **_INVALID_AUTOMATION}),
)
def update_automation(
    automation_id: AutomationId, context: Context, token: Writer, body: Body
) -> JSONResponse:
    """Change an automation's name, target or enabled flag."""
    changes = checks.automation_changes(fields(body, set(), {"name", "target", "enabled"}))
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).update_automation(automation_id, changes)
    return JSONResponse(record.to_json())


@router.delete("/v1/automations/{automation_id}", **answers(None, 404, status=204, why=_MISSING))
def delete_automation(automation_id: AutomationId, context: Context, token: Writer) -> Response:
    """Delete an automation with its triggers and plan; its runs stay as history."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        _control(conn, token, context).delete_automation(automation_id)
    return _gone()


@router.post("/v1/automations/{automation_id}/pause", **answers(Automation, 404, why=_MISSING))
def pause_automation(automation_id: AutomationId, context: Context, token: Writer) -> JSONResponse:
    """Pause: no trigger admits a run until it is resumed."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).set_enabled(automation_id, False)
    return JSONResponse(record.to_json())


@router.post("/v1/automations/{automation_id}/resume", **answers(Automation, 404, why=_MISSING))
def resume_automation(automation_id: AutomationId, context: Context, token: Writer) -> JSONResponse:
    """Resume a paused automation."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).set_enabled(automation_id, True)
    return JSONResponse(record.to_json())


# --- schedule triggers ------------------------------------------------------------------


@router.get("/v1/automations/{automation_id}/schedules", **answers(Schedules, 404, why=_MISSING))
def list_schedules(automation_id: AutomationId, context: Context, token: Reader) -> JSONResponse:
    """The automation's schedule triggers."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        found = _control(conn, token, context).schedules(automation_id)
    return JSONResponse(listing([s.to_json() for s in found]))


@router.post(
    "/v1/automations/{automation_id}/schedules",
    openapi_extra=SCHEDULE,
    **answers(Schedule, 404, 422, status=201, why={**_MISSING, **_INVALID_SCHEDULE}),
)
def add_schedule(
    automation_id: AutomationId, context: Context, token: Writer, body: Body
) -> JSONResponse:
    """Add a schedule trigger; its next run is the next occurrence after now."""
    changes = checks.schedule_changes(fields(body, {"cron", "timezone"}, {"maxOccurrences"}))
    assert isinstance(changes.cron, str)
    assert isinstance(changes.timezone, str)
    budget = None if isinstance(changes.max_occurrences, Unset) else changes.max_occurrences
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).add_schedule(
            automation_id, changes.cron, changes.timezone, budget
        )
    return JSONResponse(record.to_json(), status_code=201)


@router.patch(
    "/v1/automations/{automation_id}/schedules/{trigger_id}",
    openapi_extra=SCHEDULE_UPDATE,
    **answers(Schedule, 404, 422, why={**_TRIGGER_MISSING, **_INVALID_SCHEDULE}),
)
def update_schedule(
    automation_id: AutomationId, trigger_id: TriggerId, context: Context, token: Writer, body: Body
) -> JSONResponse:
    """Change a schedule trigger (`maxOccurrences: null` makes it unbounded)."""
    changes = checks.schedule_changes(
        fields(body, set(), {"cron", "timezone", "enabled", "maxOccurrences"})
    )
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).update_schedule(automation_id, trigger_id, changes)
    return JSONResponse(record.to_json())


@router.delete(
    "/v1/automations/{automation_id}/schedules/{trigger_id}",
    **answers(None, 404, status=204, why=_TRIGGER_MISSING),
)
def delete_schedule(
    automation_id: AutomationId, trigger_id: TriggerId, context: Context, token: Writer
) -> Response:
    """Remove a schedule trigger."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        _control(conn, token, context).delete_schedule(automation_id, trigger_id)
    return _gone()


# --- webhook triggers -------------------------------------------------------------------


@router.get("/v1/automations/{automation_id}/webhooks", **answers(Webhooks, 404, why=_MISSING))
def list_webhooks(automation_id: AutomationId, context: Context, token: Reader) -> JSONResponse:
    """The automation's webhook triggers, never with their secrets."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        found = _control(conn, token, context).webhooks(automation_id)
    return JSONResponse(listing([w.to_json() for w in found]))


@router.post(
    "/v1/automations/{automation_id}/webhooks",
    openapi_extra=WEBHOOK,
    **answers(NewWebhook, 404, 409, 422, status=201, why={**_MISSING, **_INVALID_WEBHOOK}),
)
def add_webhook(
    automation_id: AutomationId, context: Context, token: Writer, body: Body
) -> JSONResponse:
    """Add a webhook trigger. Its secret (the one given or a generated one) is in this
    response and in no other."""
    changes = checks.webhook_changes(fields(body, {"source"}, {"event", "secret"}))
    assert isinstance(changes.source, str)
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record, secret = _control(conn, token, context).add_webhook(
            automation_id,
            changes.source,
            None if isinstance(changes.event, Unset) else changes.event,
            None if isinstance(changes.secret, Unset) else changes.secret,
        )
    return JSONResponse({**record.to_json(), "secret": secret}, status_code=201)


@router.patch(
    "/v1/automations/{automation_id}/webhooks/{trigger_id}",
    openapi_extra=WEBHOOK_UPDATE,
    **answers(Webhook, 404, 409, 422, why={**_TRIGGER_MISSING, **_INVALID_WEBHOOK}),
)
def update_webhook(
    automation_id: AutomationId, trigger_id: TriggerId, context: Context, token: Writer, body: Body
) -> JSONResponse:
    """Change a webhook trigger; a `secret` rotates it and is not returned."""
    changes = checks.webhook_changes(fields(body, set(), {"source", "event", "enabled", "secret"}))
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).update_webhook(automation_id, trigger_id, changes)
    return JSONResponse(record.to_json())


@router.delete(
    "/v1/automations/{automation_id}/webhooks/{trigger_id}",
    **answers(None, 404, status=204, why=_TRIGGER_MISSING),
)
def delete_webhook(
    automation_id: AutomationId, trigger_id: TriggerId, context: Context, token: Writer
) -> Response:
    """Remove a webhook trigger."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        _control(conn, token, context).delete_webhook(automation_id, trigger_id)
    return _gone()


# --- the plan ---------------------------------------------------------------------------


@router.put(
    "/v1/automations/{automation_id}/plan",
    openapi_extra=PLAN,
    **answers(Plan, 404, 422, why={**_MISSING, 422: "`invalid_plan` with every problem."}),
)
def put_plan(
    automation_id: AutomationId, context: Context, token: Writer, body: Body
) -> JSONResponse:
    """Set the automation's plan (replacing any). Runs already admitted keep theirs."""
    # version and steps are checked by parse_plan, which names every problem (422).
    document = checks.plan_document(
        fields(body, set(), {"version", "steps", "allowlist", "limits"})
    )
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        record = _control(conn, token, context).put_plan(automation_id, document)
    return JSONResponse(record.to_json())


@router.get(
    "/v1/automations/{automation_id}/plan",
    **answers(Plan, 404, why={404: "`not_found`: no such automation, or it has no plan."}),
)
def show_plan(automation_id: AutomationId, context: Context, token: Reader) -> JSONResponse:
    """The automation's plan (404 when it has none)."""
    with context.database.connection(Role.READER) as conn, conn.transaction():
        record = _control(conn, token, context).plan(automation_id)
    return JSONResponse(record.to_json())


@router.delete(
    "/v1/automations/{automation_id}/plan", **answers(None, 404, status=204, why=_MISSING)
)
def delete_plan(automation_id: AutomationId, context: Context, token: Writer) -> Response:
    """Remove the automation's plan; it admits no runs until it has one again."""
    with context.database.connection(Role.ENGINE) as conn, conn.transaction():
        _control(conn, token, context).delete_plan(automation_id)
    return _gone()


# --- manual runs ------------------------------------------------------------------------


@router.post(
    "/v1/automations/{automation_id}/runs",
    openapi_extra=TRIGGER,
    **answers(
        Run, 404, 409,
        status=201,
        why={**_MISSING, 409: "`automation_paused` or `no_plan`: nothing to run."},
    ),
)  # fmt: skip
def trigger_automation(
    automation_id: AutomationId, context: Context, token: Executor, body: OptionalBody
) -> JSONResponse:
    """Admit a pending manual run with a snapshot of the current plan (409 when the
    automation is paused or has no plan)."""
    request = fields(body, set(), {"input"})
    with context.database.connection(Role.ENGINE) as conn:
        with conn.transaction():
            run = _control(conn, token, context).trigger(automation_id, request.get("input"))
        send_hints(conn, run_hints([run]))  # after the COMMIT: machines waiting wake up
    return JSONResponse(run.to_json(), status_code=201)
