"""Request ids and 5xx bodies: every response carries `X-Request-Id` (the client's, when
sane), every 5xx is logged with it, and no 5xx body carries the failure's own text."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, NoReturn

import httpx
import pytest
from fastapi.testclient import TestClient

from charter.api import routes_webhooks
from charter.api.app import create_app
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.errors import CharterError, DatabaseUnavailable, SerializationConflict
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from tests.integration.apikit import bearer

SECRET = "relation charter.secret_things at db.internal:5432"


class FailingDatabase(Database):
    """A database whose every connection fails with the error set on it."""

    failure: BaseException = CharterError(f"database error: {SECRET}", sqlstate="42P01")

    def connection(self, role: Role) -> NoReturn:
        raise self.failure


@pytest.fixture
def failing() -> Iterator[tuple[TestClient, FailingDatabase]]:
    database = FailingDatabase("postgresql://unused")
    app = create_app(database, settings=Settings())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, database


@pytest.fixture(scope="module")
def working(database: Database) -> Iterator[TestClient]:
    with TestClient(create_app(database, settings=Settings())) as client:
        yield client


def _generic(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert SECRET not in response.text
    assert "secret" not in response.text
    rid = response.headers["x-request-id"]
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == rid
    assert error["message"].endswith(f"(request id {rid})")
    assert set(error) == {"code", "message", "request_id"}  # no sqlstate, no context
    return error


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        (CharterError(f"database error: {SECRET}", sqlstate="42P01"), 500, "internal"),
        (DatabaseUnavailable(f"connection to {SECRET} refused"), 503, "database_unavailable"),
        (SerializationConflict(f"could not serialize: {SECRET}"), 503, "serialization_conflict"),
        (RuntimeError(f"bug near {SECRET}"), 500, "internal"),
    ],
)
def test_a_server_error_body_is_generic_with_the_request_id_and_the_cause_is_logged(
    failing: tuple[TestClient, FailingDatabase],
    caplog: pytest.LogCaptureFixture,
    failure: BaseException,
    status: int,
    code: str,
) -> None:
    client, database = failing
    database.failure = failure
    with caplog.at_level(logging.ERROR, logger="charter.api.errors"):
        response = client.get("/v1/actors", headers=bearer("some-token"))
    _generic(response, status, code)
    rid = response.headers["x-request-id"]
    logged = [r for r in caplog.records if rid in r.getMessage()]
    assert logged, caplog.text
    assert any(SECRET in r.getMessage() or SECRET in str(r.exc_info) for r in logged)


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        (CharterError(f"database error: {SECRET}", sqlstate="42P01"), 500, "internal"),
        (DatabaseUnavailable(f"connection to {SECRET} refused"), 503, "database_unavailable"),
        (RuntimeError(f"bug near {SECRET}"), 500, "internal"),
    ],
)
def test_an_event_submissions_server_error_is_generic_and_logged_with_its_request_id(
    failing: tuple[TestClient, FailingDatabase],
    caplog: pytest.LogCaptureFixture,
    failure: BaseException,
    status: int,
    code: str,
) -> None:
    # POST /v1/events is answered on its lean path, before routing: same shapes and logs.
    client, database = failing
    database.failure = failure
    key = SecretKey.generate()
    envelope = Envelope(
        v=1,
        process="p-1",
        workflow="tests/anything",
        action="create",
        input={},
        prev=None,
        actor=key.public_key_hex,
        at=format_rfc3339(datetime.now(UTC)),
    )
    body = json.dumps(sign(envelope, key).to_json()).encode()
    with caplog.at_level(logging.ERROR):
        response = client.post("/v1/events", content=body)
    _generic(response, status, code)
    rid = response.headers["x-request-id"]
    logged = [r for r in caplog.records if rid in r.getMessage()]
    assert logged, caplog.text
    assert any(SECRET in r.getMessage() or SECRET in str(r.exc_info) for r in logged)


def test_a_given_request_id_is_used_in_the_body_the_header_and_the_log(
    failing: tuple[TestClient, FailingDatabase], caplog: pytest.LogCaptureFixture
) -> None:
    client, database = failing
    database.failure = CharterError(f"database error: {SECRET}")
    with caplog.at_level(logging.ERROR, logger="charter.api.errors"):
        response = client.get("/v1/actors", headers={**bearer("t"), "X-Request-Id": "trace-42:abc"})
    assert _generic(response, 500, "internal")["request_id"] == "trace-42:abc"
    assert "trace-42:abc" in caplog.text


def test_healthz_says_unavailable_without_the_databases_words(
    failing: tuple[TestClient, FailingDatabase],
) -> None:
    client, database = failing
    database.failure = DatabaseUnavailable(f"connection to {SECRET} refused")
    response = client.get("/healthz")
    assert response.json()["ok"] is False
    _generic(response, 503, "database_unavailable")
    assert response.headers["retry-after"] == "1"


def test_the_webhook_routes_500_keeps_its_generic_message_and_adds_the_request_id(
    working: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[object]:
        raise RuntimeError(SECRET)

    monkeypatch.setattr(routes_webhooks, "receive_event", broken)
    response = working.post(
        "/events",
        content=b'{"source": "shop"}',
        headers={"X-Charter-Principal": "p", "X-Charter-Target": "t"},
    )
    error = _generic(response, 500, "internal")
    assert error["message"].startswith("Automations service failed")


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/healthz", {}),
        ("GET", "/v1/processes/x", {}),  # 401
        ("GET", "/v1/no/such/route", {}),  # 404
        ("POST", "/v1/events", {}),  # 400
        ("GET", "/v1/processes/a%00b", {}),  # 400 from middleware, before routing
    ],
)
def test_every_response_carries_a_request_id(
    working: TestClient, method: str, path: str, headers: dict[str, str]
) -> None:
    first = working.request(method, path, headers=headers)
    second = working.request(method, path, headers=headers)
    assert len(first.headers["x-request-id"]) >= 16
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("abc-123", True),
        ("0" * 128, True),
        ("0" * 129, False),
        ("has space", False),
        ("", False),
    ],
)
def test_a_client_request_id_is_echoed_only_when_sane(
    working: TestClient, given: str, kept: bool
) -> None:
    response = working.get("/healthz", headers={"X-Request-Id": given})
    assert (response.headers["x-request-id"] == given) is kept
