"""The API reference page at `/docs` (the files: charter/apidocs).

The page is `no-cache`; the files it loads live under `/docs/assets/<digest>/<name>`,
where the digest covers them all, so they are cacheable for a year and an upgrade changes
their URLs. Every answer carries the console's Content-Security-Policy. FastAPI's own
`/docs`, `/redoc` and OAuth2 redirect pages are off (create_app): they load their files
from a CDN and start them with inline scripts.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from charter.api.console import IMMUTABLE
from charter.api.security_headers import PAGE
from charter.apidocs import reference

router = APIRouter(include_in_schema=False)


def _response(body: bytes, content_type: str, cache: str, status: int = 200) -> Response:
    headers = {**PAGE, "Cache-Control": cache}
    return Response(body, status_code=status, media_type=content_type, headers=headers)


@router.get("/docs")
def reference_page() -> Response:
    """Swagger UI over /openapi.json."""
    return _response(reference().page(), "text/html; charset=utf-8", "no-cache")


@router.get("/docs/assets/{digest}/{name}")
def reference_asset(digest: str, name: str) -> Response:
    """A file the page loads; unknown names are a plain 404."""
    files = reference()
    asset = files.asset(name)
    if asset is None:
        return _response(b"not found\n", "text/plain; charset=utf-8", "no-store", 404)
    # A page loaded before an upgrade asks for the old digest: today's file, uncached.
    cache = IMMUTABLE if digest == files.digest else "no-cache"
    return _response(asset.body, asset.content_type, cache)
