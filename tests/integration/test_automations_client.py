"""The typed automations client: its defaults (15 s timeout, CHARTER_API_URL and
CHARTER_TOKEN), typed results for every call, errors rebuilt as their CharterError
subclasses, and a clear typed error when the API stalls or cannot be reached."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from charter.core.errors import Forbidden, Malformed, NotFound, Unauthorized
from charter.core.errors.automations import (
    AutomationPaused,
    InvalidAutomation,
    InvalidPlan,
    InvalidSchedule,
    InvalidWebhook,
    NoPlan,
)
from charter.db.database import Database, connect
from charter.sdk import (
    ApiTimeout,
    ApiUnavailable,
    Automation,
    AutomationDetail,
    Client,
    Plan,
    PlanStep,
    Run,
    RunDetail,
    Schedule,
    Webhook,
)
from tests.integration.apikit import Harness, make_harness

PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [
        {
            "id": "fetch",
            "actionId": "http.request",
            "input": {"url": "https://example.com"},
            "retry": {"on": ["http_429", "http_5xx"]},
        },
        {"id": "file", "actionId": "charter.submit", "input": {}},
    ],
    "limits": {"stepTimeoutSeconds": 2},
}

OWNER_SCOPES = ("automations:read", "automations:write", "runs:read", "runs:execute")


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


def client_for(h: Harness, token: str) -> Client:
    return Client(str(h.http.base_url), token, http=h.http)


@pytest.fixture
def api(h: Harness) -> Client:
    # Not `*`: an admin token sees every principal's automations.
    return client_for(h, h.token(*OWNER_SCOPES, principal=f"c-{uuid.uuid4().hex[:8]}"))


# --- defaults ---------------------------------------------------------------------------


def test_the_default_request_timeout_is_15_seconds() -> None:
    # A deadline for the whole call (tests/unit/test_deadline.py drips at it).
    with Client("http://127.0.0.1:9", "ch_x") as api:
        assert api.timeout == 15.0
    with Client("http://127.0.0.1:9", "ch_x", timeout=2.5) as api:
        assert api.timeout == 2.5
    with pytest.raises(ValueError, match="positive"):
        Client("http://127.0.0.1:9", "ch_x", timeout=0)


def test_url_and_token_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARTER_API_URL", "http://api.example:8420/")
    monkeypatch.setenv("CHARTER_TOKEN", "ch_from_env")
    with Client() as api:
        assert api.base_url == "http://api.example:8420"
        assert api.token == "ch_from_env"
    with Client("http://other:1", "ch_given") as api:
        assert (api.base_url, api.token) == ("http://other:1", "ch_given")


@pytest.fixture
def stalling_server() -> Iterator[str]:
    """A local socket that accepts connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)  # read nothing, write nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    host, port = listener.getsockname()
    try:
        yield f"http://{host}:{port}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def test_a_server_that_never_answers_raises_a_timeout_error(stalling_server: str) -> None:
    with Client(stalling_server, "ch_x", timeout=0.3) as api:
        started = time.monotonic()
        with pytest.raises(ApiTimeout) as caught:
            api.automations()
        elapsed = time.monotonic() - started
    assert isinstance(caught.value, ApiUnavailable)
    assert caught.value.code == "api_timeout"
    assert "did not answer GET /v1/automations within 0.3 s" in caught.value.message
    assert elapsed < 10  # bounded by the timeout, not by the server


def test_an_unreachable_api_is_api_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more: the connection is refused.
    api = Client(f"http://127.0.0.1:{port}", "ch_x", timeout=2)
    with api, pytest.raises(ApiUnavailable) as caught:
        api.runs()
    assert not isinstance(caught.value, ApiTimeout)
    assert "cannot reach" in caught.value.message


# --- typed calls ------------------------------------------------------------------------


def test_automations_round_trip_as_typed_values(api: Client) -> None:
    created = api.create_automation("nightly", "laptop")
    assert isinstance(created, Automation)
    assert (created.name, created.target, created.enabled) == ("nightly", "laptop", True)
    assert isinstance(created.created_at, datetime)
    assert created.created_at.tzinfo is not None
    assert created.raw["id"] == created.id

    updated = api.update_automation(created.id, name="weekly")
    assert (updated.name, updated.target) == ("weekly", "laptop")
    assert api.pause_automation(created.id).enabled is False
    assert api.resume_automation(created.id).enabled is True

    detail = api.automation(created.id)
    assert isinstance(detail, AutomationDetail)
    assert detail.automation.name == "weekly"
    assert (detail.schedules, detail.webhooks, detail.plan) == ((), (), None)

    api.delete_automation(created.id)
    with pytest.raises(NotFound):
        api.automation(created.id)


def test_pages_and_iteration(api: Client) -> None:
    made = [api.create_automation(f"a{i}", "t").id for i in range(5)]
    first = api.automations(limit=2)
    assert len(first.items) == 2
    assert first.next_cursor is not None
    second = api.automations(limit=2, cursor=first.next_cursor)
    assert {a.id for a in first.items}.isdisjoint({a.id for a in second.items})
    every = [a.id for a in api.iter_automations(page_size=2)]
    assert len(every) == len(set(every)) == 5
    assert set(every) == set(made)


def test_schedules(api: Client) -> None:
    automation = api.create_automation("s", "t")
    schedule = api.add_schedule(automation.id, "0 9 * * *", "Europe/Berlin", max_occurrences=3)
    assert isinstance(schedule, Schedule)
    assert schedule.remaining_occurrences == 3
    assert schedule.next_run_at.isoformat() == "2026-06-19T07:00:00+00:00"

    kept = api.update_schedule(automation.id, schedule.id, enabled=False)
    assert (kept.enabled, kept.remaining_occurrences) == (False, 3)
    unbounded = api.update_schedule(automation.id, schedule.id, max_occurrences=None)
    assert unbounded.remaining_occurrences is None
    assert (
        api.update_schedule(automation.id, schedule.id, cron="0 10 * * *").remaining_occurrences
        is None
    )
    assert (
        api.update_schedule(automation.id, schedule.id, max_occurrences=7).remaining_occurrences
        == 7
    )
    assert [s.id for s in api.schedules(automation.id)] == [schedule.id]
    assert api.automation(automation.id).schedules[0].cron == "0 10 * * *"

    with pytest.raises(InvalidSchedule) as caught:
        api.add_schedule(automation.id, "every day", "UTC")
    assert caught.value.context["field"] == "cron"
    with pytest.raises(InvalidSchedule):
        api.add_schedule(automation.id, "0 9 * * *", "Nowhere/Special")

    api.remove_schedule(automation.id, schedule.id)
    assert api.schedules(automation.id) == []


def test_webhooks_show_the_secret_only_on_creation(api: Client, h: Harness) -> None:
    automation = api.create_automation("w", "t")
    webhook = api.add_webhook(automation.id, "github", event="push")
    assert isinstance(webhook, Webhook)
    assert webhook.secret is not None
    assert webhook.secret.startswith("whsec_")
    assert webhook.has_secret is True

    listed = api.webhooks(automation.id)
    assert [(w.id, w.secret, w.has_secret) for w in listed] == [(webhook.id, None, True)]
    assert api.automation(automation.id).webhooks[0].secret is None

    rotated, secret = api.rotate_secret(automation.id, webhook.id)
    assert rotated.secret is None
    assert secret != webhook.secret
    assert secret.startswith("whsec_")
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT secret FROM charter.webhook_triggers WHERE id = %s", (webhook.id,)
        ).fetchone()
    assert row is not None
    assert row[0] == secret

    every = api.update_webhook(automation.id, webhook.id, event=None)
    assert every.event is None
    with pytest.raises(InvalidWebhook):
        api.add_webhook(automation.id, "github", secret="whsec_nope")
    api.remove_webhook(automation.id, webhook.id)
    assert api.webhooks(automation.id) == []


def test_plans_and_runs(api: Client) -> None:
    automation = api.create_automation("p", "machine-1")
    with pytest.raises(NoPlan):
        api.trigger(automation.id)
    plan = api.set_plan(automation.id, PLAN)
    assert isinstance(plan, Plan)
    assert plan.steps == (
        PlanStep(
            "fetch",
            "http.request",
            {"url": "https://example.com"},
            {"on": ["http_429", "http_5xx"]},
        ),
        PlanStep("file", "charter.submit", {}),
    )
    assert plan.limits == {"stepTimeoutSeconds": 2}
    assert plan.allowlist is None
    assert api.plan(automation.id) == plan

    run = api.trigger(automation.id, {"reason": "manual"})
    assert isinstance(run, Run)
    assert (run.status, run.trigger_kind, run.target) == ("pending", "manual", "machine-1")
    assert run.input == {"reason": "manual"}
    assert run.plan["steps"] == PLAN["steps"]  # `retry` included, as given
    assert run.started_at is None

    api.set_plan(automation.id, {"version": 1, "steps": [PLAN["steps"][1]]})
    detail = api.run(run.id)
    assert isinstance(detail, RunDetail)
    assert detail.run.plan == run.plan  # the snapshot, not the new plan
    assert detail.steps == ()

    api.pause_automation(automation.id)
    with pytest.raises(AutomationPaused):
        api.trigger(automation.id)
    api.resume_automation(automation.id)
    second = api.trigger(automation.id)
    assert second.input == {}

    page = api.runs(automation_id=automation.id, status="pending")
    assert {r.id for r in page.items} == {run.id, second.id}
    assert page.next_cursor is None
    assert {r.id for r in api.iter_runs(page_size=1)} == {run.id, second.id}
    assert api.runs(status="completed").items == ()

    api.clear_plan(automation.id)
    with pytest.raises(NotFound):
        api.plan(automation.id)


def test_errors_are_their_charter_error_subclasses(h: Harness, api: Client) -> None:
    automation = api.create_automation("e", "t")
    with pytest.raises(InvalidPlan) as caught:
        api.set_plan(automation.id, {"version": 2, "steps": []})
    assert caught.value.context["problems"] == [
        "/version: must be 1",
        "/steps: must be a non-empty list",
    ]
    bad_retry = {**PLAN["steps"][0], "retry": {"on": ["http_5xx", "http_404"], "max": 3}}
    with pytest.raises(InvalidPlan) as caught:
        api.set_plan(automation.id, {"version": 1, "steps": [bad_retry]})
    assert caught.value.context["problems"] == [
        "/steps/0/retry: unknown keys ['max']",
        "/steps/0/retry/on/1: unknown condition 'http_404' (known: http_5xx, http_429)",
    ]
    with pytest.raises(InvalidAutomation):
        api.create_automation("", "t")
    with pytest.raises(Malformed):
        api.runs(status="sent")

    stranger = client_for(h, h.token(*OWNER_SCOPES, principal="stranger"))
    with pytest.raises(NotFound):
        stranger.automation(automation.id)
    with pytest.raises(NotFound):
        stranger.pause_automation(automation.id)

    with pytest.raises(Forbidden) as forbidden:
        client_for(h, h.token("runs:read")).create_automation("x", "t")
    assert forbidden.value.context["scope"] == "automations:write"
    with pytest.raises(Unauthorized):
        client_for(h, "ch_not_a_token").automations()
