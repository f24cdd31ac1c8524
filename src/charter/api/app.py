"""The API application factory: routers per area, one error table, the body limit."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry
from starlette.concurrency import run_in_threadpool
from starlette.types import Scope

from charter import __version__
from charter.api import console as console_files
from charter.api import reference as reference_page
from charter.api import (
    routes_actors,
    routes_automations,
    routes_events,
    routes_log,
    routes_machine,
    routes_machines,
    routes_operator,
    routes_ops,
    routes_processes,
    routes_runs,
    routes_stream,
    routes_webhooks,
    routes_workflow_states,
    routes_workflows,
)
from charter.api.contract import install_openapi
from charter.api.errors import install_error_handlers
from charter.api.ingest import PATH, EventIngest
from charter.api.limits import BodyLimit
from charter.api.live_metrics import LiveStateCollector
from charter.api.metrics import RequestMetrics
from charter.api.query_once import query_once
from charter.api.request_id import RequestId
from charter.api.security_headers import NoSniff
from charter.api.state import Services
from charter.api.urls import RefuseNulInUrl
from charter.automations.wakeups import RunWakeups
from charter.core.clock import Clock
from charter.core.config import Settings
from charter.core.errors import TooLarge
from charter.db.database import Database
from charter.db.hint_sender import HintSender
from charter.engine.process_event import Engine
from charter.engine.reads import Reads
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
    if engine.hint_sender is None:
        # Submissions answer right after their COMMIT; their hints follow from a thread
        # of their own (db/hint_sender.py).
        engine.hint_sender = HintSender(database)
    hint_sender = engine.hint_sender
    wakeups = RunWakeups(database.url)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await wakeups.aclose()  # the LISTEN connection of long-poll claims, if opened
        await run_in_threadpool(hint_sender.close)  # the hints still queued go out

    app = FastAPI(
        title="Charter",
        version=__version__,
        description="Governed workflows: signed, hash-chained events on PostgreSQL.",
        lifespan=lifespan,
        dependencies=[Depends(query_once)],
        # FastAPI's pages load Swagger UI and ReDoc from a CDN with inline scripts; /docs
        # is served from the package instead (api/reference.py), and ReDoc not at all.
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        # operationIds are the route functions' names (`list_processes`), unique in the app.
        generate_unique_id_function=operation_id,
    )
    app.state.charter = Services(database, engine, Reads(database), settings, wakeups)
    # Per app, not global: each app reads its own database at scrape time.
    app.state.live_metrics = CollectorRegistry(auto_describe=False)
    app.state.live_metrics.register(LiveStateCollector(database))
    # One LISTEN connection for every /v1/stream client, started by the first of them.
    app.state.hints = HintHub(database.url)
    install_error_handlers(app)

    async def record_refused_event(scope: Scope, exc: TooLarge) -> None:
        # The limit decides before routing; this only keeps docs/architecture.md's rule that every
        # rejected event submission is in system_log, even one refused unread.
        if scope.get("method") == "POST" and scope.get("path") == PATH:
            await run_in_threadpool(engine.record_rejection, exc)

    for module in (
        routes_ops,
        routes_events,
        routes_operator,
        routes_processes,
        # Before the registry's routes: its `/v1/workflows/{path:path}` would take a
        # `/states` suffix for part of the path.
        routes_workflow_states,
        routes_workflows,
        routes_actors,
        routes_automations,
        routes_runs,
        routes_stream,
        routes_webhooks,
        routes_machines,
        routes_machine,
        routes_log,
    ):
        app.include_router(module.router)
    # The operator console: static pages over the API above (charter/console).
    app.include_router(console_files.router)
    app.include_router(reference_page.router)
    install_openapi(app)
    # Added last = outermost. The body limit comes before anything that looks at the
    # path (docs/api.md); metrics see the final status, 413s and 400s included; every
    # response, even those answered by middleware, carries the request id and nosniff. Event
    # submissions are answered innermost, inside all of these, but before routing.
    executor = _ingest_executor(app, database)
    route = _route(routes_events.router)
    app.add_middleware(EventIngest, engine=engine, executor=executor, route=route)
    app.add_middleware(RefuseNulInUrl)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, on_refused=record_refused_event
    )
    app.add_middleware(RequestMetrics)
    app.add_middleware(RequestId)
    app.add_middleware(NoSniff)
    return app


def operation_id(route: APIRoute) -> str:
    """A route's OpenAPI operationId: its function's name."""
    return route.name


def _ingest_executor(app: FastAPI, database: Database) -> ThreadPoolExecutor:
    """Threads for event submissions, one per engine connection the pool can open (more
    would only wait for one); their threads end when the app is collected."""
    executor = ThreadPoolExecutor(database.max_size, thread_name_prefix="charter-events")
    weakref.finalize(app, executor.shutdown, wait=False)
    return executor


def _route(router: APIRouter) -> APIRoute:
    for route in router.routes:
        if isinstance(route, APIRoute) and route.path == PATH and "POST" in (route.methods or ()):
            return route
    raise LookupError(f"no POST {PATH} route")  # pragma: no cover - the router has it
