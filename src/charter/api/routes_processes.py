"""Reads of processes: the process, its events, verification, automation, the export
bundle (`processes:read`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse

from charter import wire
from charter.api.auth import require
from charter.api.contract import NAME, answers
from charter.api.listing import listing
from charter.api.models import (
    Events,
    ExportBundle,
    ProcessAutomation,
    ProcessWithChildren,
    Verification,
)
from charter.api.routes_log import log_settings
from charter.api.state import Services, services
from charter.audit import verify_stored
from charter.audit.metrics import count_verification
from charter.auth.tokens import TokenInfo
from charter.core.errors import Forbidden
from charter.core.jsontypes import JsonObject, JsonValue
from charter.wire import engine as shapes

READ = "processes:read"
PERSONAL_READ = "personal:read"

router = APIRouter(tags=["processes"])
Context = Annotated[Services, Depends(services)]
Reader = Annotated[TokenInfo, Depends(require(READ))]
ProcessId = Annotated[str, Path(description="A process id.", json_schema_extra={"pattern": NAME})]
_UNKNOWN = {404: "`unknown_process`: no such process."}


@router.get("/v1/processes/{process_id}", **answers(ProcessWithChildren, 404, why=_UNKNOWN))
def get_process(process_id: ProcessId, context: Context, _token: Reader) -> JSONResponse:
    """The process (state, data, head, seq, parent) and the ids of its children."""
    view = context.reads.process(process_id)
    children = [child.id for child in context.reads.children(process_id)]
    return JSONResponse({**view.to_json(), "children": children})


@router.get(
    "/v1/processes/{process_id}/events",
    **answers(
        Events, 403, 404,
        why={**_UNKNOWN, 403: "`forbidden`: `disclosures=true` needs the scope "
             f"`{PERSONAL_READ}`."},
    ),
)  # fmt: skip
def list_events(
    process_id: ProcessId,
    context: Context,
    token: Reader,
    disclosures: Annotated[
        bool,
        Query(
            description="Add each event's kept personal values as `disclosures` "
            f"(needs the scope `{PERSONAL_READ}`)."
        ),
    ] = False,
) -> JSONResponse:
    """Every event of the process in seq order, as stored; with `disclosures=true`, each
    with the disclosure texts of its personal fields that are kept."""
    if not disclosures:
        events = context.reads.events(process_id)
        return JSONResponse(listing([e.to_json() for e in events], deprecated_key="events"))
    if not token.grants(PERSONAL_READ):
        raise Forbidden(
            f"disclosures=true shows personal values: the token lacks the scope {PERSONAL_READ!r}",
            scope=PERSONAL_READ,
        )
    events, kept = context.reads.events_with_disclosures(process_id)
    shown: list[JsonValue] = []
    for event in events:
        texts: JsonObject = dict(kept.get(event.hash, {}))
        shown.append(event.to_json() | {"disclosures": texts})
    return JSONResponse(listing(shown, deprecated_key="events"))


@router.get("/v1/processes/{process_id}/verify", **answers(Verification, 404, why=_UNKNOWN))
def verify_process(
    process_id: ProcessId, context: Context, _token: Reader, replay: bool = False
) -> JSONResponse:
    """Check the hash chain: hashes, signatures, seq, links, spawn causes, automated events'
    provenance, the stored head; `replay=true` also re-derives the state and compares."""
    report = verify_stored.verify_process(context.database, process_id, replay=replay)
    count_verification(report)
    return JSONResponse(report.to_json())


@router.get(
    "/v1/processes/{process_id}/automation", **answers(ProcessAutomation, 404, why=_UNKNOWN)
)
def get_process_automation(process_id: ProcessId, context: Context, _token: Reader) -> JSONResponse:
    """The process's scheduled actions and automatic-action queue rows."""
    scheduled, queue = context.reads.automation(process_id)
    automation = {"scheduled": scheduled, "queue": queue}
    return JSONResponse(wire.to_json(automation, shapes.ProcessAutomation))


@router.get(
    "/v1/processes/{process_id}/export",
    **answers(
        ExportBundle,
        404,
        why=_UNKNOWN,
        description="The `charter-export/1` bundle, or `/2` with a log proof (JSON).",
    ),
)
def export_process(
    request: Request,
    process_id: ProcessId,
    context: Context,
    token: Reader,
    withhold_personal: Annotated[
        bool,
        Query(
            description="Leave every personal value out (`disclosures_withheld`: true): the "
            f"default for a token without the scope `{PERSONAL_READ}`."
        ),
    ] = False,
) -> JSONResponse:
    """The export bundle (as `charter export` prints) for offline verification:
    `charter-export/2`, with the tlog-proof of the last logged event, when this deployment
    has a transparency log (no wait: `unlogged` counts the events not logged yet), else
    `charter-export/1`. Personal values are in it only for a token that may read them."""
    log = log_settings(request).log_directory()
    withhold = withhold_personal or not token.grants(PERSONAL_READ)
    bundle = verify_stored.export_bundle(
        context.database, process_id, log, withhold_personal=withhold
    )
    return JSONResponse(bundle)
