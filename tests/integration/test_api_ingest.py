"""`POST /v1/events` on its lean path (`charter.api.ingest`): answered before routing, on a
thread pool no larger than the connection pool, with the same bytes, metrics and errors as
the FastAPI route it stands in for."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from charter.api import routes_events
from charter.api.app import create_app
from charter.api.errors import install_error_handlers
from charter.api.state import Services
from charter.automations.wakeups import RunWakeups
from charter.core.clock import SystemClock
from charter.core.config import Settings
from charter.core.envelope import Submission, sign
from charter.db.database import Database
from charter.engine.process_event import Accepted, Engine
from charter.engine.reads import Reads
from tests.integration.apikit import Harness, dumps, make_harness, new_id
from tests.integration.liveserver import live_server


@pytest.fixture(scope="module")
def h(database: Database) -> Harness:
    return make_harness(database)


def _create(h: Harness) -> Submission:
    clerk = h.keys["clerk"]
    return sign(h.envelope(clerk, new_id(), "create", {"amount": 3}), clerk)


def _sample(text: str, series: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(series + " ")]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_the_answer_is_the_json_the_route_would_render(h: Harness) -> None:
    response = h.post(_create(h))
    assert response.status_code == 201, response.text
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    assert response.headers["x-request-id"]
    assert response.content == JSONResponse(response.json()).body
    assert set(response.json()) == {"hash", "seq", "process"}


def test_the_fastapi_route_answers_alike(h: Harness, database: Database) -> None:
    # The route stays for /openapi.json and for an app without the lean path.
    app = FastAPI()
    app.state.charter = Services(
        database, h.engine, Reads(database), Settings(), RunWakeups(database.url)
    )
    install_error_handlers(app)
    app.include_router(routes_events.router)
    with TestClient(app) as plain:
        routed = plain.post("/v1/events", content=dumps(_create(h).to_json()))
        refused = plain.post("/v1/events", content=b"{")
    lean = h.post(_create(h))
    assert routed.status_code == lean.status_code == 201
    assert routed.headers["content-type"] == lean.headers["content-type"]
    assert set(routed.json()) == set(lean.json())
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == h.post(b"{").json()["error"]["code"]


@pytest.mark.parametrize(("body", "status"), [(None, "201"), (b"{", "400")])
def test_requests_are_counted_under_the_route_template(
    h: Harness, body: bytes | None, status: str
) -> None:
    series = f'charter_http_requests_total{{method="POST",route="/v1/events",status="{status}"}}'
    before = _sample(h.http.get("/metrics").text, series)
    response = h.post(_create(h) if body is None else body)
    assert str(response.status_code) == status
    assert _sample(h.http.get("/metrics").text, series) == before + 1


def test_a_malformed_body_is_recorded_as_a_rejection(h: Harness) -> None:
    with h.only_logged("malformed"):
        response = h.post(b'{"envelope": 1}')
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed"


class ThreadRecordingEngine(Engine):
    """The real engine, noting which thread ran each submission."""

    threads: set[str]

    def process_event(self, submission: Submission) -> Accepted:
        self.threads.add(threading.current_thread().name)
        return super().process_event(submission)


@pytest.fixture
def small_pool(database_url: str) -> Iterator[Database]:
    with Database(database_url, max_size=2) as small:
        yield small


def test_submissions_run_on_a_pool_no_larger_than_the_connection_pool(
    h: Harness, small_pool: Database
) -> None:
    engine = ThreadRecordingEngine(small_pool, clock=SystemClock())
    engine.threads = set()
    app = create_app(small_pool, engine=engine, settings=Settings())
    submissions = [
        sign(
            h.envelope(h.keys["clerk"], new_id(), "create", {"amount": 1}, at=SystemClock().now()),
            h.keys["clerk"],
        )
        for _ in range(8)
    ]
    with live_server(app) as base, ThreadPoolExecutor(8) as clients:

        def post(submission: Submission) -> int:
            with httpx.Client(base_url=base, timeout=30) as client:
                return client.post("/v1/events", content=dumps(submission.to_json())).status_code

        statuses = list(clients.map(post, submissions))
    assert statuses == [201] * 8
    assert engine.threads
    assert all(name.startswith("charter-events") for name in engine.threads), engine.threads
    assert len(engine.threads) <= small_pool.max_size
