"""`POST /v1/events`: a signed event, through the engine's one chokepoint.

The app answers this path on its lean path (`charter.api.ingest`), before routing; this
route documents it in /openapi.json and serves an app built without that middleware.
Both run `ingest.submit`, so they answer alike.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from charter.api import schemas
from charter.api.ingest import PATH, submit
from charter.api.state import Services, services

router = APIRouter(tags=["events"])


async def _submission_body(request: Request) -> bytes:
    # Over the limit never gets here: BodyLimit answers 413 (and logs it) first.
    return await request.body()


@router.post(
    PATH,
    status_code=201,
    openapi_extra=schemas.SUBMISSION,
    responses={201: {"description": '`{"hash", "seq", "process"}`'}},
)
def submit_event(
    body: Annotated[bytes, Depends(_submission_body)],
    context: Annotated[Services, Depends(services)],
) -> Response:
    """Append a signed event; no token needed, the signature is the authority."""
    return Response(submit(context.engine, body), status_code=201, media_type="application/json")
