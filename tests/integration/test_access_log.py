"""The server as `charter serve` builds it, logging as the command configures it: one
access line per request (route template, status, duration, request id; never the token
or the query string), the request id and process on the engine's lines, and each 5xx's
traceback logged once."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
import pytest
from fastapi import FastAPI

from charter.auth.tokens import create_token
from charter.cli.api_server import api_server
from charter.core.config import Settings
from charter.db.database import Database, Role
from charter.engine.process_event import Engine
from charter.logs import QUIET_LIBRARIES, configure_logging
from tests.integration.liveserver import free_port

TOKEN_SECRET_PART = "never-in-logs"


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    out = io.StringIO()
    configure_logging("info", "json", out)
    yield out
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.NOTSET)
    logging.getLogger("uvicorn.access").disabled = False


@dataclass
class Served:
    url: str
    stop: Callable[[], None]  # returns once every request's lines are written


@pytest.fixture
def served(database: Database, log_stream: io.StringIO) -> Iterator[Served]:
    port = free_port()
    server = api_server(database, Engine(database), Settings(), "127.0.0.1", port)

    def boom() -> NoReturn:
        raise RuntimeError("an unexpected failure")

    app = server.config.app
    assert isinstance(app, FastAPI)
    app.add_api_route("/boom", boom, response_model=None)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        assert time.monotonic() < deadline, "the server did not start in time"
        time.sleep(0.02)

    def stop() -> None:
        # Lines written after a response was sent (the access line, the server's own
        # report of an exception) are all out once the server has shut down.
        server.should_exit = True
        thread.join(30)

    try:
        yield Served(f"http://127.0.0.1:{port}", stop)
    finally:
        stop()


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _access(stream: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in _lines(stream) if line["logger"] == "charter.access"]


def test_one_access_line_per_request_without_token_or_query(
    database: Database, served: Served, log_stream: io.StringIO
) -> None:
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        token = create_token(conn, scopes=["processes:read"], name="ops")
    headers = {"Authorization": f"Bearer {token}", "X-Request-Id": "req-42"}
    response = httpx.get(
        f"{served.url}/v1/processes/nope?secret={TOKEN_SECRET_PART}", headers=headers
    )
    assert response.status_code == 404
    health = httpx.get(f"{served.url}/healthz")
    served.stop()
    first, second = _access(log_stream)
    assert first["message"] == f"GET /v1/processes/{{process_id}} 404 {first['duration_ms']:.1f} ms"
    assert first["route"] == "/v1/processes/{process_id}"
    assert (first["method"], first["status"], first["request_id"]) == ("GET", 404, "req-42")
    assert first["duration_ms"] > 0
    assert (second["route"], second["status"]) == ("/healthz", 200)
    assert second["request_id"] == health.headers["x-request-id"]  # generated when not given
    text = log_stream.getvalue()
    assert token not in text
    assert TOKEN_SECRET_PART not in text


def test_an_unexpected_error_is_logged_once_with_its_traceback_and_request_id(
    served: Served, log_stream: io.StringIO
) -> None:
    response = httpx.get(f"{served.url}/boom", headers={"X-Request-Id": "req-boom"})
    assert response.status_code == 500
    served.stop()
    errors = [line for line in _lines(log_stream) if line["level"] == "ERROR"]
    assert len(errors) == 1, errors
    (error,) = errors
    assert error["request_id"] == "req-boom"
    assert "RuntimeError: an unexpected failure" in error["exc_info"]
    assert log_stream.getvalue().count("Traceback") == 1
    (access,) = _access(log_stream)
    assert (access["route"], access["status"]) == ("/boom", 500)
