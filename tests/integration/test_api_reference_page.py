"""The API reference at /docs: Swagger UI served from the package, under the console's
Content-Security-Policy, with nothing loaded from another host (a CDN would leave a
white page offline, and run other hosts' scripts on the origin where the console keeps
its token)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.api.security_headers import CSP
from charter.core.config import Settings
from charter.db.database import Database

_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
}


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    # The page and its files read no database.
    app = create_app(Database("postgresql://unused.invalid/charter"), settings=Settings())
    with TestClient(app) as client:
        yield client


def _references(html: str) -> list[str]:
    return re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""", html)


def test_the_page_is_served_under_the_console_csp(http: TestClient) -> None:
    response = http.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "unsafe-inline" not in response.headers["content-security-policy"]


def test_the_page_references_no_other_host(http: TestClient) -> None:
    html = http.get("/docs").text
    references = _references(html)
    assert references, html
    for reference in references:
        parts = urlsplit(reference)
        assert (parts.scheme, parts.netloc) == ("", ""), reference
        assert reference.startswith("/"), reference
    assert "http://" not in html
    assert "https://" not in html
    assert "//cdn" not in html


def test_the_page_has_no_inline_script(http: TestClient) -> None:
    html = http.get("/docs").text
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.S)
    assert len(scripts) >= 2  # Swagger UI and the script that starts it
    for attributes, body in scripts:
        assert "src=" in attributes
        assert body.strip() == ""
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers
    assert "style=" not in html
    assert "<style" not in html


def test_every_referenced_file_is_served_with_its_type(http: TestClient) -> None:
    references = _references(http.get("/docs").text)
    suffixes = set()
    for reference in references:
        response = http.get(reference)
        assert response.status_code == 200, reference
        suffix = "." + reference.rsplit(".", 1)[-1]
        suffixes.add(suffix)
        assert response.headers["content-type"] == _TYPES[suffix], reference
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.content
    assert suffixes == set(_TYPES)


def test_the_start_script_points_swagger_ui_at_this_document(http: TestClient) -> None:
    references = _references(http.get("/docs").text)
    start = [r for r in references if r.endswith("/init.js")]
    assert len(start) == 1
    script = http.get(start[0]).text
    assert '"/openapi.json"' in script
    assert "validatorUrl: null" in script  # no badge fetched from the validator's host


def test_unknown_files_and_the_dropped_pages_are_404(http: TestClient) -> None:
    references = _references(http.get("/docs").text)
    folder = next(r for r in references if r.endswith(".js")).rsplit("/", 1)[0]
    for path in (folder + "/nope.js", folder + "/../../openapi.json", "/redoc",
                 "/docs/oauth2-redirect"):  # fmt: skip
        assert http.get(path).status_code == 404, path
