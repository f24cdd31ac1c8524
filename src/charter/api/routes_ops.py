"""Operations: liveness (`/healthz`) and Prometheus metrics (`/metrics`), no token needed.

Both are for load balancers and scrapers, which carry no bearer tokens; neither reveals
process data (metrics are counts by error code and route template).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from charter import __version__
from charter.api.contract import errors
from charter.api.errors import error_body, retry_headers
from charter.api.models import Health, Unhealthy
from charter.api.request_id import request_id
from charter.api.state import Services, services
from charter.core.errors import CharterError
from charter.core.metrics import REGISTRY
from charter.db import migrate
from charter.db.database import Role

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])
# /healthz is exempt from the body limit (probes must always be answered): no 413.


@router.get(
    "/healthz",
    response_model=Health,
    responses={
        503: {"model": Unhealthy, "description": "The database does not answer, or is not "
              "migrated: `ok` false and the error (its cause only in the log)."},
        **{s: answer for s, answer in errors(bearer=False).items() if s not in (413, 503)},
    },
)  # fmt: skip
def healthz(request: Request, context: Annotated[Services, Depends(services)]) -> JSONResponse:
    """Liveness and readiness: the database answers and is migrated."""
    try:
        with context.database.connection(Role.READER) as conn, conn.transaction():
            schema_version = migrate.schema_version(conn)
    except CharterError as exc:
        # The cause (a host, a database message) goes to the log, never to the prober.
        rid = request_id(request.scope)
        log.warning("request %s: health check failed: %s", rid, exc.message)
        body = {"ok": False, **error_body(exc, rid)}
        return JSONResponse(body, status_code=503, headers=retry_headers(exc) or None)
    return JSONResponse({"ok": True, "version": __version__, "schema_version": schema_version})


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
              "description": "The Prometheus text exposition format."},
        **errors(bearer=False),
    },
)  # fmt: skip
def metrics(request: Request) -> Response:
    """Prometheus text: the counters and histograms of this process (events, fires, HTTP,
    webhooks, cron, verification, the process itself) and gauges of the work waiting in
    the database, read now. Every family is listed in docs/operations.md."""
    live: CollectorRegistry = request.app.state.live_metrics
    body = generate_latest(REGISTRY) + generate_latest(live)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
