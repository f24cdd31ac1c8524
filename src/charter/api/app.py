"""The API application factory: routers per area, one error table, the body limit."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.types import Scope

from charter import __version__
from charter.api import (
    routes_actors,
    routes_automations,
    routes_events,
    routes_machine,
    routes_operator,
    routes_ops,
    routes_processes,
    routes_runs,
    routes_stream,
    routes_webhooks,
    routes_workflows,
)
from charter.api.errors import install_error_handlers
from charter.api.limits import BodyLimit
from charter.api.metrics import RequestMetrics
from charter.api.request_id import RequestId
from charter.api.state import Services
from charter.api.urls import RefuseNulInUrl
from charter.core.clock import Clock
from charter.core.config import Settings
from charter.core.errors import TooLarge
from charter.db.database import Database
from charter.engine.process_event import Engine, Reads
from charter.operator.hub import HintHub


def create_app(
    database: Database,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
    settings: Settings | None = None,
) -> FastAPI:
    """An API bound to one database (and to `engine`, or one made with `clock`)."""
    settings = settings or Settings.from_env()
    engine = engine or Engine.from_settings(database, settings, clock=clock)
    app = FastAPI(
        title="Charter",
        version=__version__,
        description="Governed workflows: signed, hash-chained events on PostgreSQL.",
    )
    app.state.charter = Services(database, engine, Reads(database), settings)
    # One LISTEN connection for every /v1/stream client, started by the first of them.
    app.state.hints = HintHub(database.url)
    install_error_handlers(app)

    async def record_refused_event(scope: Scope, exc: TooLarge) -> None:
        # The limit decides before routing; this only keeps DESIGN §5's rule that every
        # rejected event submission is in system_log, even one refused unread.
        if scope.get("method") == "POST" and scope.get("path") == "/v1/events":
            await run_in_threadpool(engine.record_rejection, exc)

    # Added last = outermost. The body limit comes before anything that looks at the
    # path (DESIGN §8); metrics see the final status, 413s and 400s included; every
    # response, even those answered by middleware, carries the request id.
    app.add_middleware(RefuseNulInUrl)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, on_refused=record_refused_event
    )
    app.add_middleware(RequestMetrics)
    app.add_middleware(RequestId)
    for module in (
        routes_ops,
        routes_events,
        routes_operator,
        routes_processes,
        routes_workflows,
        routes_actors,
        routes_automations,
        routes_runs,
        routes_stream,
        routes_webhooks,
        routes_machine,
    ):
        app.include_router(module.router)
    return app
