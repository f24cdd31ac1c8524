"""The lean path of `POST /v1/events`: the busiest route, answered without FastAPI's routing,
dependency solving and response classes, on an executor of its own.

Everything around the route still applies, because this sits inside every other
middleware: the body limit (413 before any of this), the NUL check, the request id and
the metrics (labelled with the route's template, as if routed). Errors keep the shape
and the logging of every other route: a Charter error goes through the same handler, and
anything else propagates to the server-error handler (500 with the request id).

The engine's work is synchronous (signature check, one database transaction): it runs on
a thread pool no larger than the connection pool, so a burst of submissions queues here,
in order, instead of as many threads as clients contending for the GIL and for
connections. The answer is serialized in that thread, once, straight to bytes.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from concurrent.futures import Executor

from opentelemetry import trace
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from charter.api.errors import charter_error
from charter.core.envelope import parse_submission
from charter.core.errors import CharterError, Malformed
from charter.engine.process_event import Engine
from charter.logs import log_context
from charter.tlog.receipts import receipt_timeout, wait_for_receipt

PATH = "/v1/events"
# Starlette's JSONResponse rendering, so both paths answer the same bytes.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_JSON = (b"content-type", b"application/json")


def submit(engine: Engine, body: bytes) -> bytes:
    """Apply a submission's raw body; the answer's JSON. A CharterError says why not (a
    malformed body is recorded as a rejection here, the engine records the rest)."""
    try:
        submission = parse_submission(body)
    except Malformed as exc:
        engine.record_rejection(exc)
        raise
    envelope = submission.envelope
    with log_context(process_id=envelope.process, action=envelope.action):
        accepted = engine.process_event(submission)
    return _ENCODER.encode(accepted.to_json()).encode("utf-8")


async def with_receipt(engine: Engine, payload: bytes, timeout: float) -> bytes:
    """The accepted event's answer plus `"log": {"index", "proof"}`, or `"log": null`
    if it is not in a published checkpoint within `timeout` seconds."""
    answer = json.loads(payload)
    answer["log"] = await wait_for_receipt(engine.database, str(answer["hash"]), timeout)
    return _ENCODER.encode(answer).encode("utf-8")


class EventIngest:
    """ASGI middleware: `POST /v1/events` is answered here; every other request passes on.

    `route` is the app's own route for the path (its template labels the metrics)."""

    def __init__(
        self, app: ASGIApp, *, engine: Engine, executor: Executor, route: BaseRoute
    ) -> None:
        self.app = app
        self.engine = engine
        self.executor = executor
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        # The request's server span (FastAPI's, when tracing is on) is named by its route
        # during routing, which this path skips: name it as routing would have.
        server_span = trace.get_current_span()
        if server_span.is_recording():
            server_span.update_name(f"POST {PATH}")
            server_span.set_attribute("http.route", PATH)
        body = await _body(receive)
        if body is None:  # the client went away mid-body: nobody to answer
            return
        loop = asyncio.get_running_loop()
        try:
            wait = receipt_timeout(scope.get("query_string", b""))
            # In a copy of this context: the request id (logs) and the request's span
            # (traces) go with the work into the executor's thread.
            work = contextvars.copy_context()
            payload = await loop.run_in_executor(self.executor, work.run, submit, self.engine, body)
        except CharterError as exc:
            response = await charter_error(Request(scope, receive), exc)
            await response(scope, receive, send)
            return
        if wait is not None:  # off the executor: waiting must not hold up other submissions
            payload = await with_receipt(self.engine, payload, wait)
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [(b"content-length", str(len(payload)).encode("ascii")), _JSON],
            }
        )
        await send({"type": "http.response.body", "body": payload})


async def _body(receive: Receive) -> bytes | None:
    """The whole request body (one message, when the body limit buffered it), or None if
    the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
