"""A request id for every request: the client's `X-Request-Id` when it is a sane token,
else a new one. Every response carries it back, and every 5xx is logged with it, so an
operator can find the cause of the generic message a client was shown."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.logs import log_context

HEADER = "x-request-id"
# Printable ASCII without spaces, bounded: it is echoed in a header and written to logs.
_ACCEPTED = re.compile(r"[!-~]{1,128}")
_SCOPE_KEY = "charter.request_id"


def request_id(scope: Scope) -> str:
    """The id of this request (a new one for a scope the middleware never saw)."""
    found = scope.get(_SCOPE_KEY)
    if isinstance(found, str):
        return found
    fresh = uuid.uuid4().hex
    scope[_SCOPE_KEY] = fresh
    return fresh


class RequestId:
    """ASGI middleware: assigns the id and adds `X-Request-Id` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Set on the scope object itself (not a copy): Starlette's outermost error
        # middleware answers unhandled exceptions from the same dict, and must see it.
        scope[_SCOPE_KEY] = _given(scope) or uuid.uuid4().hex
        rid = scope[_SCOPE_KEY]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        with log_context(request_id=rid):
            await self.app(scope, receive, send_with_id)


def _given(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == HEADER.encode("ascii"):
            text = value.decode("latin-1").strip()
            return text if _ACCEPTED.fullmatch(text) else None
    return None
