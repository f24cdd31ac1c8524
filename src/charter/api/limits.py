"""The request body limit, decided before anything else (docs/api.md: over 2 MiB → 413).

As on a hardened reverse proxy, the limit is the first thing a request meets: routing,
routing headers, tokens and paths are looked at only for a body that fits. So an
oversized body is 413 `too_large` whatever else is wrong with the request (no token,
no webhook routing headers, no such route, wrong method). `GET /healthz` is exempt:
probes must answer even when everything else is refused.

Content-Length is only a hint: a declared size over the limit is refused at once,
without reading the body; otherwise the body is buffered as it streams (a lying or
absent Content-Length, chunked uploads) and refused as soon as it passes the limit.
A body that fits is handed to the app whole, as one message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.api.errors import send_error
from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors import TooLarge

MAX_BODY_BYTES = 2 * 1024 * 1024
# After refusing a body, read (and discard) at most this much more of it, so an ordinary
# client that is still uploading sees the 413 instead of a reset connection.
DRAIN_BYTES = 8 * 1024 * 1024

# Told about every refusal (the app logs refused event submissions, docs/architecture.md).
OnRefused = Callable[[Scope, TooLarge], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413 here, and the app
    never sees the request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int = MAX_BODY_BYTES,
        on_refused: OnRefused | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _exempt(scope):
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _drain(receive)
            size = f"{declared} bytes" if declared <= UINT64_MAX else "more bytes than 2**64"
            await self._refuse(
                scope, send, TooLarge(f"the body declares {size}; the limit is {limit}")
            )
            return
        try:
            body = await _buffer(receive, limit)
        except TooLarge as exc:
            await self._refuse(scope, send, exc)
            return
        if body is None:  # the client went away mid-body: nobody to answer
            return
        await self.app(scope, _replay(body, receive), send)

    async def _refuse(self, scope: Scope, send: Send, exc: TooLarge) -> None:
        if self.on_refused is not None:
            await self.on_refused(scope, exc)
        # Whatever of the body was not drained is still on the wire: close after answering.
        await send_error(send, exc, [(b"connection", b"close")])


def _exempt(scope: Scope) -> bool:
    return scope.get("method") == "GET" and scope.get("path") == "/healthz"


def _content_length(scope: Scope) -> int | None:
    """The declared size: None when absent or not digits; past UINT64_MAX when it has more
    digits than that (read by length alone, never handed to int() whole)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            digits = value.decode("latin-1").strip()
            if not digits.isascii() or not digits.isdigit():
                return None
            significant = digits.lstrip("0") or "0"
            size = parse_decimal(significant, UINT64_MAX)
            return UINT64_MAX + 1 if size is None else size
    return None


async def _buffer(receive: Receive, limit: int) -> bytes | None:
    """The whole body if it fits, None on a disconnect; past `limit`, TooLarge (raised
    after draining the rest)."""
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            if message.get("more_body", False):
                await _drain(receive)
            raise TooLarge(f"the body is over the {limit}-byte limit")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the buffered body once, then what the client sends next
    (a disconnect, which routes that stream their answer wait for)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _drain(receive: Receive) -> None:
    drained = 0
    while drained <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return
