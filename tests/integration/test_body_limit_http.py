"""The 2 MiB body limit over real HTTP (uvicorn on a free port): decided for every request
before routing, routing headers, tokens or paths are looked at (docs/api.md), with or
without a Content-Length, and a body within the limit reaches the route intact."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from charter.api.app import create_app
from charter.api.limits import MAX_BODY_BYTES
from charter.automations.webhooks import sign
from charter.core.clock import SystemClock
from charter.core.config import Settings
from charter.db.database import Database, connect
from tests.integration.liveserver import live_server
from tests.integration.triggerkit import automation, new_principal, new_secret, webhook

CHUNK = 64 * 1024

# Requests that, with a small body, a route would refuse for reasons other than size:
# no routing headers (400), no token (401), no such route (404), wrong method (405).
REQUESTS = {
    "webhook without routing headers": ("POST", "/events"),
    "control API without a token": ("POST", "/v1/automations"),
    "event submission": ("POST", "/v1/events"),
    "unknown path": ("POST", "/v1/no/such/route"),
    "wrong method": ("DELETE", "/v1/events"),
}


@pytest.fixture(scope="module")
def url(database: Database) -> Iterator[str]:
    app = create_app(database, clock=SystemClock(), settings=Settings())
    with live_server(app) as base:
        yield base


def chunks(total: int) -> Iterator[bytes]:
    """`total` bytes in 64 KiB pieces: httpx sends them chunked, with no Content-Length."""
    sent = 0
    while sent < total:
        piece = min(CHUNK, total - sent)
        sent += piece
        yield b" " * piece


def assert_too_large(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text[:300]
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == "too_large"
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    assert response.headers["x-request-id"]  # answered by middleware, still traceable


@pytest.mark.parametrize("case", sorted(REQUESTS))
def test_a_declared_body_over_the_limit_is_413_before_anything_else(url: str, case: str) -> None:
    method, path = REQUESTS[case]
    response = httpx.request(method, url + path, content=b" " * (MAX_BODY_BYTES + 1), timeout=60)
    assert_too_large(response)


@pytest.mark.parametrize("case", sorted(REQUESTS))
def test_a_chunked_body_over_the_limit_is_413_before_anything_else(url: str, case: str) -> None:
    method, path = REQUESTS[case]
    with httpx.Client(timeout=60) as client:
        request = client.build_request(method, url + path, content=chunks(MAX_BODY_BYTES + 1))
        assert "content-length" not in request.headers
        assert request.headers["transfer-encoding"] == "chunked"
        response = client.send(request)
    assert_too_large(response)


def test_a_much_larger_upload_still_gets_its_answer(url: str) -> None:
    """The rest of a refused body is drained (up to a bound), so a client that is still
    sending reads the 413 instead of a reset connection."""
    with httpx.Client(timeout=60) as client:
        response = client.post(url + "/events", content=chunks(3 * MAX_BODY_BYTES))
    assert_too_large(response)


def test_bodies_within_the_limit_reach_the_routes_that_refuse_them(url: str) -> None:
    at_limit = b" " * MAX_BODY_BYTES
    assert httpx.post(url + "/events", content=at_limit, timeout=60).status_code == 400
    assert httpx.post(url + "/v1/automations", content=at_limit, timeout=60).status_code == 401
    assert httpx.post(url + "/v1/no/such/route", content=at_limit, timeout=60).status_code == 404


def test_healthz_is_not_limited(url: str) -> None:
    response = httpx.request(
        "GET", url + "/healthz", content=b" " * (MAX_BODY_BYTES + 1), timeout=60
    )
    assert response.status_code == 200


def test_a_chunked_body_within_the_limit_is_handed_to_the_route_intact(
    url: str, database_url: str
) -> None:
    """The limit buffers a chunked body; the webhook route then verifies its signature over
    exactly the bytes that were sent."""
    principal, secret = new_principal(), new_secret()
    with connect(database_url) as conn:
        webhook(conn, automation(conn, principal), source="shop", secret=secret)
        conn.commit()
    padding = MAX_BODY_BYTES - len(b'{"source": "shop", "pad": ""}')
    body = b'{"source": "shop", "pad": "' + b"x" * padding + b'"}'
    stamp = int(datetime.now(UTC).timestamp())
    headers = {
        "X-Charter-Principal": principal,
        "X-Charter-Target": "machine-1",
        "webhook-id": "msg_chunked",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, "msg_chunked", stamp, body),
    }

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(body), CHUNK):
            yield body[start : start + CHUNK]

    with httpx.Client(timeout=60) as client:
        request = client.build_request("POST", url + "/events", content=pieces(), headers=headers)
        assert "content-length" not in request.headers
        response = client.send(request)
    assert response.status_code == 202, response.text[:300]
    assert len(response.json()["runs"]) == 1
