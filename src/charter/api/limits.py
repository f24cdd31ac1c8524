"""The request body limit, enforced on the bytes as they arrive (DESIGN §8: 2 MiB → 413).

Content-Length is only a hint: a declared size over the limit is refused before reading,
but a body is always counted as it streams, so a lying or absent Content-Length
(chunked uploads) cannot slip past. The error surfaces where the app reads the body, as
`TooLarge`, and goes through the one error table like any other error.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.core.errors import TooLarge

MAX_BODY_BYTES = 2 * 1024 * 1024
# After refusing a body, read (and discard) at most this much more of it, so an ordinary
# client that is still uploading sees the 413 instead of a reset connection.
DRAIN_BYTES = 8 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: reading more than `max_bytes` of request body raises TooLarge."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        limit = self.max_bytes
        seen = 0
        refused = False

        async def counted_receive() -> Message:
            nonlocal seen, refused
            if refused:  # later reads (disconnect checks) pass through
                return await receive()
            if declared is not None and declared > limit:
                refused = True
                await _drain(receive)
                raise TooLarge(f"the body declares {declared} bytes; the limit is {limit}")
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    if message.get("more_body", False):
                        await _drain(receive)
                    raise TooLarge(f"the body is over the {limit}-byte limit")
            return message

        await self.app(scope, counted_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _drain(receive: Receive) -> None:
    drained = 0
    while drained <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return
