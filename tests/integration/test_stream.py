"""GET /v1/stream against a real server: hints of appended events, work rows and runs
arrive over Server-Sent Events; scopes apply; a reconnect with Last-Event-ID replays."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from charter.api.app import create_app
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, connect
from charter.operator.hub import HintHub
from tests.integration.apikit import Harness, bearer, make_harness, new_id
from tests.integration.liveserver import live_server

TIMERS: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "schedule": [{"id": "nudge", "action": "nudge", "in": "1h", "data": {}}],
        },
        "nudge": {"role": "AUTOMATION", "from": "open", "to": "open"},
    },
}
PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [{"id": "only", "actionId": "http.request", "input": {}}],
}


@dataclass(frozen=True)
class Message:
    id: str | None
    event: str
    data: dict[str, Any]


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy("ops/stream-timers", TIMERS)
    yield harness
    harness.http.close()


@pytest.fixture(scope="module")
def url(h: Harness) -> Iterator[str]:
    with live_server(h.http.app) as base:
        yield base


@contextmanager
def subscribed(
    base: str, token: str, last_event_id: str | None = None
) -> Iterator[Iterator[Message]]:
    """An open stream (subscribed once this yields) as an iterator of its messages."""
    headers = bearer(token)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    timeout = httpx.Timeout(10.0)  # a missing message fails the test instead of hanging it
    with httpx.stream("GET", f"{base}/v1/stream", headers=headers, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield _messages(response.iter_lines())


def _messages(lines: Iterator[str]) -> Iterator[Message]:
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                yield Message(
                    fields.get("id"), fields.get("event", "message"), json.loads(fields["data"])
                )
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def _create(h: Harness, workflow: str = "tests/errands") -> tuple[str, str]:
    clerk = h.keys["clerk"]
    process_id = new_id("s")
    body: JsonObject = {"amount": 1} if workflow == "tests/errands" else {}
    made = h.accept(sign(h.envelope(clerk, process_id, "create", body, workflow=workflow), clerk))
    return process_id, str(made["hash"])


def _number(message: Message) -> int:
    """The counter in a message id `<epoch>-<n>`."""
    assert message.id is not None
    return int(message.id.rpartition("-")[2])


def _next(messages: Iterator[Message], event: str) -> Message:
    return next(m for m in messages if m.event == event)


def test_an_appended_event_arrives_as_a_hint_with_an_id(h: Harness, url: str) -> None:
    with subscribed(url, h.admin) as messages:
        process_id, event_hash = _create(h)
        message = _next(messages, "event")
    assert message.data == {
        "process": process_id,
        "seq": 1,
        "hash": event_hash,
        "action": "create",
        "actor_id": "clerk",
    }
    assert _number(message) > 0


def test_every_subscriber_gets_the_hint_from_one_listener(h: Harness, url: str) -> None:
    with subscribed(url, h.admin) as first, subscribed(url, h.token("processes:read")) as second:
        process_id, _ = _create(h)
        assert _next(first, "event").data["process"] == process_id
        assert _next(second, "event").data["process"] == process_id


def test_a_new_scheduled_action_arrives_as_a_work_hint(h: Harness, url: str) -> None:
    with subscribed(url, h.admin) as messages:
        process_id, _ = _create(h, "ops/stream-timers")
        work = _next(messages, "work")
    assert work.data["process_id"] == process_id
    assert work.data["action_name"] == "nudge"
    assert work.data["kind"] == "scheduled_action"


def test_a_failed_attempt_arrives_as_a_work_hint(h: Harness, url: str) -> None:
    process_id, _ = _create(h, "ops/stream-timers")
    with subscribed(url, h.admin) as messages:
        with connect(h.database.url) as conn:  # as the worker's bookkeeping records it
            conn.execute(
                "UPDATE charter.scheduled_actions SET attempts = attempts + 1,"
                " last_attempt_at = now(), last_attempt_result = 'transient_error',"
                " last_attempt_error = 'timeout' WHERE process_id = %s",
                (process_id,),
            )
        work = _next(messages, "work")
    assert work.data["process_id"] == process_id
    assert work.data["status"] == "active"
    assert work.data["kind"] == "scheduled_action"


def test_run_hints_go_to_their_principal_only(h: Harness, url: str) -> None:
    other = h.token("processes:read", "runs:read", principal="someone-else")
    with subscribed(url, h.admin) as mine, subscribed(url, other) as theirs:
        created = h.http.post(
            "/v1/automations",
            content=json.dumps({"name": "streamed", "target": "box"}),
            headers=bearer(h.admin),
        )
        assert created.status_code == 201, created.text
        automation = created.json()["id"]
        planned = h.http.put(
            f"/v1/automations/{automation}/plan", content=json.dumps(PLAN), headers=bearer(h.admin)
        )
        assert planned.status_code == 200, planned.text
        run = h.http.post(f"/v1/automations/{automation}/runs", headers=bearer(h.admin))
        assert run.status_code == 201, run.text
        hint = _next(mine, "run")
        assert hint.data == {
            "id": run.json()["id"],
            "automation_id": automation,
            "status": "pending",
        }
        process_id, _ = _create(h)  # the next thing the other principal sees is this event
        seen = next(m for m in theirs if m.event in ("run", "event"))
        assert (seen.event, seen.data["process"]) == ("event", process_id)


def test_reconnecting_with_last_event_id_replays_what_was_missed(h: Harness, url: str) -> None:
    with subscribed(url, h.admin) as messages:
        _create(h)
        last = _next(messages, "event").id
    assert last is not None
    missed = [_create(h)[0] for _ in range(2)]
    with subscribed(url, h.admin, last_event_id=last) as messages:
        replayed = [_next(messages, "event") for _ in range(2)]
    assert [m.data["process"] for m in replayed] == missed
    assert [_number(m) for m in replayed] == sorted(_number(m) for m in replayed)
    assert _number(replayed[0]) > int(last.rpartition("-")[2])


def test_an_id_from_before_the_buffer_gets_a_reset(h: Harness) -> None:
    app = create_app(h.database, engine=h.engine)
    app.state.hints = HintHub(h.database.url, buffer=1)
    with live_server(app) as base:
        with subscribed(base, h.admin) as messages:
            _create(h)
            _create(h)
            first, second = _next(messages, "event"), _next(messages, "event")
        assert _number(second) == _number(first) + 1
        epoch = str(first.id).rpartition("-")[0]
        too_old = f"{epoch}-{_number(first) - 1}"
        with subscribed(base, h.admin, last_event_id=too_old) as messages:
            reset = next(messages)
        assert reset.event == "reset"
        assert reset.id == second.id
        with subscribed(base, h.admin, last_event_id="other-5") as messages:
            assert next(messages).event == "reset"


def test_the_stream_needs_a_token_with_processes_read(h: Harness, url: str) -> None:
    assert httpx.get(f"{url}/v1/stream", timeout=10).status_code == 401
    refused = httpx.get(f"{url}/v1/stream", headers=bearer(h.token("runs:read")), timeout=10)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_keep_alive_comments_flow_while_idle(h: Harness) -> None:
    app = create_app(h.database, engine=h.engine)
    hub = HintHub(h.database.url)
    hub.keepalive_seconds = 0.05
    app.state.hints = hub
    with live_server(app) as base:
        headers = bearer(h.admin)
        with httpx.stream("GET", f"{base}/v1/stream", headers=headers, timeout=10) as response:
            lines = response.iter_lines()
            assert next(lines) == ": connected"
            assert next(line for line in lines if line) == ": keep-alive"
