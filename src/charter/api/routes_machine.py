"""The machine API under `/v1/machine/` (DPoP); registration is `routes_machines`.

Every `/v1/machine/` request is authenticated by a DPoP proof alone (RFC 9449; see
`charter.automations.dpop`); the URL it must be bound to is `Settings.api_url` (the
public origin, CHARTER_API_URL) joined with the request path, so a proxy in front of the
API changes nothing. The routes are the claim / lease / step journal protocol of
docs/machines.md (its rules 3 to 7); every transition commits under the run's current lease.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response

from charter import wire
from charter.api.auth import require
from charter.api.automation_models import Claim, Lease, RunAnswer, StepAnswer
from charter.api.bodies import fields, json_body, text
from charter.api.contract import NAME, UUID, answers
from charter.api.schemas import request_body
from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo
from charter.automations import leases
from charter.automations.gate import MAX_WAIT_SECONDS, MachineGate, Proven, prove
from charter.automations.journal import EndedSteps
from charter.automations.metrics import observe_steps
from charter.core import ijson
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.wire.automations import RunAnswer as RunShape
from charter.wire.automations import StepAnswer as StepShape

router = APIRouter(tags=["machines"])
Context = Annotated[Services, Depends(services)]
Body = Annotated[JsonValue, Depends(json_body)]
Writer = Annotated[TokenInfo, Depends(require("automations:write"))]
Reader = Annotated[TokenInfo, Depends(require("automations:read"))]

RunId = Annotated[str, Path(description="A run's id.", json_schema_extra={"pattern": UUID})]
StepId = Annotated[str, Path(description="A plan step's id.", json_schema_extra={"pattern": NAME})]
# A machine request's answers: 401 `invalid_dpop` for a missing, malformed, replayed or
# unregistered proof; 404 for a run not leased to this machine or a step not in its plan;
# 409 for a lease that is not current or a step out of order.
_MACHINE_WHY = {
    401: "`invalid_dpop`: the DPoP proof is missing, invalid, replayed or not a registered, "
    "enabled machine's.",
    404: "`not_found` or `unknown_step`: no such run of this machine's, or step of its plan.",
    409: "`lease_lost`, `step_completed`, `step_not_started`, `step_out_of_order`, "
    "`run_incomplete` or `run_finished`.",
}
_LEASE = {
    "type": "number",
    "minimum": leases.MIN_LEASE_SECONDS,
    "maximum": leases.MAX_LEASE_SECONDS,
    "description": f"Default {leases.DEFAULT_LEASE_SECONDS:g}.",
}
_TOKEN = {"type": "string", "pattern": UUID, "description": "The lease token of the claim."}


def _machine_call(
    properties: dict[str, Any], required: list[str], description: str
) -> dict[str, Any]:
    """`openapi_extra` of a DPoP-authenticated call with a JSON object body."""
    schema = {
        "type": "object",
        "required": required,
        "additionalProperties": False,
        "properties": properties,
    }
    return {"security": [{"DPoP": []}], **request_body(schema, description)}


def _dpop(*statuses: int) -> dict[int, str]:
    return {status: _MACHINE_WHY[status] for status in statuses}


# --- DPoP authentication ---------------------------------------------------------------


def dpop_proof(request: Request, context: Context) -> Proven:
    """The one `DPoP` header of a machine request, checked before any database work,
    against the request's path in its raw form (as the client sent it)."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else request.url.path
    return prove(
        request.headers.getlist("dpop"),
        method=request.method,
        path=path.split("?", 1)[0],
        origin=context.settings.api_url,
        now=context.engine.clock.now(),
    )


Proof = Annotated[Proven, Depends(dpop_proof)]


def _gate(context: Services) -> MachineGate:
    return MachineGate(context.database, context.engine.clock, context.wakeups)


async def _optional_body(request: Request) -> JsonValue:
    raw = await request.body()
    return ijson.loads(raw) if raw.strip() else {}


OptionalBody = Annotated[JsonValue, Depends(_optional_body)]


# --- the machine API (DPoP) ------------------------------------------------------------


@router.post(
    "/v1/machine/runs/claim",
    openapi_extra=_machine_call(
        {"lease_seconds": _LEASE,
         "wait": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
         "start": {"type": "boolean"}},
        [],
        "Optional (an empty body is `{}`): the lease to take, how long to wait for a run, "
        "and whether to journal its first incomplete step running (`start`).",
    ),
    **answers(
        Claim, 401,
        bearer=False,
        why=_dpop(401),
        also={204: {"description": "No run to claim (after `wait` seconds)."}},
    ),
)  # fmt: skip
async def claim_run(
    request: Request, proof: Proof, context: Context, body: OptionalBody
) -> Response:
    """Claim the oldest claimable run of the machine's target: 200 `{"run", "lease",
    "journal"}` (the plan snapshot, the lease token and expiry, the journal so far), or
    204 when there is none. `{"lease_seconds", "wait"}` are optional.

    With `wait` (seconds, at most MAX_WAIT_SECONDS) the request is a long poll: when
    nothing is claimable it waits, holding no database connection, until a hint says a
    run of the machine's target was admitted (or a re-check finds one), and answers
    204 only when the wait is over. The proof is spent once, by the first attempt.

    With `"start": true` the run's first incomplete step is journalled running in the
    claim's transaction and answered as `started` (what `steps/{step}/start` would
    answer): the machine invokes its action at once, one request fewer per run."""
    checked = fields(body, set(), {"lease_seconds", "wait", "start"})
    claimed = await _gate(context).claim(
        proof,
        lease_seconds=_lease_seconds(checked),
        wait=_wait(checked),
        start=_flag(checked, "start"),
        disconnected=request.is_disconnected,
    )
    if claimed is None:
        return Response(status_code=204)
    return JSONResponse(claimed.to_json())


@router.post(
    "/v1/machine/runs/{run_id}/lease",
    openapi_extra=_machine_call(
        {"token": _TOKEN, "lease_seconds": _LEASE}, ["token"], "The lease to renew."
    ),
    **answers(Lease, 401, 404, 409, bearer=False, why=_dpop(401, 404, 409)),
)
def renew_lease(run_id: RunId, proof: Proof, context: Context, body: Body) -> JSONResponse:
    """Renew the lease `{"token", "lease_seconds"?}` → `{"token", "expires_at"}`; 409
    `lease_lost` when the lease expired or another machine holds the run."""
    request = fields(body, {"token"}, {"lease_seconds"})
    with _gate(context).admitted(proof) as (conn, machine):
        lease = leases.renew_lease(
            conn,
            run_id,
            machine,
            text(request, "token"),
            lease_seconds=_lease_seconds(request),
            now=context.engine.clock.now_or_none(),
        )
    return JSONResponse(lease.to_json())


@router.post(
    "/v1/machine/runs/{run_id}/steps/{step_id}/start",
    openapi_extra=_machine_call({"token": _TOKEN}, ["token"], "The current lease."),
    **answers(StepAnswer, 401, 404, 409, bearer=False, why=_dpop(401, 404, 409)),
)
def start_step(
    run_id: RunId, step_id: StepId, proof: Proof, context: Context, body: Body
) -> JSONResponse:
    """Journal the step `running` before its action is invoked; answers the journal row
    with the step's stable `idempotency_key`. 409 when the lease is not current, the
    step is completed, or an earlier step is not."""
    request = fields(body, {"token"})
    with _gate(context).admitted(proof) as (conn, machine):
        step = leases.start_step(
            conn,
            run_id,
            step_id,
            machine,
            text(request, "token"),
            now=context.engine.clock.now_or_none(),
        )
    return JSONResponse(wire.to_json({"step": step}, StepShape))


@router.post(
    "/v1/machine/runs/{run_id}/steps/{step_id}/complete",
    openapi_extra=_machine_call(
        {"token": _TOKEN, "output": {}, "next": {"type": "string", "pattern": NAME},
         "lease_seconds": _LEASE},
        ["token", "output"],
        "The step's output; `next` starts the following step, `lease_seconds` (with "
        "`next` only) renews the lease.",
    ),
    **answers(StepAnswer, 401, 404, 409, bearer=False, why=_dpop(401, 404, 409)),
)  # fmt: skip
def complete_step(
    run_id: RunId, step_id: StepId, proof: Proof, context: Context, body: Body
) -> JSONResponse:
    """Journal a running step's `output` under the current lease. With `"next"` (the
    following step's id) that step is journalled running in the same transaction and
    answered as `"next"` with its idempotency key: one request per step; with
    `"lease_seconds"` too, the lease is renewed and answered as `"lease"`."""
    request = fields(body, {"token", "output"}, {"next", "lease_seconds"})
    ended: EndedSteps = []
    with _gate(context).admitted(proof) as (conn, machine):
        now = context.engine.clock.now_or_none()
        token = text(request, "token")
        if "next" in request:
            renew = _lease_seconds(request) if "lease_seconds" in request else None
            step, started, lease = leases.complete_and_start(
                conn, run_id, step_id, text(request, "next"), machine, token,
                request["output"], lease_seconds=renew, now=now, ended=ended,
            )  # fmt: skip
            answer: dict[str, Any] = {"step": step, "next": started}
            if lease is not None:
                answer["lease"] = lease
        else:
            if "lease_seconds" in request:
                raise Malformed(
                    "lease_seconds renews the lease only with next", field="lease_seconds"
                )
            step = leases.complete_step(
                conn, run_id, step_id, machine, token, request["output"], now=now, ended=ended
            )
            answer = {"step": step}
    observe_steps(ended)  # committed
    # Keys left out of `answer` are left out of the JSON: `next` and `lease` only when asked.
    return JSONResponse(wire.to_json(answer, StepShape))


@router.post(
    "/v1/machine/runs/{run_id}/complete",
    openapi_extra=_machine_call(
        {"token": _TOKEN, "output": {}, "step": {"type": "string", "pattern": NAME},
         "claim": {"type": ["object", "null"], "additionalProperties": False,
                   "properties": {"lease_seconds": _LEASE, "start": {"type": "boolean"}}}},
        ["token", "output"],
        "The run's output; `step` journals that running step first; `claim` claims the "
        "next run in the same transaction.",
    ),
    **answers(RunAnswer, 401, 404, 409, bearer=False, why=_dpop(401, 404, 409)),
)  # fmt: skip
def complete_run(run_id: RunId, proof: Proof, context: Context, body: Body) -> JSONResponse:
    """Complete the run `{"token", "output"}` once every plan step is completed.

    `"step"` (a running step's id) journals that step's output (the same `output`)
    first; `"claim"` (`{"lease_seconds"?, "start"?}`) claims this machine's next run in
    the same transaction (with `start`, its first incomplete step journalled running) and
    answers it as `"claim"` (null when there is none). One commit."""
    request = fields(body, {"token", "output"}, {"step", "claim"})
    claim_next = _claim_request(request)
    ended: EndedSteps = []
    with _gate(context).admitted(proof) as (conn, machine):
        now = context.engine.clock.now_or_none()
        token = text(request, "token")
        step = text(request, "step") if "step" in request else None
        run = leases.complete_run(
            conn, run_id, machine, token, request["output"], step=step, now=now, ended=ended
        )
        answer: dict[str, Any] = {"run": run}
        if claim_next is not None:
            lease_next, start_next = claim_next
            answer["claim"] = leases.claim_run(
                conn, machine, lease_seconds=lease_next, now=now, start=start_next
            )
    observe_steps(ended)  # committed
    # `claim` is in the JSON only when asked for (null when there was none).
    return JSONResponse(wire.to_json(answer, RunShape))


@router.post(
    "/v1/machine/runs/{run_id}/fail",
    openapi_extra=_machine_call(
        {"token": _TOKEN, "error": {"type": "string"}}, ["token", "error"], "Why it failed."
    ),
    **answers(RunAnswer, 401, 404, 409, bearer=False, why=_dpop(401, 404, 409)),
)
def fail_run(run_id: RunId, proof: Proof, context: Context, body: Body) -> JSONResponse:
    """Fail the run for good `{"token", "error"}` (a deterministic error)."""
    request = fields(body, {"token", "error"})
    ended: EndedSteps = []
    with _gate(context).admitted(proof) as (conn, machine):
        run = leases.fail_run(
            conn,
            run_id,
            machine,
            text(request, "token"),
            text(request, "error"),
            now=context.engine.clock.now_or_none(),
            ended=ended,
        )
    observe_steps(ended)  # committed
    return JSONResponse(wire.to_json({"run": run}, RunShape))


@router.post(
    "/v1/machine/runs/{run_id}/release",
    openapi_extra=_machine_call(
        {"token": _TOKEN, "error": {"type": "string"},
         "retry_at": {"type": ["string", "null"], "format": "date-time"}},
        ["token", "error"],
        "Why it is released, and when it may be claimed again.",
    ),
    **answers(RunAnswer, 401, 404, 409, bearer=False, why=_dpop(401, 404, 409)),
)  # fmt: skip
def release_run(run_id: RunId, proof: Proof, context: Context, body: Body) -> JSONResponse:
    """Release the run after a transient failure `{"token", "error", "retry_at"?}`: back
    to pending, claimable at `retry_at` bounded to [now, now + 1 h] (default now + 5 s);
    completed step outputs stay."""
    request = fields(body, {"token", "error"}, {"retry_at"})
    retry_at = None
    if request.get("retry_at") is not None:
        try:
            retry_at = parse_rfc3339(text(request, "retry_at"))
        except TimeFormatError as exc:
            raise Malformed(
                f"retry_at must be an RFC 3339 time ({exc})", field="retry_at"
            ) from None
    ended: EndedSteps = []
    with _gate(context).admitted(proof) as (conn, machine):
        run = leases.release_run(
            conn,
            run_id,
            machine,
            text(request, "token"),
            text(request, "error"),
            retry_at=retry_at,
            now=context.engine.clock.now_or_none(),
            ended=ended,
        )
    observe_steps(ended)  # committed
    _gate(context).released(run)
    return JSONResponse(wire.to_json({"run": run}, RunShape))


def _wait(body: JsonObject) -> float:
    value = body.get("wait", 0)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_WAIT_SECONDS
    ):
        raise Malformed(
            f"wait must be a number of seconds from 0 to {MAX_WAIT_SECONDS:g}", field="wait"
        )
    return float(value)


def _claim_request(body: JsonObject) -> tuple[float, bool] | None:
    """The lease of the next run a completion asks to claim (`"claim"`) and whether to
    start its first step, or None."""
    if "claim" not in body or body["claim"] is None:
        return None
    asked = body["claim"]
    if not isinstance(asked, dict) or set(asked) - {"lease_seconds", "start"}:
        raise Malformed('claim must be an object: {"lease_seconds"?, "start"?}', field="claim")
    return _lease_seconds(asked), _flag(asked, "start")


def _flag(body: JsonObject, key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise Malformed(f"{key} must be true or false", field=key)
    return value


def _lease_seconds(body: JsonObject) -> float:
    value = body.get("lease_seconds", leases.DEFAULT_LEASE_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Malformed("lease_seconds must be a number", field="lease_seconds")
    return float(value)
