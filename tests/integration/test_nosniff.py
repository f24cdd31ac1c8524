"""Every response of the app says `X-Content-Type-Options: nosniff`, so no browser reads
an API answer (a 404 echoing the path, a JSON body with markup in it) as anything but its
declared type: successes, errors answered by routes, by middleware and by the outermost
handler of unexpected failures alike."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.core.config import Settings
from charter.db.database import Database
from tests.integration.apikit import bearer
from tests.integration.test_api_server_errors import FailingDatabase


@pytest.fixture(scope="module")
def client(database: Database) -> Iterator[TestClient]:
    with TestClient(create_app(database, settings=Settings())) as http:
        yield http


def _nosniff(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers.get("x-content-type-options") == "nosniff"


def test_a_json_success_says_nosniff(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.headers["content-type"] == "application/json"
    _nosniff(response, 200)


def test_a_404_for_an_unknown_path_says_nosniff(client: TestClient) -> None:
    _nosniff(client.get("/v1/<script>alert(1)</script>"), 404)


def test_a_401_says_nosniff(client: TestClient) -> None:
    _nosniff(client.get("/v1/processes"), 401)
    _nosniff(client.get("/v1/processes", headers=bearer("ch_unknown")), 401)


def test_answers_of_middleware_say_nosniff(client: TestClient) -> None:
    _nosniff(client.get("/v1/processes/a%00b"), 400)  # the NUL check, before routing
    _nosniff(client.post("/v1/events", content=b"x" * (3 * 1024 * 1024)), 413)
    _nosniff(client.post("/v1/events", content=b"{"), 400)  # the lean submission path


def test_a_500_says_nosniff() -> None:
    database = FailingDatabase("postgresql://unused")
    database.failure = RuntimeError("a bug")
    app = create_app(database, settings=Settings())
    with TestClient(app, raise_server_exceptions=False) as http:
        response = http.get("/v1/actors", headers=bearer("some-token"))
    _nosniff(response, 500)
    assert response.json()["error"]["code"] == "internal"
