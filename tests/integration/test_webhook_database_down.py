"""`POST /events` when the database is not there: 503 `database_unavailable` with a
`Retry-After`, as `POST /v1/events` answers, never a 500, and admitting again once the
database is back.

Against a PostgreSQL of this module's own (an embedded server in a short /tmp path),
whose backends are terminated and which is stopped: the shared test server is never
touched.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from charter.automations.webhooks import sign
from charter.core.clock import FakeClock
from charter.core.envelope import sign as sign_event
from charter.db.database import Database, connect
from charter.db.embedded import EmbeddedServer
from charter.db.migrate import migrate
from tests.integration.apikit import Harness, make_harness, new_id
from tests.integration.triggerkit import automation, new_principal, new_secret, webhook

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)
BODY = b'{"type": "order.paid", "source": "shop"}'
_IDS = itertools.count()


@dataclass
class Stack:
    server: EmbeddedServer
    pgdata: Path
    url: str
    h: Harness
    principal: str
    secret: str

    def deliver(self) -> httpx.Response:
        message_id = f"msg_{next(_IDS)}"
        stamp = int(NOW.timestamp())
        headers = {
            "X-Charter-Principal": self.principal,
            "X-Charter-Target": "machine-1",
            "Content-Type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(self.secret, message_id, stamp, BODY),
        }
        response: httpx.Response = self.h.http.post("/events", content=BODY, headers=headers)
        return response

    def submit(self) -> httpx.Response:
        clerk = self.h.keys["clerk"]
        envelope = self.h.envelope(clerk, new_id("down"), "create", {"amount": 1})
        return self.h.post(sign_event(envelope, clerk))

    def terminate_backends(self) -> int:
        """Terminate every other backend of this server's Charter database (ours alone)."""
        with connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return len(rows)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # The server's Unix socket lives in its data directory: keep the path short.
    short = Path("/tmp") / f"chwd-{os.getpid()}-{secrets.token_hex(3)}"
    pgdata = short / "pgdata"
    server = EmbeddedServer(pgdata)
    try:
        url = server.url
        with connect(url) as conn:
            migrate(conn)
            principal, secret = new_principal(), new_secret()
            webhook(conn, automation(conn, principal), source="shop", secret=secret)
            conn.commit()
        with Database(url, max_size=2) as database:
            h = make_harness(database, clock=FakeClock(NOW))
            stack = Stack(server, pgdata, url, h, principal, secret)
            try:
                yield stack
            finally:
                h.http.close()
                server = stack.server
    finally:
        server.close()
        shutil.rmtree(short, ignore_errors=True)


def _unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "database_unavailable"
    assert int(response.headers["retry-after"]) >= 1
    assert "Automations service failed" not in response.text


def _recovers(send: Callable[[], httpx.Response], status: int) -> None:
    """A later request succeeds; until then each answer is the 503 (the pool drops one
    broken connection per request)."""
    for _ in range(5):
        response = send()
        if response.status_code == status:
            return
        _unavailable(response)
    raise AssertionError("nothing succeeded after the database came back")


def test_terminated_backends_are_503_with_retry_after_then_admission_recovers(
    stack: Stack,
) -> None:
    assert stack.deliver().status_code == 202  # the pool holds a live connection now
    assert stack.terminate_backends() >= 1
    _unavailable(stack.deliver())
    _recovers(stack.deliver, 202)


def test_signed_events_answer_the_same_503_when_backends_are_terminated(stack: Stack) -> None:
    assert stack.submit().status_code == 201
    assert stack.terminate_backends() >= 1
    _unavailable(stack.submit())
    _recovers(stack.submit, 201)


def test_a_stopped_database_is_503_with_retry_after_then_admission_recovers(
    stack: Stack,
) -> None:
    assert stack.deliver().status_code == 202
    stack.server.close()  # `pg_ctl stop` (fast): every connection is cut
    _unavailable(stack.deliver())
    stack.server = EmbeddedServer(stack.pgdata)
    assert stack.server.url == stack.url
    _recovers(stack.deliver, 202)
