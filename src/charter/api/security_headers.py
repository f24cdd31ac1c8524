"""Headers every response of the app carries, and those of the pages a browser renders.

`X-Content-Type-Options: nosniff` goes on every answer (JSON, text, errors, even a 404
that echoes the path), so no browser ever reads one as HTML or script. The pages (the
console, the API reference at /docs) also carry a strict Content-Security-Policy:
scripts, styles and API calls from this origin only, no inline script, no plugins, no
framing.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

NOSNIFF = {"X-Content-Type-Options": "nosniff"}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
PAGE = {
    "Content-Security-Policy": CSP,
    **NOSNIFF,
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


class NoSniff:
    """ASGI middleware: adds `X-Content-Type-Options: nosniff` to every HTTP response.

    Starlette answers unhandled exceptions from outside every middleware; that handler
    (api/errors.py) sets the header itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(NOSNIFF)
            await send(message)

        await self.app(scope, receive, send_nosniff)
