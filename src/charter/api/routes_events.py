"""`POST /v1/events`: a signed event, through the engine's one chokepoint.

The app answers this path on its lean path (`charter.api.ingest`), before routing; this
route documents it in /openapi.json and serves an app built without that middleware.
Both run `ingest.submit`, so they answer alike.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from charter.api import schemas
from charter.api.contract import answers
from charter.api.ingest import PATH, submit, with_receipt
from charter.api.models import Accepted
from charter.api.state import Services, services
from charter.tlog.receipts import receipt_timeout

router = APIRouter(tags=["events"])


async def _submission_body(request: Request) -> bytes:
    # Over the limit never gets here: BodyLimit answers 413 (and logs it) first.
    return await request.body()


@router.post(
    PATH,
    openapi_extra=schemas.SUBMISSION,
    **answers(
        Accepted, 401, 403, 404, 409, 422,
        status=201,
        description="Appended: the event's hash and seq and the process after it.",
        bearer=False,
        why={
            400: "`malformed`: not strict I-JSON, or not a v1 or v2 submission.",
            401: "`bad_signature`: the signature does not verify the envelope.",
            403: "`unknown_actor`, `forbidden_role` or `reserved_field`.",
            404: "`unknown_process`, `unknown_workflow` or `unknown_action`.",
            409: "`stale_prev` (with the current `head`: re-read and sign again) or "
            "`duplicate`.",
            422: "`wrong_state`, `condition_failed`, `invalid_input`, `workflow_mismatch`, "
            "`clock_skew`, `not_due`, `bad_disclosure` (a disclosure that does not match "
            "`sd`, a digest for a field that is not personal, a reused salt) or "
            "`personal_in_clear` (a personal field in `input`).",
        },
    ),
)  # fmt: skip
async def submit_event(
    request: Request,
    body: Annotated[bytes, Depends(_submission_body)],
    context: Annotated[Services, Depends(services)],
    wait: Annotated[
        Literal["log"] | None,
        Query(description="`log`: answer once the event is in a published checkpoint, with"
              ' `"log": {"index", "proof"}` (`null` on timeout).'),
    ] = None,
    timeout: Annotated[float, Query(ge=0, le=30, description="Seconds to wait (wait=log).")]
    = 5.0,
) -> Response:  # fmt: skip
    """Append a signed event; no token needed, the signature is the authority."""
    wait_for = receipt_timeout(request.scope.get("query_string", b""))
    payload = await run_in_threadpool(submit, context.engine, body)
    if wait_for is not None:
        payload = await with_receipt(context.engine, payload, wait_for)
    return Response(payload, status_code=201, media_type="application/json")
