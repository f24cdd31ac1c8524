"""charter.Client and charter.AsyncClient against the real API over HTTP (uvicorn on a
free port, the module's PostgreSQL): submit re-signs when the head moves, errors carry
their code, status, retryable and context, listings iterate page after page, and
wait_for follows the live stream (or polls a server without one). Each test that can runs
for both clients (`kind`), the asyncio one behind a blocking face (tests/sdkclients.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import httpx
import pytest
from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

import charter
from charter.core.ed25519 import SecretKey
from charter.core.envelope import sign
from charter.core.errors import ForbiddenRole, StalePrev, Unauthorized, UnknownProcess
from charter.db.database import Database
from charter.engine.reads import Reads
from charter.operator.hub import HintHub
from charter.sdk import Process, RetryPolicy, WaitTimeout
from tests.integration.apikit import ERRANDS, Harness, make_harness, new_id
from tests.integration.liveserver import live_server
from tests.sdkclients import KINDS, connect


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


@pytest.fixture(scope="module")
def url(h: Harness) -> Iterator[str]:
    with live_server(h.http.app) as base:
        yield base


def _racer(h: Harness, process_id: str, times: int) -> Callable[[], datetime]:
    """A clock for the client's envelopes that, when the client signs (after it read
    the head), first has another writer extend the chain (the first `times` times)."""
    clerk = h.keys["clerk"]
    raced: list[int] = []

    def now() -> datetime:
        if len(raced) < times:
            head = Reads(h.database).process(process_id).head
            note = h.envelope(clerk, process_id, "note", {"racer": len(raced)}, prev=head)
            h.engine.process_event(sign(note, clerk))
            raced.append(1)
        return h.clock.now()

    return now


# --- submit -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_submit_creates_then_extends_a_process(h: Harness, url: str, kind: str) -> None:
    clerk, process_id = h.keys["clerk"], new_id("sdk")
    with connect(kind, url, h.admin) as client:
        created = client.submit(
            clerk, process_id, "create", {"amount": 5}, ERRANDS, now=h.clock.now
        )
        # An existing process: the workflow is the one it runs.
        noted = client.submit(clerk, process_id, "note", {"n": 1}, now=h.clock.now)
        events = client.events(process_id)
    assert (created.seq, created.process.state, created.process.data) == (1, "open", {"amount": 5})
    assert (noted.seq, noted.process.head) == (2, noted.hash)
    assert [e.action for e in events] == ["create", "note"]
    assert events[1].envelope["prev"] == created.hash


@pytest.mark.parametrize("kind", KINDS)
def test_submit_resigns_on_a_forced_stale_head(h: Harness, url: str, kind: str) -> None:
    process_id, _ = h.open_process()
    clerk, retries = h.keys["clerk"], list[int]()
    with connect(kind, url, h.admin) as client:
        accepted = client.submit(
            clerk, process_id, "note", {"ours": True},
            now=_racer(h, process_id, times=2), on_stale=retries.append,
        )  # fmt: skip
        events = client.events(process_id)
        latest = client.process(process_id)
    assert retries == [1, 2]
    assert accepted.seq == 4  # create, two racers, ours
    assert latest.head == accepted.hash
    assert events[-1].input == {"ours": True}
    assert events[-1].envelope["prev"] == events[-2].hash


@pytest.mark.parametrize("kind", KINDS)
def test_submit_gives_up_after_its_stale_retries_with_the_servers_head(
    h: Harness, url: str, kind: str
) -> None:
    process_id, _ = h.open_process()
    with connect(kind, url, h.admin) as client, pytest.raises(StalePrev) as caught:
        client.submit(
            h.keys["clerk"], process_id, "note", {},
            now=_racer(h, process_id, times=10), stale_retries=1,
        )  # fmt: skip
    assert caught.value.context["head"] == Reads(h.database).process(process_id).head


class _LosesFirstAnswer(httpx.HTTPTransport):
    """A transport that delivers the first event submitted and then loses its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path == "/v1/events" and not self.lost:
            response.read()
            response.close()
            self.lost += 1
            raise httpx.ReadError("the answer was lost", request=request)
        return response


def test_a_submit_whose_answer_was_lost_is_sent_again_and_recorded_once(
    h: Harness, url: str
) -> None:
    transport = _LosesFirstAnswer()
    retry = RetryPolicy(attempts=3, base_seconds=0.01, cap_seconds=0.01)
    process_id = new_id("lost")
    with (
        httpx.Client(transport=transport) as http,
        charter.Client(url, h.admin, http=http, retry=retry) as client,
    ):
        accepted = client.submit(
            h.keys["clerk"], process_id, "create", {"amount": 3}, ERRANDS, now=h.clock.now
        )
        events = client.events(process_id)
    assert transport.lost == 1
    assert [e.hash for e in events] == [accepted.hash]  # sent twice, recorded once
    assert (accepted.seq, accepted.process.state) == (1, "open")


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_errors_carry_code_status_retryable_and_context(h: Harness, url: str, kind: str) -> None:
    process_id, first = h.open_process()
    clerk = h.keys["clerk"]
    with connect(kind, url, h.admin) as client:
        with pytest.raises(ForbiddenRole) as refused:
            client.submit(clerk, process_id, "approve", {}, now=h.clock.now)
        moved = client.submit(clerk, process_id, "note", {}, now=h.clock.now)
        stale = sign(h.envelope(clerk, process_id, "note", {"late": True}, prev=first), clerk)
        with pytest.raises(StalePrev) as caught:
            client.submit_signed(stale)
        with pytest.raises(UnknownProcess) as unknown:
            client.process("no-such-process")
        with pytest.raises(UnknownProcess) as unverified:
            client.verify("no-such-process")
    error = refused.value
    assert (error.code, error.http_status, error.retryable) == ("forbidden_role", 403, False)
    stale_error = caught.value
    assert (stale_error.code, stale_error.http_status, stale_error.retryable) == (
        "stale_prev",
        409,
        False,
    )
    assert stale_error.context == {"head": moved.hash, "seq": 2}
    for missing in (unknown.value, unverified.value):
        assert (missing.code, missing.http_status) == ("unknown_process", 404)
    with connect(kind, url, "ch_not_a_token") as stranger, pytest.raises(Unauthorized) as who:
        stranger.stats()
    assert (who.value.code, who.value.http_status) == ("unauthorized", 401)


# --- listings ---------------------------------------------------------------------------


def _processes(h: Harness, count: int) -> tuple[str, set[str]]:
    prefix = new_id("pg")
    clerk = h.keys["clerk"]
    made = set()
    for n in range(count):
        process_id = f"{prefix}-{n}"
        h.accept(sign(h.envelope(clerk, process_id, "create", {"amount": n}), clerk))
        made.add(process_id)
    return prefix, made


@pytest.mark.parametrize("kind", KINDS)
def test_listings_iterate_page_after_page(h: Harness, url: str, kind: str) -> None:
    prefix, made = _processes(h, 5)
    names = [f"{prefix}-a{n}" for n in range(3)]
    with connect(kind, url, h.admin) as client:
        first = client.processes(q=prefix, limit=2)
        every = list(client.iter_processes(q=prefix, page_size=2))
        for name in names:
            client.create_automation(name, "laptop")
        # A `*` token lists every principal's automations: only these are of this test.
        automations = [a.name for a in client.iter_automations(page_size=2)]
    assert len(first.items) == 2
    assert first.next_cursor is not None
    assert [p.id for p in every][:2] == [p.id for p in first.items]
    assert sorted(p.id for p in every) == sorted(made)  # each once
    assert sorted(a for a in automations if a.startswith(prefix)) == names  # each once


# --- wait_for ---------------------------------------------------------------------------


def _hub(h: Harness) -> HintHub:
    app = h.http.app
    assert isinstance(app, FastAPI)
    hub = app.state.hints
    assert isinstance(hub, HintHub)
    return hub


def _subscribed(h: Harness, before: int) -> None:
    """Until the live stream has had a subscription after the first `before`. (Not the
    count of open ones: a stream of an earlier test may be noticed closed meanwhile.)"""
    hub = _hub(h)
    for _ in range(500):
        if hub.subscriptions > before:
            return
        time.sleep(0.02)
    raise AssertionError("the client never subscribed to the live stream")


@pytest.mark.parametrize("kind", KINDS)
def test_wait_for_follows_the_live_stream(h: Harness, url: str, kind: str) -> None:
    process_id, _ = h.open_process(amount=5)
    before = _hub(h).subscriptions
    found: list[Process] = []
    with connect(kind, url, h.admin) as client:
        # Polling once a minute: only the stream can wake the waiter in time.
        waiter = threading.Thread(
            target=lambda: found.append(
                client.wait_for(process_id, "approved", timeout=30, poll_interval=60)
            ),
            daemon=True,  # a failed test must not keep the interpreter alive
        )
        waiter.start()
        _subscribed(h, before)
        client.submit(h.keys["boss"], process_id, "approve", {}, now=h.clock.now)
        waiter.join(40)
    assert [p.state for p in found] == ["approved"]


@pytest.mark.parametrize("kind", KINDS)
def test_wait_for_follows_the_live_stream_and_waits_for_a_new_process(
    h: Harness, url: str, kind: str
) -> None:
    process_id = new_id("later")
    before = _hub(h).subscriptions
    found: list[Process] = []
    with connect(kind, url, h.admin) as client:
        waiter = threading.Thread(
            target=lambda: found.append(
                client.wait_for(process_id, ["open", "approved"], timeout=30, poll_interval=60)
            ),
            daemon=True,  # a failed test must not keep the interpreter alive
        )
        waiter.start()
        _subscribed(h, before)
        client.submit(
            h.keys["clerk"], process_id, "create", {"amount": 1}, ERRANDS, now=h.clock.now
        )
        waiter.join(40)
    assert [(p.id, p.state) for p in found] == [(process_id, "open")]


def _without_stream(app: ASGIApp) -> ASGIApp:
    """`app` as an older server without GET /v1/stream."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/stream":
            body = {"error": {"code": "not_found", "message": "Not Found"}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        await app(scope, receive, send)

    return serve


@pytest.mark.parametrize("kind", KINDS)
def test_wait_for_polls_a_server_without_the_stream(h: Harness, kind: str) -> None:
    process_id, _ = h.open_process(amount=5)
    boss: SecretKey = h.keys["boss"]
    with live_server(_without_stream(h.http.app)) as base, connect(kind, base, h.admin) as client:
        found: list[Process] = []
        waiter = threading.Thread(
            target=lambda: found.append(
                client.wait_for(process_id, "approved", timeout=30, poll_interval=0.05)
            ),
            daemon=True,  # a failed test must not keep the interpreter alive
        )
        waiter.start()
        client.submit(boss, process_id, "approve", {}, now=h.clock.now)
        waiter.join(40)
    assert [p.state for p in found] == ["approved"]


@pytest.mark.parametrize("kind", KINDS)
def test_wait_for_gives_up_at_its_timeout_with_the_state_it_saw(
    h: Harness, url: str, kind: str
) -> None:
    process_id, _ = h.open_process()
    with connect(kind, url, h.admin) as client, pytest.raises(WaitTimeout) as caught:
        client.wait_for(process_id, "closed", timeout=0.5)
    assert caught.value.context["state"] == "open"
    assert caught.value.code == "wait_timeout"
