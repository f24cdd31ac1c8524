"""`POST /events` over HTTP (in-process app, real PostgreSQL): routing headers, Standard
Webhooks signatures, strict JSON, the body limit, 4xx pass-through and the generic 500."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi.testclient import TestClient

from charter.api import routes_webhooks
from charter.api.app import create_app
from charter.api.limits import MAX_BODY_BYTES
from charter.automations.webhooks import sign
from charter.core.clock import FakeClock
from charter.core.config import Settings
from charter.core.errors import (
    CharterError,
    DatabaseUnavailable,
    Duplicate,
    SerializationConflict,
)
from charter.db.database import Database, connect
from tests.integration.triggerkit import (
    automation,
    new_principal,
    new_secret,
    run_count,
    webhook,
)

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)
BODY = b'{"type": "order.paid", "source": "shop", "data": {"order": 42}}'


@pytest.fixture(scope="module")
def http(database: Database) -> Iterator[TestClient]:
    app = create_app(database, clock=FakeClock(NOW), settings=Settings())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


class Shop:
    """One principal with two automations listening to source `shop` on machine-1."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url
        self.principal = new_principal()
        self.secret = new_secret()
        with connect(database_url) as conn:
            self.any_event = webhook(
                conn, automation(conn, self.principal), source="shop", secret=self.secret
            )
            self.paid = webhook(
                conn,
                automation(conn, self.principal),
                source="shop",
                secret=self.secret,
                event="order.paid",
            )
            conn.commit()

    def runs(self) -> int:
        with connect(self.url) as conn:
            return run_count(conn, self.principal)

    def headers(
        self,
        body: bytes = BODY,
        *,
        message_id: str = "msg_1",
        at: datetime = NOW,
        secret: str | None = None,
    ) -> dict[str, str]:
        stamp = int(at.timestamp())
        return {
            "X-Charter-Principal": self.principal,
            "X-Charter-Target": "machine-1",
            "Content-Type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret or self.secret, message_id, stamp, body),
        }


@pytest.fixture
def shop(database_url: str) -> Shop:
    return Shop(database_url)


def post(http: TestClient, body: bytes, headers: dict[str, str]) -> httpx.Response:
    response: httpx.Response = http.post("/events", content=body, headers=headers)
    return response


def error(response: httpx.Response) -> tuple[str, str]:
    body = response.json()["error"]
    return body["code"], body["message"]


def test_a_signed_delivery_is_202_with_one_run_per_matching_trigger(
    http: TestClient, shop: Shop
) -> None:
    response = post(http, BODY, shop.headers())
    assert response.status_code == 202, response.text
    ids = response.json()["runs"]
    assert len(ids) == 2
    with connect(shop.url) as conn:
        rows = conn.execute(
            "SELECT id::text, trigger_id, status FROM charter.runs WHERE principal = %s",
            (shop.principal,),
        ).fetchall()
    assert {row[0] for row in rows} == set(ids)
    assert {row[1] for row in rows} == {shop.any_event, shop.paid}
    assert {row[2] for row in rows} == {"pending"}


def test_a_replayed_webhook_id_admits_nothing_new(http: TestClient, shop: Shop) -> None:
    assert len(post(http, BODY, shop.headers()).json()["runs"]) == 2
    replay = post(http, BODY, shop.headers())
    assert replay.status_code == 202
    assert replay.json() == {"runs": []}
    assert shop.runs() == 2


def test_routing_headers_are_trimmed(http: TestClient, shop: Shop) -> None:
    headers = shop.headers()
    headers["X-Charter-Principal"] = f"  {shop.principal}\t"
    headers["X-Charter-Target"] = " machine-1 "
    assert post(http, BODY, headers).status_code == 202
    assert shop.runs() == 2


@pytest.mark.parametrize(
    "change",
    [
        "no principal",
        "no target",
        "blank principal",
        "blank target",
        "bad principal",
        "bad target",
    ],
)
def test_missing_or_invalid_routing_headers_are_400(
    http: TestClient, shop: Shop, change: str
) -> None:
    headers = shop.headers()
    which = "X-Charter-Principal" if "principal" in change else "X-Charter-Target"
    if change.startswith("no "):
        del headers[which]
    elif change.startswith("blank "):
        headers[which] = "   "
    else:
        headers[which] = "has spaces/and slashes"
    response = post(http, BODY, headers)
    assert response.status_code == 400
    code, message = error(response)
    assert code == "malformed"
    assert which in message
    assert shop.runs() == 0


def _wrong_secret(shop: Shop) -> tuple[bytes, dict[str, str]]:
    return BODY, shop.headers(secret=new_secret())


def _tampered(shop: Shop) -> tuple[bytes, dict[str, str]]:
    return BODY.replace(b"42", b"43"), shop.headers()


def _garbage_signature(shop: Shop) -> tuple[bytes, dict[str, str]]:
    return BODY, shop.headers() | {"webhook-signature": "v1,AAAA v1,not-base64!"}


def _six_minutes_old(shop: Shop) -> tuple[bytes, dict[str, str]]:
    return BODY, shop.headers(at=NOW - timedelta(minutes=6))


def _six_minutes_ahead(shop: Shop) -> tuple[bytes, dict[str, str]]:
    return BODY, shop.headers(at=NOW + timedelta(minutes=6))


def _nan_timestamp(shop: Shop) -> tuple[bytes, dict[str, str]]:
    return BODY, shop.headers() | {"webhook-timestamp": "NaN"}


Build = Callable[[Shop], tuple[bytes, dict[str, str]]]


def _without(name: str) -> Build:
    def build(shop: Shop) -> tuple[bytes, dict[str, str]]:
        headers = shop.headers()
        del headers[name]
        return BODY, headers

    return build


def _unknown_source(shop: Shop) -> tuple[bytes, dict[str, str]]:
    body = b'{"source": "nobody-listens"}'
    return body, shop.headers(body)


REJECTIONS: dict[str, Build] = {
    "wrong secret": _wrong_secret,
    "tampered body": _tampered,
    "garbage signature": _garbage_signature,
    "timestamp 6 minutes old": _six_minutes_old,
    "timestamp 6 minutes ahead": _six_minutes_ahead,
    "NaN timestamp": _nan_timestamp,
    "no webhook-id": _without("webhook-id"),
    "no webhook-timestamp": _without("webhook-timestamp"),
    "no webhook-signature": _without("webhook-signature"),
    "no trigger for the source": _unknown_source,
}


@pytest.mark.parametrize("case", list(REJECTIONS))
def test_rejected_deliveries_are_401_and_create_nothing(
    http: TestClient, shop: Shop, case: str
) -> None:
    body, headers = REJECTIONS[case](shop)
    response = post(http, body, headers)
    assert response.status_code == 401, response.text
    assert error(response)[0] == "bad_signature"
    assert shop.runs() == 0


@pytest.mark.parametrize(
    "body", [b"{nope", b'{"source": "shop", "source": "shop"}', b'{"n": NaN}', b"\xff\xfe"]
)
def test_a_body_that_is_not_strict_json_is_400(http: TestClient, shop: Shop, body: bytes) -> None:
    response = post(http, body, shop.headers(body))
    assert response.status_code == 400
    assert error(response)[0] == "malformed"
    assert shop.runs() == 0


def test_a_delivery_without_a_source_is_400(http: TestClient, shop: Shop) -> None:
    body = b'{"type": "order.paid"}'
    response = post(http, body, shop.headers(body))
    assert response.status_code == 400
    assert "source" in error(response)[1]


def test_a_body_over_2_mib_is_413_with_content_length(http: TestClient, shop: Shop) -> None:
    body = b" " * (MAX_BODY_BYTES + 1)
    response = post(http, body, shop.headers(body))
    assert response.status_code == 413
    assert error(response)[0] == "too_large"
    assert shop.runs() == 0


def test_a_body_over_2_mib_is_413_when_chunked_without_content_length(
    http: TestClient, shop: Shop
) -> None:
    chunk = b" " * 65536

    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY_BYTES // len(chunk)):
            yield chunk
        yield b" "

    request = http.build_request("POST", "/events", content=chunks(), headers=shop.headers())
    assert "content-length" not in request.headers
    response = http.send(request)
    assert response.status_code == 413
    assert error(response)[0] == "too_large"
    assert shop.runs() == 0


def test_a_body_of_exactly_2_mib_is_read(http: TestClient, shop: Shop) -> None:
    """The limit is inclusive: 2 MiB of JSON is parsed and verified like any other."""
    padding = MAX_BODY_BYTES - len(b'{"source": "shop", "pad": ""}')
    body = b'{"source": "shop", "pad": "' + b"x" * padding + b'"}'
    assert len(body) == MAX_BODY_BYTES
    response = post(http, body, shop.headers(body))
    assert response.status_code == 202, response.text[:200]
    assert len(response.json()["runs"]) == 1  # the any-event trigger


def test_an_unexpected_failure_is_a_generic_500(
    http: TestClient, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[object]:
        raise RuntimeError("secret internals: connection string postgres://x")

    monkeypatch.setattr(routes_webhooks, "receive_event", broken)
    response = post(http, BODY, shop.headers())
    assert response.status_code == 500
    rid = response.headers["x-request-id"]
    assert response.json() == {
        "error": {
            "code": "internal",
            "message": f"Automations service failed (request id {rid})",
            "request_id": rid,
        }
    }


def test_a_server_side_charter_error_is_the_same_generic_500(
    http: TestClient, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[object]:
        raise CharterError("database error: relation charter.runs")

    monkeypatch.setattr(routes_webhooks, "receive_event", broken)
    response = post(http, BODY, shop.headers())
    assert response.status_code == 500
    rid = response.headers["x-request-id"]
    assert error(response) == ("internal", f"Automations service failed (request id {rid})")


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (DatabaseUnavailable("server at 10.0.0.5 refused"), "database_unavailable"),
        (SerializationConflict("could not serialize access"), "serialization_conflict"),
    ],
)
def test_a_retryable_failure_is_503_with_retry_after_and_no_cause(
    http: TestClient,
    shop: Shop,
    monkeypatch: pytest.MonkeyPatch,
    failure: CharterError,
    code: str,
) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[object]:
        raise failure

    monkeypatch.setattr(routes_webhooks, "receive_event", broken)
    response = post(http, BODY, shop.headers())
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert error(response)[0] == code
    assert "10.0.0.5" not in response.text
    assert "serialize" not in response.text


def test_client_errors_raised_inside_pass_through_with_their_message(
    http: TestClient, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    def conflicting(*_args: object, **_kwargs: object) -> list[object]:
        raise Duplicate("that delivery is being admitted already")

    monkeypatch.setattr(routes_webhooks, "receive_event", conflicting)
    response = post(http, BODY, shop.headers())
    assert response.status_code == 409
    assert error(response) == ("duplicate", "that delivery is being admitted already")


def test_the_route_is_in_the_openapi_document(http: TestClient) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert "202" in paths["/events"]["post"]["responses"]
