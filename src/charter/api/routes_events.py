"""`POST /v1/events`: a signed event, through the engine's one chokepoint."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from charter.api import schemas
from charter.api.state import Services, services
from charter.core.envelope import parse_submission
from charter.core.errors import Malformed
from charter.logs import log_context

router = APIRouter(tags=["events"])


async def _submission_body(request: Request) -> bytes:
    # Over the limit never gets here: BodyLimit answers 413 (and logs it) first.
    return await request.body()


@router.post(
    "/v1/events",
    status_code=201,
    openapi_extra=schemas.SUBMISSION,
    responses={201: {"description": '`{"hash", "seq", "process"}`'}},
)
def submit_event(
    body: Annotated[bytes, Depends(_submission_body)],
    context: Annotated[Services, Depends(services)],
) -> JSONResponse:
    """Append a signed event; no token needed, the signature is the authority."""
    try:
        submission = parse_submission(body)
    except Malformed as exc:
        context.engine.record_rejection(exc)
        raise
    envelope = submission.envelope
    with log_context(process_id=envelope.process, action=envelope.action):
        accepted = context.engine.process_event(submission)
    return JSONResponse(accepted.to_json(), status_code=201)
