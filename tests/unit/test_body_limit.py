"""The body limit counts bytes as they stream; Content-Length is only a hint."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest
from starlette.types import Message, Receive, Scope, Send

from charter.api.limits import BodyLimit
from charter.core.errors import TooLarge

LIMIT = 1000


class Reader:
    """An ASGI app that reads the whole body, as a route does."""

    def __init__(self) -> None:
        self.body = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                return


def _run(chunks: Iterable[bytes], content_length: int | None) -> tuple[Reader, list[Message]]:
    pending = list(chunks)
    delivered: list[Message] = []

    async def receive() -> Message:
        body = pending.pop(0) if pending else b""
        message = {"type": "http.request", "body": body, "more_body": bool(pending)}
        delivered.append(message)
        return message

    async def send(_message: Message) -> None:
        return None

    headers = [] if content_length is None else [(b"content-length", str(content_length).encode())]
    scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    app = Reader()
    asyncio.run(BodyLimit(app, max_bytes=LIMIT)(scope, receive, send))
    return app, delivered


@pytest.mark.parametrize("content_length", [None, LIMIT])
def test_a_body_at_the_limit_passes_in_any_number_of_chunks(content_length: int | None) -> None:
    app, _ = _run([b"a" * 300, b"b" * 300, b"c" * 400], content_length)
    assert len(app.body) == LIMIT


@pytest.mark.parametrize("content_length", [None, 10, LIMIT])
def test_one_byte_over_is_refused_whatever_content_length_says(content_length: int | None) -> None:
    with pytest.raises(TooLarge):
        _run([b"a" * 600, b"b" * 401], content_length)


def test_an_oversized_declared_length_is_refused_before_the_body_is_read() -> None:
    with pytest.raises(TooLarge, match="declares 5000 bytes"):
        _run([b"tiny"], 5000)


def test_the_rest_of_a_refused_body_is_drained_so_the_client_gets_the_answer() -> None:
    received: list[int] = []

    async def scenario() -> None:
        pending = [b"a" * 600] * 4

        async def receive() -> Message:
            body = pending.pop(0)
            received.append(len(body))
            return {"type": "http.request", "body": body, "more_body": bool(pending)}

        async def send(_message: Message) -> None:
            return None

        scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
        with pytest.raises(TooLarge):
            await BodyLimit(Reader(), max_bytes=LIMIT)(scope, receive, send)

    asyncio.run(scenario())
    assert received == [600, 600, 600, 600]


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
