"""The console's files over HTTP (api/console.py) and the export bundle route the
console's Export button calls."""

from __future__ import annotations

import re

import pytest

from charter.api.console import CSP, IMMUTABLE
from charter.console import bundle
from charter.db.database import Database
from tests.integration.apikit import Harness, bearer, make_harness


@pytest.fixture(scope="module")
def h(database: Database) -> Harness:
    return make_harness(database)


@pytest.mark.parametrize(
    "path",
    ["/console/", "/console/processes", "/console/processes/p-1", "/console/workflows/a/b/c",
     "/console/runs/x", "/console/no/such/page"],
)  # fmt: skip
def test_every_console_page_is_the_shell(h: Harness, path: str) -> None:
    response = h.http.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    digest = bundle().digest
    assert f'src="/console/assets/{digest}/js/main.js"' in response.text
    assert "{{digest}}" not in response.text


def test_the_shell_has_no_inline_script(h: Harness) -> None:
    html = h.http.get("/console/").text
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, flags=re.S)
    assert scripts == [""]  # one external module, nothing inline
    assert re.search(r"\son[a-z]+\s*=", html) is None  # no inline event handlers


def test_the_policy_allows_only_this_origin_and_no_inline_script() -> None:
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert "unsafe" not in CSP
    assert directives["frame-ancestors"] == "'none'"


def test_console_without_slash_redirects(h: Harness) -> None:
    response = h.http.get("/console", follow_redirects=False)
    assert response.status_code == 308
    assert response.headers["location"] == "/console/"


@pytest.mark.parametrize(
    ("name", "content_type"),
    [("js/main.js", "text/javascript; charset=utf-8"), ("console.css", "text/css; charset=utf-8"),
     ("favicon.svg", "image/svg+xml")],
)  # fmt: skip
def test_assets_have_their_types_and_are_immutable_under_the_digest(
    h: Harness, name: str, content_type: str
) -> None:
    response = h.http.get(f"/console/assets/{bundle().digest}/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    assert response.headers["cache-control"] == IMMUTABLE
    assert response.headers["content-security-policy"] == CSP


def test_an_asset_asked_for_under_an_old_digest_is_not_cached(h: Harness) -> None:
    response = h.http.get("/console/assets/0000000000000000/js/main.js")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize(
    "name", ["js/nope.js", "index.html", "..%2F__init__.py", "js%2F..%2F..%2Fapi.py"]
)
def test_unknown_assets_are_404(h: Harness, name: str) -> None:
    response = h.http.get(f"/console/assets/{bundle().digest}/{name}")
    assert response.status_code == 404
    assert response.headers["cache-control"] == "no-store"


def test_every_module_the_pages_import_is_served() -> None:
    """A relative import that names a missing file would break the console at load."""
    assets = bundle().assets
    for name, asset in assets.items():
        if not name.endswith(".js"):
            continue
        for target in re.findall(rb'from "\./([^"]+)"', asset.body):
            assert "js/" + target.decode() in assets, f"{name} imports a missing {target!r}"


def test_no_module_sets_html_from_strings() -> None:
    """Data reaches the page as text only: no innerHTML, outerHTML, insertAdjacentHTML,
    document.write or eval anywhere in the console's scripts."""
    for name, asset in bundle().assets.items():
        if name.endswith(".js"):
            text = asset.body.decode()
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                         "eval(", "new Function"):  # fmt: skip
                assert sink not in text, f"{name} uses {sink}"


# --- the export bundle over HTTP -----------------------------------------------------------


def test_export_returns_the_bundle(h: Harness) -> None:
    process_id, head = h.open_process()
    response = h.http.get(f"/v1/processes/{process_id}/export", headers=bearer(h.admin))
    assert response.status_code == 200
    body = response.json()
    assert body["process"]["id"] == process_id
    assert [e["hash"] for e in body["events"]] == [head]


def test_export_needs_processes_read(h: Harness) -> None:
    process_id, _ = h.open_process()
    assert h.http.get(f"/v1/processes/{process_id}/export").status_code == 401
    runs_only = h.token("runs:read")
    response = h.http.get(f"/v1/processes/{process_id}/export", headers=bearer(runs_only))
    assert response.status_code == 403


def test_export_of_an_unknown_process_is_404(h: Harness) -> None:
    response = h.http.get("/v1/processes/p-none/export", headers=bearer(h.admin))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_process"
