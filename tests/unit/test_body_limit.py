"""The body limit decides before the app runs; Content-Length is only a hint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable

import pytest
from starlette.types import Message, Receive, Scope, Send

from charter.api.limits import DRAIN_BYTES, BodyLimit
from charter.core.errors import TooLarge

LIMIT = 1000


class Reader:
    """An ASGI app that reads the whole body, as a route does, and answers 200."""

    def __init__(self) -> None:
        self.called = False
        self.body = b""
        self.messages = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.called = True
        while True:
            message = await receive()
            self.messages += 1
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


class Exchange:
    """One request through BodyLimit: what the app saw and what the client got."""

    def __init__(
        self,
        chunks: Iterable[bytes],
        content_length: int | None,
        *,
        method: str = "POST",
        path: str = "/",
    ) -> None:
        self.pending = list(chunks)
        self.received: list[int] = []
        self.sent: list[Message] = []
        self.refused: list[TooLarge] = []
        self.app = Reader()
        headers = (
            [] if content_length is None else [(b"content-length", str(content_length).encode())]
        )
        scope: Scope = {"type": "http", "method": method, "path": path, "headers": headers}

        async def receive() -> Message:
            if not self.pending:  # the body is over: the next event is the client leaving
                return {"type": "http.disconnect"}
            body = self.pending.pop(0)
            self.received.append(len(body))
            return {"type": "http.request", "body": body, "more_body": bool(self.pending)}

        async def send(message: Message) -> None:
            self.sent.append(message)

        async def on_refused(_scope: Scope, exc: TooLarge) -> None:
            self.refused.append(exc)

        asyncio.run(
            BodyLimit(self.app, max_bytes=LIMIT, on_refused=on_refused)(scope, receive, send)
        )

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    def error(self) -> dict[str, str]:
        body = json.loads(self.sent[1]["body"])
        assert set(body) == {"error"}
        error: dict[str, str] = body["error"]
        return error


@pytest.mark.parametrize("content_length", [None, LIMIT])
def test_a_body_at_the_limit_reaches_the_app_whole_in_one_message(
    content_length: int | None,
) -> None:
    exchange = Exchange([b"a" * 300, b"b" * 300, b"c" * 400], content_length)
    assert exchange.status == 200
    assert exchange.app.body == b"a" * 300 + b"b" * 300 + b"c" * 400
    assert exchange.app.messages == 1
    assert exchange.refused == []


@pytest.mark.parametrize("content_length", [None, 10, LIMIT])
def test_one_byte_over_is_413_whatever_content_length_says(content_length: int | None) -> None:
    exchange = Exchange([b"a" * 600, b"b" * 401], content_length)
    assert exchange.status == 413
    assert exchange.error()["code"] == "too_large"
    assert not exchange.app.called
    assert len(exchange.refused) == 1


def test_an_oversized_declared_length_is_refused_before_the_app_runs() -> None:
    exchange = Exchange([b"tiny"], 5000)
    assert exchange.status == 413
    assert "declares 5000 bytes" in exchange.error()["message"]
    assert not exchange.app.called


@pytest.mark.parametrize(("method", "path"), [("POST", "/healthz"), ("GET", "/v1/processes")])
def test_every_request_but_get_healthz_is_limited(method: str, path: str) -> None:
    exchange = Exchange([b"a" * (LIMIT + 1)], None, method=method, path=path)
    assert exchange.status == 413


def test_get_healthz_is_exempt() -> None:
    exchange = Exchange([b"a" * (LIMIT + 1)], None, method="GET", path="/healthz")
    assert exchange.status == 200
    assert exchange.app.called


def test_the_rest_of_a_refused_body_is_drained_so_the_client_gets_the_answer() -> None:
    exchange = Exchange([b"a" * 600] * 4, None)
    assert exchange.received == [600, 600, 600, 600]
    assert exchange.status == 413


def test_draining_is_bounded() -> None:
    piece = 64 * 1024
    exchange = Exchange([b"a" * piece] * (2 * DRAIN_BYTES // piece), None)
    assert exchange.status == 413
    assert sum(exchange.received) <= DRAIN_BYTES + LIMIT + 2 * piece


def test_a_client_that_leaves_mid_body_gets_no_answer_and_the_app_no_request() -> None:
    async def scenario() -> tuple[list[Message], bool]:
        sent: list[Message] = []
        app = Reader()
        messages: list[Message] = [
            {"type": "http.request", "body": b"a" * 10, "more_body": True},
            {"type": "http.disconnect"},
        ]

        async def receive() -> Message:
            return messages.pop(0)

        async def send(message: Message) -> None:
            sent.append(message)

        scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
        await BodyLimit(app, max_bytes=LIMIT)(scope, receive, send)
        return sent, app.called

    sent, called = asyncio.run(scenario())
    assert sent == []
    assert not called


def test_other_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    async def nothing() -> Message:
        return {}

    async def ignore(_message: Message) -> None:
        return None

    asyncio.run(BodyLimit(app)({"type": "lifespan"}, nothing, ignore))
    assert seen == ["lifespan"]
