"""The operator console's files at `/console/` (the pages themselves: charter/console).

Every `/console/...` page URL answers with the same shell page; the client routes it, so
every page has a stable, linkable URL. Scripts and styles live under
`/console/assets/<digest>/...`, where the digest covers every console file: the assets
are then cacheable for a year (`immutable`), and a new release changes the URL instead of
leaving old scripts in browsers' caches. The shell itself is `no-cache`.

Every response carries a strict Content-Security-Policy (api/security_headers.py):
scripts, styles and API calls from this origin only, no inline script, no plugins, no
framing. The pages hold no data: they call the JSON API with the bearer token the
operator signs in with.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from charter.api.security_headers import CSP, PAGE
from charter.console import bundle

__all__ = ["CSP", "IMMUTABLE", "router"]

IMMUTABLE = "public, max-age=31536000, immutable"

router = APIRouter(include_in_schema=False)


def _response(body: bytes, content_type: str, cache: str, status: int = 200) -> Response:
    headers = {**PAGE, "Cache-Control": cache}
    return Response(body, status_code=status, media_type=content_type, headers=headers)


@router.get("/console")
def console_root() -> RedirectResponse:
    """The console lives under `/console/` (relative links need the slash)."""
    return RedirectResponse("/console/", status_code=308)


@router.get("/console/assets/{digest}/{name:path}")
def console_asset(digest: str, name: str) -> Response:
    """A script, style or image of the console; unknown names are a plain 404."""
    files = bundle()
    asset = files.assets.get(name)
    if asset is None or name == "index.html":
        return _response(b"not found\n", "text/plain; charset=utf-8", "no-store", 404)
    # A page loaded before an upgrade asks for the old digest: give it today's file, but
    # only for this request, so no cache keeps it under a name it does not match.
    cache = IMMUTABLE if digest == files.digest else "no-cache"
    return _response(asset.body, asset.content_type, cache)


@router.get("/console/{page:path}")
def console_page(page: str) -> Response:
    """The shell for every console page; the client renders the page `page` names."""
    return _response(bundle().shell(), "text/html; charset=utf-8", "no-cache")
