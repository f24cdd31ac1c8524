"""The SDK against a tiny real HTTP server that answers what it is told: a redirect, or
any success status other than the one a call expects, is an `UnexpectedStatus` carrying
the status (never a result read from an empty body), for the blocking and the asyncio
client alike; redirects are not followed. And a Retry-After of thousands of digits is
read by its length, not handed to float() or int()."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from charter.core.ed25519 import SecretKey
from charter.core.errors import DatabaseUnavailable
from charter.machine.client import MachineClient
from charter.sdk import RetryPolicy, UnexpectedStatus
from charter.sdk.protocol import NO_RETRY, retry_after
from tests.sdkclients import KINDS, connect

AUTOMATION = "0b6d1bd2-4f5c-4a43-9d43-1f1cb3f4a1d7"
HEALTHY = b'{"status": "ok"}'


@dataclass
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Peer:
    """What the server answers next, and the requests it saw (method, path)."""

    url: str
    answer: Answer = field(default_factory=lambda: Answer(200, HEALTHY))
    seen: list[tuple[str, str]] = field(default_factory=list)


@pytest.fixture(scope="module")
def peer() -> Iterator[Peer]:
    state = Peer("")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            state.seen.append((self.command, self.path))
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            answer = state.answer
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            if answer.status not in (204, 304):
                self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if answer.status not in (204, 304):
                self.wfile.write(answer.body)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _call(kind: str, peer: Peer, name: str, *args: object) -> object:
    with connect(kind, peer.url, "ch_token", retry=NO_RETRY) as client:
        method: Callable[..., object] = getattr(client, name)
        return method(*args)


REDIRECT = {"Location": "/elsewhere"}
# (call, its arguments, an answer it does not expect)
UNEXPECTED = [
    ("health", (), Answer(307)),
    ("health", (), Answer(307, HEALTHY, REDIRECT)),
    ("health", (), Answer(302, b"", REDIRECT)),
    ("health", (), Answer(301, HEALTHY, REDIRECT)),
    ("health", (), Answer(308, b"", REDIRECT)),
    ("health", (), Answer(304)),
    ("health", (), Answer(204)),
    ("health", (), Answer(201, HEALTHY)),
    ("delete_automation", (AUTOMATION,), Answer(307)),
    ("delete_automation", (AUTOMATION,), Answer(200, b"{}")),
    ("delete_automation", (AUTOMATION,), Answer(302, b"", REDIRECT)),
    ("process", ("p-1",), Answer(303, b"", REDIRECT)),
    ("create_automation", ("n", "machine-1"), Answer(200, b"{}")),
    ("metrics", (), Answer(307, b"", REDIRECT)),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("name", "args", "answer"),
    UNEXPECTED,
    ids=[f"{name}-{answer.status}" for name, _, answer in UNEXPECTED],
)
def test_a_status_the_call_does_not_expect_is_unexpected_status(
    peer: Peer, kind: str, name: str, args: tuple[object, ...], answer: Answer
) -> None:
    peer.answer = answer
    peer.seen.clear()
    with pytest.raises(UnexpectedStatus) as caught:
        _call(kind, peer, name, *args)
    error = caught.value
    assert error.status == answer.status
    assert error.context["status"] == answer.status
    assert (error.code, error.retryable) == ("unexpected_status", False)
    assert str(answer.status) in error.message
    if "Location" in answer.headers:
        assert error.context["location"] == "/elsewhere"
    assert len(peer.seen) == 1  # not followed, not retried
    assert "/elsewhere" not in peer.seen[0][1]


EXPECTED = [
    ("health", (), Answer(200, HEALTHY), {"status": "ok"}),
    ("delete_automation", (AUTOMATION,), Answer(204), None),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "args", "answer", "result"), EXPECTED)
def test_the_status_the_call_expects_is_its_result(
    peer: Peer, kind: str, name: str, args: tuple[object, ...], answer: Answer, result: object
) -> None:
    peer.answer = answer
    assert _call(kind, peer, name, *args) == result


@pytest.mark.parametrize("kind", KINDS)
def test_a_redirecting_server_fails_a_wait_instead_of_streaming_nothing(
    peer: Peer, kind: str
) -> None:
    peer.answer = Answer(307, b"", REDIRECT)
    with pytest.raises(UnexpectedStatus):
        _call(kind, peer, "wait_for", "p-1", "done")


HUGE = "9" * 5000


@pytest.mark.parametrize("kind", KINDS)
def test_a_retry_after_of_thousands_of_digits_gives_up_at_once(peer: Peer, kind: str) -> None:
    body = b'{"error": {"code": "database_unavailable", "message": "down"}}'
    peer.answer = Answer(503, body, {"Retry-After": HUGE})
    peer.seen.clear()
    started = time.monotonic()
    retrying = RetryPolicy(attempts=3, base_seconds=0.001, cap_seconds=0.001)
    with (
        connect(kind, peer.url, "ch_token", retry=retrying) as client,
        pytest.raises(DatabaseUnavailable),
    ):
        client.health()
    assert len(peer.seen) == 1  # waiting that long would pass the deadline: no retry
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        ("0", 0.0),
        ("0" * 5000 + "3", 3.0),
        (HUGE, float(2**64 - 1)),
        ("9" * 400, float(2**64 - 1)),
        ("1.5", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("\u00b2", None),
        (None, None),
        ("", None),
    ],
)
def test_the_sdk_reads_retry_after_as_whole_seconds(
    value: str | None, seconds: float | None
) -> None:
    assert retry_after(value) == seconds


MACHINE_UNEXPECTED = [
    ("claim", (), Answer(307, b"", REDIRECT)),
    ("claim", (), Answer(202, b"{}")),
    ("renew", ("r-1", "t"), Answer(302, b"", REDIRECT)),
    ("renew", ("r-1", "t"), Answer(204)),
]


@pytest.mark.parametrize(
    ("name", "args", "answer"),
    MACHINE_UNEXPECTED,
    ids=[f"{name}-{answer.status}" for name, _, answer in MACHINE_UNEXPECTED],
)
def test_the_machine_client_refuses_a_status_it_does_not_expect(
    peer: Peer, name: str, args: tuple[object, ...], answer: Answer
) -> None:
    peer.answer = answer

    async def call() -> object:
        async with MachineClient(peer.url, SecretKey.generate(), wait=0) as machine:
            method: Callable[..., Any] = getattr(machine, name)
            return await method(*args)

    with pytest.raises(UnexpectedStatus) as caught:
        asyncio.run(call())
    assert caught.value.status == answer.status


def test_the_machine_client_reads_no_run_from_a_204(peer: Peer) -> None:
    peer.answer = Answer(204)

    async def call() -> object:
        async with MachineClient(peer.url, SecretKey.generate(), wait=0) as machine:
            return await machine.claim()

    assert asyncio.run(call()) is None
