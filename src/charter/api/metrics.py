"""HTTP request metrics, on the engine's registry so /metrics serves one page, and the
access log: one line per request (method, route template, status, duration), never a
token, a query string or a body."""

from __future__ import annotations

import logging
import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.core.metrics import REGISTRY

access_log = logging.getLogger("charter.access")

HTTP_REQUESTS = Counter(
    "charter_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "charter_http_request_seconds",
    "Time to answer an HTTP request, by method and route template.",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
    registry=REGISTRY,
)


class RequestMetrics:
    """ASGI middleware counting requests by route template (never the raw path: ids would
    make one time series per process)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            HTTP_REQUESTS.labels(method=method, route=route, status=str(status)).inc()
            seconds = time.perf_counter() - started
            HTTP_SECONDS.labels(method=method, route=route).observe(seconds)
            access_log.info(
                "%s %s %d %.1f ms", method, route, status, seconds * 1000,
                extra={"method": method, "route": route, "status": status,
                       "duration_ms": round(seconds * 1000, 3)},
            )  # fmt: skip
