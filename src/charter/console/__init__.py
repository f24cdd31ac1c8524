"""The operator console: static pages and ES modules served at `/console/` (api/console.py).

Why static files and a small vanilla-JavaScript client rather than server templates or a
bundled framework: the console only reads and calls the JSON API that scripts and the CLI
already use, with the same bearer token and the same scopes, so it needs no server code
of its own beyond serving files, and can never show more than the API allows. ES modules
load natively in every current browser, so there is no Node build step and nothing is
fetched from the internet; every value from the server is put into the page with
`textContent` and DOM APIs (never as HTML), which together with a strict CSP (no inline
script) keeps untrusted process data inert.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

SHELL = "index.html"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    """A file of the console: its bytes and the content type to serve them with."""

    body: bytes
    content_type: str


@dataclass(frozen=True)
class Bundle:
    """Every console file by relative path, and a digest of them all (the cache key)."""

    assets: dict[str, Asset]
    digest: str

    def shell(self) -> bytes:
        """The page every /console/* URL answers with, pointing at this digest's assets."""
        return self.assets[SHELL].body.replace(b"{{digest}}", self.digest.encode("ascii"))


@cache
def bundle() -> Bundle:
    """The console files from package data, read once."""
    assets: dict[str, Asset] = {}
    root = resources.files(__package__).joinpath("static")
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        for entry in folder.iterdir():
            name = prefix + entry.name
            if entry.is_dir():
                pending.append((entry, name + "/"))
                continue
            suffix = "." + entry.name.rsplit(".", 1)[-1]
            if suffix in _TYPES:
                assets[name] = Asset(entry.read_bytes(), _TYPES[suffix])
    hasher = hashlib.sha256()
    for name in sorted(assets):
        hasher.update(name.encode() + b"\0" + assets[name].body + b"\0")
    return Bundle(assets, hasher.hexdigest()[:16])
