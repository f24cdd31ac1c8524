"""Client deadlines are total: a server dripping one byte every 200 ms, which never trips
a per-phase timeout, still fails every client's call once its deadline has passed.

A correctness test of the deadline, not a benchmark: the bounds are generous."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from charter import deadline
from charter.core.ed25519 import SecretKey
from charter.machine.client import MachineClient, register_machine
from charter.machine.failures import transient_failure
from charter.sdk import ApiTimeout, ApiUnavailable, Client
from tests.sdkclients import KINDS, connect

DEADLINE = 1.0
DRIP = 0.2
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"


@dataclass
class DripServer:
    """Answers every request byte by byte, one every 200 ms, forever: the whole head at
    once and then the body (`body`), or the head itself (`head`), or three bytes and done
    (`steady`: a slow but finite answer)."""

    mode: str
    stop: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def serve(self) -> Iterator[str]:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.1)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        host, port = listener.getsockname()[:2]
        try:
            yield f"http://{host}:{port}"
        finally:
            self.stop.set()
            listener.close()

    def _accept(self, listener: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            # A steady server keeps the connection alive for the next request, as a
            # client that reuses its connections expects; the others answer once.
            while self._answer_one(connection) and self.mode == "steady":
                pass

    def _answer_one(self, connection: socket.socket) -> bool:
        """Answer one request; False when the connection is done."""
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            request += chunk
        if self.mode == "steady":
            connection.sendall(HEAD.replace(b"1000000", b"3"))
            drip: Iterator[bytes] = iter([b"{", b"}", b" "])
        elif self.mode == "body":
            connection.sendall(HEAD)
            drip = iter(lambda: b" ", None)
        else:
            drip = iter(bytes([b]) for b in HEAD[:-4] + b"X-Drip: " + b"a" * 100_000)
        try:
            for byte in drip:
                if self.stop.wait(DRIP):
                    return False
                connection.sendall(byte)
        except OSError:
            return False  # the client gave up and closed the connection
        return True


@pytest.fixture(params=["body", "head"])
def dripping(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from DripServer(request.param).serve()


@pytest.fixture
def steady() -> Iterator[str]:
    yield from DripServer("steady").serve()


def within_deadline(call: Callable[[], object], expected: type[BaseException]) -> BaseException:
    started = time.monotonic()
    with pytest.raises(expected) as caught:
        call()
    elapsed = time.monotonic() - started
    assert DEADLINE - 0.1 < elapsed < DEADLINE + 2, elapsed
    return caught.value


@pytest.mark.parametrize("kind", KINDS)
def test_the_charter_client_gives_up_at_its_deadline(dripping: str, kind: str) -> None:
    with connect(kind, dripping, timeout=DEADLINE) as client:
        error = within_deadline(client.health, ApiTimeout)
    assert isinstance(error, ApiUnavailable)  # what the CLI and charter.submit catch
    assert error.retryable
    assert error.message == (
        f"the Charter API at {dripping} did not answer GET /healthz within {DEADLINE:g} s"
    )


def test_the_automations_calls_give_up_at_the_deadline(dripping: str) -> None:
    with Client(dripping, "ch_x", timeout=DEADLINE) as api:
        error = within_deadline(api.automations, ApiTimeout)
    assert isinstance(error, ApiTimeout)
    assert error.message.endswith(f"did not answer GET /v1/automations within {DEADLINE:g} s")


@pytest.mark.parametrize("kind", KINDS)
def test_a_read_gives_up_at_its_deadline(dripping: str, kind: str) -> None:
    with connect(kind, dripping, "ch_x", timeout=DEADLINE) as api:
        error = within_deadline(lambda: api.process("p-1"), ApiTimeout)
    assert isinstance(error, ApiTimeout)
    assert error.message.endswith(f"did not answer GET /v1/processes/p-1 within {DEADLINE:g} s")


def test_a_call_may_set_its_own_deadline(dripping: str) -> None:
    with Client(dripping, "ch_x", timeout=30) as api:
        error = within_deadline(lambda: api.stats(timeout=DEADLINE), ApiTimeout)
    assert isinstance(error, ApiTimeout)
    assert error.message.endswith(f"did not answer GET /v1/stats within {DEADLINE:g} s")


def test_the_machine_client_gives_up_at_its_deadline(dripping: str) -> None:
    async def claim() -> None:
        async with MachineClient(dripping, SecretKey.generate(), timeout=DEADLINE, wait=0) as api:
            await api.claim()

    error = within_deadline(lambda: asyncio.run(claim()), deadline.DeadlineExceeded)
    assert isinstance(error, httpx.TimeoutException)
    assert f"within its {DEADLINE:g} s deadline" in str(error)
    assert transient_failure(error)  # the executor retries it like any timeout


def test_registering_a_machine_gives_up_at_the_default_deadline(
    dripping: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("charter.machine.client.DEFAULT_TIMEOUT", DEADLINE)

    def register() -> None:
        register_machine(dripping, "ch_x", SecretKey.generate(), target="t")

    within_deadline(register, ApiTimeout)


def test_the_default_deadline_is_15_seconds() -> None:
    with Client("http://127.0.0.1:9") as client:
        assert client.timeout == 15.0
    assert MachineClient("http://127.0.0.1:9", SecretKey.generate()).timeout == 15.0
    with pytest.raises(ValueError, match="positive"):
        Client("http://127.0.0.1:9", timeout=0)


def test_a_slow_answer_inside_the_deadline_is_read_whole(steady: str) -> None:
    with deadline.sync_client(steady, DEADLINE) as client:
        for _ in range(2):  # the second call reuses the connection
            assert deadline.request(client, DEADLINE, "GET", "/").json() == {}
        # Without the helper the socket takes the client's per-phase timeouts only.
        assert client.get("/").json() == {}

    async def fetch() -> bytes:
        async with httpx.AsyncClient(base_url=steady) as client:
            response = await deadline.arequest(client, DEADLINE, "GET", "/")
            return response.content

    assert asyncio.run(fetch()) == b"{} "


def test_the_helpers_raise_deadline_exceeded(dripping: str) -> None:
    with deadline.sync_client(dripping, 60) as client:
        within_deadline(
            lambda: deadline.request(client, DEADLINE, "GET", "/"), deadline.DeadlineExceeded
        )

    async def fetch() -> None:
        async with httpx.AsyncClient(base_url=dripping, timeout=60) as client:
            await deadline.arequest(client, DEADLINE, "GET", "/")

    within_deadline(lambda: asyncio.run(fetch()), deadline.DeadlineExceeded)
