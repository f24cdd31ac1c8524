"""A total deadline for one HTTP call: connect, send, wait and read the whole body.

httpx's timeouts are per phase and per socket operation, so a server that drips a byte
every few hundred milliseconds never trips them and holds a client for as long as it
likes. Charter's clients bound the whole call instead, like a browser's
`AbortSignal.timeout(ms)`:

- async (`arequest`): `asyncio.timeout` around the request, which reads the body;
  cancellation reaches whatever phase the call is in;
- sync (`request`): there is no cancelling a blocked socket read, so the clients build
  their `httpx.Client` with `sync_client`, whose sockets clip every connect, read and
  write to the time left until the call's deadline (held in a context variable). The
  operation running when the deadline passes times out.

Either way the call raises `DeadlineExceeded`, an `httpx.TimeoutException`: code that
classifies httpx's errors (`failures.transient_failure`, the clients' ApiTimeout) keeps
treating it as a timeout. A client handed in by the caller (a test's ASGI client) keeps
its own transport, and only the async deadline applies to it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import httpcore
import httpx

T = TypeVar("T")


class DeadlineExceeded(httpx.TimeoutException):
    """The call did not finish (connect, send, wait, read the body) within its deadline."""


def _message(method: str, url: str, seconds: float) -> str:
    return f"{method} {url} did not finish within its {seconds:g} s deadline"


# --- async ------------------------------------------------------------------------------


async def arequest(
    client: httpx.AsyncClient, seconds: float, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """`client.request(...)` (the whole body read) within `seconds`, or DeadlineExceeded."""
    try:
        async with asyncio.timeout(seconds):
            return await client.request(method, url, **kwargs)
    except TimeoutError as exc:
        raise DeadlineExceeded(_message(method, url, seconds)) from exc


# --- sync -------------------------------------------------------------------------------


@dataclass
class _Budget:
    """The deadline of the call running in this context (time.monotonic() seconds)."""

    deadline: float
    expired: bool = False


_BUDGET: ContextVar[_Budget | None] = ContextVar("charter_http_deadline", default=None)


def request(
    client: httpx.Client, seconds: float, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """`client.request(...)` (the whole body read) within `seconds`, or DeadlineExceeded.

    The deadline is enforced by the sockets of a client made by `sync_client`."""
    with within(seconds) as budget:
        try:
            return client.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            if budget.expired:
                raise DeadlineExceeded(_message(method, url, seconds)) from exc
            raise


@contextmanager
def within(seconds: float) -> Iterator[_Budget]:
    """Every socket operation of a `sync_client` client in the block ends by `seconds`
    from now (a streamed answer read in the block included)."""
    budget = _Budget(time.monotonic() + seconds)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def sync_client(base_url: str, seconds: float) -> httpx.Client:
    """An httpx.Client for `base_url` whose calls through `request` keep their deadline.

    `seconds` is also every phase's own timeout, which bounds calls made without one."""
    return httpx.Client(base_url=base_url, timeout=seconds, transport=_transport(base_url))


def _transport(base_url: str) -> httpx.HTTPTransport:
    # A client given a transport ignores HTTP(S)_PROXY, so name the proxy the environment
    # sets for this origin ourselves.
    transport = httpx.HTTPTransport(proxy=_environment_proxy(base_url))
    # httpx has no public way to pass httpcore a network backend; wrap the one its pool
    # holds, and refuse loudly if a new httpx moved it (the deadline would silently go).
    pool = transport._pool
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(backend, httpcore.NetworkBackend):
        raise RuntimeError("cannot bound HTTP calls: httpx's pool has no network backend")
    pool._network_backend = _Backend(backend)
    return transport


def _environment_proxy(url: str) -> str | None:
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _bounded(
    operation: Callable[[float | None], T], timeout: float | None, error: type[Exception]
) -> T:
    """Run a socket operation with its timeout clipped to what is left of the deadline."""
    budget = _BUDGET.get()
    if budget is None:
        return operation(timeout)
    left = budget.deadline - time.monotonic()
    if left <= 0:
        budget.expired = True
        raise error("the call's deadline passed")
    if timeout is not None and timeout < left:
        return operation(timeout)  # the phase's own timeout comes first
    try:
        return operation(left)
    except error:
        budget.expired = True
        raise


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _bounded(lambda t: self._inner.read(max_bytes, t), timeout, httpcore.ReadTimeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _bounded(lambda t: self._inner.write(buffer, t), timeout, httpcore.WriteTimeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        def handshake(t: float | None) -> httpcore.NetworkStream:
            return self._inner.start_tls(ssl_context, server_hostname, t)

        return _Stream(_bounded(handshake, timeout, httpcore.ConnectTimeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        def connect(t: float | None) -> httpcore.NetworkStream:
            return self._inner.connect_tcp(host, port, t, local_address, socket_options)

        return _Stream(_bounded(connect, timeout, httpcore.ConnectTimeout))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        def connect(t: float | None) -> httpcore.NetworkStream:
            return self._inner.connect_unix_socket(path, t, socket_options)

        return _Stream(_bounded(connect, timeout, httpcore.ConnectTimeout))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
