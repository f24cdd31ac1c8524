"""The client rebuilds errors from their wire codes, and says when the API is unreachable."""

from __future__ import annotations

import json

import httpx
import pytest

from charter.client import ApiUnavailable, CharterClient, error_class
from charter.core.errors import (
    CharterError,
    InvalidWorkflow,
    Malformed,
    StalePrev,
    TooLarge,
    UnknownProcess,
)


def _client(status: int, body: bytes, seen: list[httpx.Request] | None = None) -> CharterClient:
    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, content=body)

    http = httpx.Client(transport=httpx.MockTransport(answer))
    return CharterClient("http://charter.test", "ch_secret", http=http)


def _error(code: str, message: str = "m", **context: object) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, **context}}).encode()


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("malformed", Malformed),
        ("unknown_process", UnknownProcess),
        ("too_large", TooLarge),
        ("invalid_workflow", InvalidWorkflow),
    ],
)
def test_error_codes_map_to_their_classes(code: str, cls: type[CharterError]) -> None:
    assert error_class(code) is cls


def test_stale_prev_comes_back_with_its_head() -> None:
    client = _client(409, _error("stale_prev", "stale", head="ab" * 32, seq=3))
    with pytest.raises(StalePrev) as caught:
        client.process("p-1")
    assert caught.value.message == "stale"
    assert caught.value.context == {"head": "ab" * 32, "seq": 3}


def test_invalid_workflow_keeps_its_problems() -> None:
    problems = [{"pointer": "/states", "message": "empty"}]
    client = _client(422, _error("invalid_workflow", "1 problem(s)", problems=problems))
    with pytest.raises(InvalidWorkflow) as caught:
        client.deploy_workflow("a/b", {})
    assert caught.value.context["problems"] == problems


def test_an_unknown_code_is_a_plain_charter_error_that_keeps_it() -> None:
    client = _client(418, _error("teapot", "short and stout"))
    with pytest.raises(CharterError) as caught:
        client.workflows()
    assert type(caught.value) is CharterError
    assert caught.value.message == "short and stout"
    assert caught.value.context == {"code": "teapot", "status": 418}


def test_a_non_json_error_body_is_reported_with_its_status() -> None:
    client = _client(502, b"<html>bad gateway</html>")
    with pytest.raises(CharterError, match="HTTP 502: <html>bad gateway"):
        client.actors()


def test_requests_carry_the_token_and_quote_path_segments() -> None:
    seen: list[httpx.Request] = []
    client = _client(200, b'{"id": "x"}', seen)
    client.process("a b/c")
    client.workflow("customer/retail")
    assert seen[0].headers["authorization"] == "Bearer ch_secret"
    assert seen[0].url.raw_path == b"/v1/processes/a%20b%2Fc"
    assert seen[1].url.raw_path == b"/v1/workflows/customer/retail"


def test_an_unreachable_api_is_api_unavailable() -> None:
    with CharterClient("http://127.0.0.1:1", timeout=2) as client, pytest.raises(ApiUnavailable):
        client.health()
