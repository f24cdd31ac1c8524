"""NUL in a URL is refused before routing: 400 `malformed`, for every route alike.

No Charter identifier or filter value can hold U+0000 (PostgreSQL stores it in neither
`text` nor `jsonb`), so a path or query string carrying one (`%00`) can name nothing that
exists and can only reach the database as an error. One rule for every route, decided
here, means no route can forget it; 400 rather than 404 because the request is malformed
whatever it is for — a 404 would say "no such id" of something that cannot be an id.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from charter.api.errors import send_error
from charter.core.errors import Malformed


class RefuseNulInUrl:
    """ASGI middleware: a NUL in the decoded path or in the query string is 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            where = _nul_in(scope)
            if where is not None:
                await send_error(send, Malformed(f"the {where} holds NUL (U+0000)", field=where))
                return
        await self.app(scope, receive, send)


def _nul_in(scope: Scope) -> str | None:
    if "\x00" in str(scope.get("path", "")):  # the path as decoded: %00 is NUL here
        return "path"
    query = scope.get("query_string", b"")  # still percent-encoded
    if isinstance(query, bytes) and (b"%00" in query or b"\x00" in query):
        return "query"
    return None
