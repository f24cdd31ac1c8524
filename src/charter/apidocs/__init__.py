"""The API reference page at `/docs` (api/reference.py): Swagger UI over this server's
OpenAPI document, every file served from installed packages.

Swagger UI's own files (script, styles, icon) come from the `fastapi_offline` package,
which ships Swagger UI's release build; the page and the script that starts Swagger UI
are this package's. Nothing is fetched from another host, so the page works offline and
runs no other origin's script where the console keeps its token, and there is no inline
script, so the console's strict Content-Security-Policy covers this page too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from charter.console import Asset

PAGE = "index.html"
# Served name → (package, path inside it, content type).
_FILES = {
    PAGE: (__name__, "static/index.html", "text/html; charset=utf-8"),
    "init.js": (__name__, "static/init.js", "text/javascript; charset=utf-8"),
    "swagger-ui-bundle.js": (
        "fastapi_offline",
        "static/swagger-ui-bundle.js",
        "text/javascript; charset=utf-8",
    ),
    "swagger-ui.css": ("fastapi_offline", "static/swagger-ui.css", "text/css; charset=utf-8"),
    "favicon.png": ("fastapi_offline", "static/favicon.png", "image/png"),
}


@dataclass(frozen=True)
class Reference:
    """The page's files by served name, and a digest of them all (their URLs' cache key)."""

    assets: dict[str, Asset]
    digest: str

    def page(self) -> bytes:
        """The HTML page, pointing at this digest's files."""
        return self.assets[PAGE].body.replace(b"{{digest}}", self.digest.encode("ascii"))

    def asset(self, name: str) -> Asset | None:
        """A file the page loads (never the page itself), or None."""
        return None if name == PAGE else self.assets.get(name)


@cache
def reference() -> Reference:
    """The files, read once from package data."""
    assets = {
        name: Asset(resources.files(package).joinpath(path).read_bytes(), content_type)
        for name, (package, path, content_type) in _FILES.items()
    }
    hasher = hashlib.sha256()
    for name in sorted(assets):
        hasher.update(name.encode() + b"\0" + assets[name].body + b"\0")
    return Reference(assets, hasher.hexdigest()[:16])
