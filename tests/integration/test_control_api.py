"""The automations control API: every endpoint, scopes, principal isolation, cursor
pagination, schedule budgets, write-only webhook secrets, plan validation, manual runs
with an immutable plan snapshot (docs/machines.md, rule 1), and the run ledger."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from charter.auth.tokens import find_token
from charter.automations.webhooks import sign
from charter.db.database import Database, connect
from tests.integration.apikit import NOW, Harness, bearer, dumps, make_harness

PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [
        {"id": "fetch", "actionId": "http.request", "input": {"url": "https://example.com"}},
        {"id": "file", "actionId": "charter.submit", "input": {"action": "note"}},
    ],
    "allowlist": ["http.request", "charter.submit"],
    "limits": {"stepTimeoutSeconds": 5},
}
OTHER_PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [{"id": "only", "actionId": "http.request", "input": {}}],
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


class Api:
    """Calls as one principal with one token."""

    def __init__(self, h: Harness, token: str) -> None:
        self.h = h
        self.headers = bearer(token)

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        content = dumps(body) if body is not None else None
        response: httpx.Response = self.h.http.request(
            method, path, content=content, headers=self.headers, **kwargs
        )
        return response

    def ok(self, method: str, path: str, body: Any = None, status: int = 200, **kw: Any) -> Any:
        response = self.call(method, path, body, **kw)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    def automation(self, name: str = "nightly", target: str = "laptop") -> dict[str, Any]:
        created: dict[str, Any] = self.ok(
            "POST", "/v1/automations", {"name": name, "target": target}, 201
        )
        return created

    def with_plan(self, plan: dict[str, Any] | None = None) -> str:
        automation_id = str(self.automation()["id"])
        self.ok("PUT", f"/v1/automations/{automation_id}/plan", plan or PLAN)
        return automation_id


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is an error of this status and code, in the one error shape."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    detail: dict[str, Any] = body["error"]
    return detail


@pytest.fixture
def api(h: Harness) -> Api:
    """A fresh principal with every automation scope (not `*`, which sees everyone's)."""
    return Api(h, h.token(*AUTOMATION_SCOPES, principal=f"user-{uuid.uuid4().hex[:8]}"))


# --- automations ------------------------------------------------------------------------


def test_create_show_update_and_delete_an_automation(api: Api) -> None:
    created = api.automation("nightly report", "laptop-1")
    assert created["name"] == "nightly report"
    assert created["target"] == "laptop-1"
    assert created["enabled"] is True
    assert set(created) == {
        "id", "principal", "name", "target", "enabled", "created_at", "updated_at"
    }  # fmt: skip
    assert created["principal"].startswith("user-")
    path = f"/v1/automations/{created['id']}"

    shown = api.ok("GET", path)
    assert shown["name"] == "nightly report"
    assert shown["schedules"] == []
    assert shown["webhooks"] == []
    assert shown["plan"] is None

    renamed = api.ok("PATCH", path, {"name": "weekly report"})
    assert renamed["name"] == "weekly report"
    assert renamed["target"] == "laptop-1"  # absent: unchanged
    moved = api.ok("PATCH", path, {"target": "server.2", "enabled": False})
    assert (moved["name"], moved["target"], moved["enabled"]) == (
        "weekly report",
        "server.2",
        False,
    )

    assert api.call("DELETE", path).status_code == 204
    error(api.call("GET", path), 404, "not_found")
    error(api.call("DELETE", path), 404, "not_found")


def test_create_paused(api: Api) -> None:
    created = api.ok("POST", "/v1/automations", {"name": "n", "target": "t", "enabled": False}, 201)
    assert created["enabled"] is False


def test_pause_and_resume(api: Api) -> None:
    path = f"/v1/automations/{api.automation()['id']}"
    assert api.ok("POST", f"{path}/pause")["enabled"] is False
    assert api.ok("GET", path)["enabled"] is False
    assert api.ok("POST", f"{path}/resume")["enabled"] is True
    assert api.ok("GET", path)["enabled"] is True


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"name": "n"}, 400, "malformed"),
        ({"name": "n", "target": "t", "owner": "x"}, 400, "malformed"),
        ([1, 2], 400, "malformed"),
        ({"name": "", "target": "t"}, 422, "invalid_automation"),
        ({"name": "   ", "target": "t"}, 422, "invalid_automation"),
        ({"name": "x" * 201, "target": "t"}, 422, "invalid_automation"),
        ({"name": 7, "target": "t"}, 422, "invalid_automation"),
        ({"name": "n", "target": "has space"}, 422, "invalid_automation"),
        ({"name": "n", "target": "-leading"}, 422, "invalid_automation"),
        ({"name": "n", "target": "t", "enabled": "yes"}, 422, "invalid_automation"),
    ],
)
def test_create_rejects_bad_bodies(api: Api, body: Any, status: int, code: str) -> None:
    detail = error(api.call("POST", "/v1/automations", body), status, code)
    if status == 422:
        assert detail["field"] in {"name", "target", "enabled"}


def test_bodies_are_strict_json(api: Api) -> None:
    headers = api.headers
    for raw in (b"", b"{", b'{"name": "a", "name": "b", "target": "t"}', b"\xff"):
        response = api.h.http.post("/v1/automations", content=raw, headers=headers)
        error(response, 400, "malformed")


def test_update_rejects_unknown_keys_and_bad_values(api: Api) -> None:
    path = f"/v1/automations/{api.automation()['id']}"
    error(api.call("PATCH", path, {"principal": "someone-else"}), 400, "malformed")
    error(api.call("PATCH", path, {"enabled": 1}), 422, "invalid_automation")
    error(api.call("PATCH", path, {"target": ""}), 422, "invalid_automation")
    assert api.ok("PATCH", path, {})["name"] == "nightly"


def test_unknown_and_non_uuid_ids_are_404(api: Api) -> None:
    for path in (f"/v1/automations/{uuid.uuid4()}", "/v1/automations/not-a-uuid"):
        error(api.call("GET", path), 404, "not_found")
        error(api.call("PATCH", path, {"name": "x"}), 404, "not_found")
        error(api.call("POST", f"{path}/pause"), 404, "not_found")
        error(api.call("PUT", f"{path}/plan", PLAN), 404, "not_found")
        error(
            api.call("POST", f"{path}/schedules", {"cron": "0 9 * * *", "timezone": "UTC"}),
            404,
            "not_found",
        )
        error(api.call("POST", f"{path}/webhooks", {"source": "github"}), 404, "not_found")
    error(api.call("GET", f"/v1/runs/{uuid.uuid4()}"), 404, "not_found")
    error(api.call("GET", "/v1/runs/nope"), 404, "not_found")


# --- pagination -------------------------------------------------------------------------


def test_automations_paginate_without_duplicates_or_gaps(api: Api) -> None:
    made = [str(api.automation(f"a{i}")["id"]) for i in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = api.ok("GET", "/v1/automations", params=params)
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= 3
        seen += [item["id"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert len(seen) == len(set(seen)) == 7
    assert set(seen) == set(made)
    # One page as big as everything gives the same order.
    whole = api.ok("GET", "/v1/automations", params={"limit": 500})
    assert [i["id"] for i in whole["items"]] == seen
    assert whole["next_cursor"] is None


def test_pagination_rejects_bad_cursors_and_limits(api: Api) -> None:
    error(api.call("GET", "/v1/automations", params={"cursor": "garbage!"}), 400, "malformed")
    for limit in ("0", "501", "x"):
        error(api.call("GET", "/v1/automations", params={"limit": limit}), 400, "malformed")
        error(api.call("GET", "/v1/runs", params={"limit": limit}), 400, "malformed")


# --- schedule triggers ------------------------------------------------------------------


def _remaining_in_db(h: Harness, trigger_id: str) -> Any:
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT remaining_occurrences FROM charter.schedule_triggers WHERE id = %s",
            (trigger_id,),
        ).fetchone()
    assert row is not None
    return row[0]


def test_a_schedule_counts_from_now_with_an_optional_budget(api: Api) -> None:
    path = f"/v1/automations/{api.automation()['id']}/schedules"
    bounded = api.ok(
        "POST", path, {"cron": "0 9 * * *", "timezone": "Europe/Berlin", "maxOccurrences": 3}, 201
    )
    # The app's clock reads 2026-06-18 10:00 UTC (12:00 in Berlin): 09:00 tomorrow, summer time.
    assert NOW.isoformat().startswith("2026-06-18T10:00")
    assert bounded["next_run_at"] == "2026-06-19T07:00:00.000Z"
    assert bounded["remaining_occurrences"] == 3
    assert bounded["enabled"] is True
    unbounded = api.ok("POST", path, {"cron": "30 6 * * *", "timezone": "UTC"}, 201)
    assert unbounded["remaining_occurrences"] is None
    assert unbounded["next_run_at"] == "2026-06-19T06:30:00.000Z"
    listed = api.ok("GET", path)["items"]
    # Oldest first; both were made at the same instant of the fake clock.
    assert sorted(s["id"] for s in listed) == sorted([bounded["id"], unbounded["id"]])


def test_max_occurrences_null_makes_unbounded_and_absent_leaves_it(api: Api) -> None:
    h = api.h
    path = f"/v1/automations/{api.automation()['id']}/schedules"
    trigger = api.ok(
        "POST", path, {"cron": "0 9 * * *", "timezone": "UTC", "maxOccurrences": 4}, 201
    )
    one = f"{path}/{trigger['id']}"

    # Absent: unchanged, whatever else changes.
    disabled = api.ok("PATCH", one, {"enabled": False})
    assert disabled["remaining_occurrences"] == 4
    assert disabled["enabled"] is False
    recron = api.ok("PATCH", one, {"cron": "15 8 * * *"})
    assert recron["remaining_occurrences"] == 4
    assert _remaining_in_db(h, trigger["id"]) == 4

    # A number: a new finite budget.
    assert api.ok("PATCH", one, {"maxOccurrences": 10})["remaining_occurrences"] == 10

    # null: unbounded, in the response and in the table.
    unbounded = api.ok("PATCH", one, {"maxOccurrences": None})
    assert unbounded["remaining_occurrences"] is None
    assert _remaining_in_db(h, trigger["id"]) is None
    # ... and stays unbounded when the key is absent again.
    assert api.ok("PATCH", one, {"timezone": "Asia/Tokyo"})["remaining_occurrences"] is None
    assert _remaining_in_db(h, trigger["id"]) is None


def test_schedule_changes_recompute_the_next_run_only_when_they_should(api: Api) -> None:
    path = f"/v1/automations/{api.automation()['id']}/schedules"
    trigger = api.ok("POST", path, {"cron": "0 9 * * *", "timezone": "UTC"}, 201)
    one = f"{path}/{trigger['id']}"
    assert trigger["next_run_at"] == "2026-06-19T09:00:00.000Z"
    assert api.ok("PATCH", one, {"cron": "0 11 * * *"})["next_run_at"] == "2026-06-18T11:00:00.000Z"
    moved = api.ok("PATCH", one, {"timezone": "America/New_York"})
    assert moved["next_run_at"] == "2026-06-18T15:00:00.000Z"  # 11:00 EDT
    assert moved["cron"] == "0 11 * * *"
    assert api.ok("PATCH", one, {"maxOccurrences": 2})["next_run_at"] == "2026-06-18T15:00:00.000Z"


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"cron": "0 9 * *", "timezone": "UTC"}, 422, "invalid_schedule", "cron"),
        ({"cron": "61 9 * * *", "timezone": "UTC"}, 422, "invalid_schedule", "cron"),
        ({"cron": 9, "timezone": "UTC"}, 422, "invalid_schedule", "cron"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, 422, "invalid_schedule", "timezone"),
        ({"cron": "0 9 * * *", "timezone": ""}, 422, "invalid_schedule", "timezone"),
        (
            {"cron": "0 9 * * *", "timezone": "UTC", "maxOccurrences": 0},
            422,
            "invalid_schedule",
            "maxOccurrences",
        ),
        (
            {"cron": "0 9 * * *", "timezone": "UTC", "maxOccurrences": -1},
            422,
            "invalid_schedule",
            "maxOccurrences",
        ),
        (
            {"cron": "0 9 * * *", "timezone": "UTC", "maxOccurrences": "3"},
            422,
            "invalid_schedule",
            "maxOccurrences",
        ),
        (
            {"cron": "0 9 * * *", "timezone": "UTC", "maxOccurrences": True},
            422,
            "invalid_schedule",
            "maxOccurrences",
        ),
        (
            {"cron": "0 9 * * *", "timezone": "UTC", "maxOccurrences": 2.5},
            422,
            "invalid_schedule",
            "maxOccurrences",
        ),
        ({"cron": "0 9 * * *"}, 400, "malformed", None),
        ({"cron": "0 9 * * *", "timezone": "UTC", "max_occurrences": 3}, 400, "malformed", None),
    ],
)
def test_schedule_validation(
    api: Api, body: dict[str, Any], status: int, code: str, field: str | None
) -> None:
    path = f"/v1/automations/{api.automation()['id']}/schedules"
    detail = error(api.call("POST", path, body), status, code)
    if field:
        assert detail["field"] == field
    assert api.ok("GET", path)["items"] == []


def test_schedule_update_validation_and_removal(api: Api) -> None:
    path = f"/v1/automations/{api.automation()['id']}/schedules"
    trigger = api.ok("POST", path, {"cron": "0 9 * * *", "timezone": "UTC"}, 201)
    one = f"{path}/{trigger['id']}"
    error(api.call("PATCH", one, {"cron": "bad"}), 422, "invalid_schedule")
    error(api.call("PATCH", one, {"enabled": "no"}), 422, "invalid_schedule")
    error(api.call("PATCH", one, {"nextRunAt": "2030-01-01T00:00:00.000Z"}), 400, "malformed")
    assert api.call("DELETE", one).status_code == 204
    error(api.call("PATCH", one, {"enabled": True}), 404, "not_found")
    error(api.call("DELETE", one), 404, "not_found")
    # A trigger id under another automation of the same principal is not found either.
    other = api.automation("other")["id"]
    kept = api.ok("POST", path, {"cron": "0 9 * * *", "timezone": "UTC"}, 201)
    error(
        api.call("PATCH", f"/v1/automations/{other}/schedules/{kept['id']}", {"enabled": False}),
        404,
        "not_found",
    )


def test_reenabling_a_schedule_counts_from_now(api: Api) -> None:
    h = api.h
    path = f"/v1/automations/{api.automation()['id']}/schedules"
    trigger = api.ok("POST", path, {"cron": "0 9 * * *", "timezone": "UTC"}, 201)
    one = f"{path}/{trigger['id']}"
    # Pretend the disabled trigger's next run lies in the past.
    with connect(h.database.url) as conn:
        conn.execute(
            "UPDATE charter.schedule_triggers SET next_run_at = '2026-01-01T09:00:00Z', "
            "enabled = false WHERE id = %s",
            (trigger["id"],),
        )
    assert api.ok("PATCH", one, {"maxOccurrences": 3})["next_run_at"] == "2026-01-01T09:00:00.000Z"
    assert api.ok("PATCH", one, {"enabled": True})["next_run_at"] == "2026-06-19T09:00:00.000Z"


def test_resuming_an_automation_counts_its_schedules_from_now(api: Api) -> None:
    """A paused automation's missed occurrences are not admitted in a flood on resume."""
    automation = f"/v1/automations/{api.automation()['id']}"
    trigger = api.ok(
        "POST", f"{automation}/schedules", {"cron": "0 9 * * *", "timezone": "UTC"}, 201
    )
    api.ok("POST", f"{automation}/pause")
    with connect(api.h.database.url) as conn:
        conn.execute(
            "UPDATE charter.schedule_triggers SET next_run_at = '2026-01-01T09:00:00Z'"
            " WHERE id = %s",
            (trigger["id"],),
        )
    api.ok("POST", f"{automation}/resume")
    [schedule] = api.ok("GET", automation)["schedules"]
    assert schedule["next_run_at"] == "2026-06-19T09:00:00.000Z"


# --- webhook triggers -------------------------------------------------------------------


def _secret_in_db(h: Harness, trigger_id: str) -> str:
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT secret FROM charter.webhook_triggers WHERE id = %s", (trigger_id,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_a_generated_webhook_secret_is_returned_once_and_never_again(api: Api) -> None:
    h = api.h
    automation_id = api.automation()["id"]
    path = f"/v1/automations/{automation_id}/webhooks"
    created = api.ok("POST", path, {"source": "github", "event": "push"}, 201)
    secret = created["secret"]
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]+={0,2}", secret)
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert created["has_secret"] is True
    assert (created["source"], created["event"], created["enabled"]) == ("github", "push", True)
    assert _secret_in_db(h, created["id"]) == secret

    one = f"{path}/{created['id']}"
    responses = [
        api.call("GET", f"/v1/automations/{automation_id}"),
        api.call("GET", path),
        api.call("GET", "/v1/automations", params={"limit": 500}),
        api.call("PATCH", one, {"event": "release"}),
    ]
    for response in responses:
        assert response.status_code == 200, response.text
        assert secret not in response.text
        assert "whsec_" not in response.text
        assert '"secret"' not in response.text
    shown = responses[0].json()["webhooks"]
    assert [(w["id"], w["has_secret"], w["event"]) for w in shown] == [
        (created["id"], True, "push")
    ]
    # A second trigger gets a different secret.
    again = api.ok("POST", path, {"source": "github"}, 201)
    assert again["secret"] != secret
    assert again["event"] is None


def test_a_given_secret_is_stored_and_rotation_is_write_only(api: Api) -> None:
    h = api.h
    path = f"/v1/automations/{api.automation()['id']}/webhooks"
    given = "whsec_" + base64.b64encode(b"k" * 24).decode()
    created = api.ok("POST", path, {"source": "stripe", "secret": given}, 201)
    assert created["secret"] == given
    assert _secret_in_db(h, created["id"]) == given

    rotated = "whsec_" + base64.b64encode(b"r" * 32).decode()
    one = f"{path}/{created['id']}"
    response = api.call("PATCH", one, {"secret": rotated})
    assert response.status_code == 200
    assert rotated not in response.text
    assert "secret" not in response.json()
    assert response.json()["has_secret"] is True
    assert _secret_in_db(h, created["id"]) == rotated
    # Changing anything else keeps the secret.
    assert api.ok("PATCH", one, {"enabled": False, "event": None})["enabled"] is False
    assert _secret_in_db(h, created["id"]) == rotated

    assert api.call("DELETE", one).status_code == 204
    error(api.call("PATCH", one, {"enabled": True}), 404, "not_found")
    assert api.ok("GET", path)["items"] == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"source": ""}, 422, "invalid_webhook"),
        ({"source": 3}, 422, "invalid_webhook"),
        ({"source": "gh", "event": ""}, 422, "invalid_webhook"),
        ({"source": "gh", "secret": "plain"}, 422, "invalid_webhook"),
        ({"source": "gh", "secret": "whsec_short"}, 422, "invalid_webhook"),
        ({"source": "gh", "secret": "whsec_" + "!" * 30}, 422, "invalid_webhook"),
        ({"source": "gh", "secret": None}, 422, "invalid_webhook"),
        ({"event": "push"}, 400, "malformed"),
        ({"source": "gh", "signing_key": "x"}, 400, "malformed"),
    ],
)
def test_webhook_validation(api: Api, body: dict[str, Any], status: int, code: str) -> None:
    path = f"/v1/automations/{api.automation()['id']}/webhooks"
    error(api.call("POST", path, body), status, code)
    assert api.ok("GET", path)["items"] == []


# --- the plan ---------------------------------------------------------------------------


def test_put_show_replace_and_clear_the_plan(api: Api) -> None:
    automation_id = api.automation()["id"]
    path = f"/v1/automations/{automation_id}/plan"
    error(api.call("GET", path), 404, "not_found")
    stored = api.ok("PUT", path, PLAN)
    assert stored["version"] == 1
    assert stored["steps"] == PLAN["steps"]  # actionId keeps its camelCase
    assert stored["allowlist"] == PLAN["allowlist"]
    assert stored["limits"] == PLAN["limits"]
    assert api.ok("GET", path) == stored
    assert api.ok("GET", f"/v1/automations/{automation_id}")["plan"] == stored

    replaced = api.ok("PUT", path, OTHER_PLAN)
    assert replaced["steps"] == OTHER_PLAN["steps"]
    assert replaced["allowlist"] is None
    assert replaced["limits"] is None

    assert api.call("DELETE", path).status_code == 204
    error(api.call("GET", path), 404, "not_found")
    error(api.call("DELETE", path), 404, "not_found")
    assert api.ok("GET", f"/v1/automations/{automation_id}")["plan"] is None


@pytest.mark.parametrize(
    ("plan", "problem"),
    [
        ({"version": 1, "steps": []}, "/steps: must be a non-empty list"),
        ({"version": 1}, "/steps: must be a non-empty list"),
        (
            {
                "version": 1,
                "steps": [
                    {"id": "a", "actionId": "http.request", "input": {}},
                    {"id": "a", "actionId": "http.request", "input": {}},
                ],
            },
            "/steps/1/id: duplicate step id 'a'",
        ),
        (
            {"version": 1, "steps": [{"id": "a", "actionId": "Shell", "input": {}}]},
            "/steps/0/actionId",
        ),
        (
            {"version": 1, "steps": [{"id": "a", "actionId": "http..request", "input": {}}]},
            "/steps/0/actionId",
        ),
        ({"version": 2, "steps": OTHER_PLAN["steps"]}, "/version: must be 1"),
        ({"steps": OTHER_PLAN["steps"]}, "/version: must be 1"),
        ({"version": 1, "steps": [{"id": "a", "actionId": "http.request"}]}, "/steps/0/input"),
        ({**OTHER_PLAN, "allowlist": "http.*"}, "/allowlist: must be a list"),
        ({**OTHER_PLAN, "allowlist": ["Not An Id"]}, "/allowlist/0"),
        ({**OTHER_PLAN, "limits": {"timeoutMs": 5}}, "/limits: unknown keys"),
        ({**OTHER_PLAN, "limits": {"stepTimeoutSeconds": -1}}, "/limits/stepTimeoutSeconds"),
    ],
)
def test_invalid_plans_are_422_with_every_problem(
    api: Api, plan: dict[str, Any], problem: str
) -> None:
    automation_id = api.automation()["id"]
    path = f"/v1/automations/{automation_id}/plan"
    detail = error(api.call("PUT", path, plan), 422, "invalid_plan")
    assert any(p.startswith(problem) for p in detail["problems"]), detail
    error(api.call("GET", path), 404, "not_found")


def test_a_plan_with_an_unknown_key_is_malformed(api: Api) -> None:
    path = f"/v1/automations/{api.automation()['id']}/plan"
    error(api.call("PUT", path, {**PLAN, "compiled": True}), 400, "malformed")


# --- manual runs and the run ledger -----------------------------------------------------


def test_a_manual_trigger_admits_a_pending_run_with_the_plan_snapshot(api: Api) -> None:
    automation_id = api.with_plan()
    run = api.ok("POST", f"/v1/automations/{automation_id}/runs", {"input": {"n": 1}}, 201)
    assert run["status"] == "pending"
    assert run["trigger_kind"] == "manual"
    assert run["trigger_id"] is None
    assert run["automation_id"] == automation_id
    assert run["target"] == "laptop"
    assert run["input"] == {"n": 1}
    assert run["attempts"] == 0
    assert run["plan"] == {
        "version": 1,
        "steps": PLAN["steps"],
        "allowlist": PLAN["allowlist"],
        "limits": PLAN["limits"],
    }
    assert "lease_token" not in run
    assert run["principal"].startswith("user-")  # the automation's owner
    # No body at all, or {}: the input is {}.
    empty = api.h.http.post(f"/v1/automations/{automation_id}/runs", headers=api.headers)
    assert empty.status_code == 201, empty.text
    assert empty.json()["input"] == {}
    assert api.ok("POST", f"/v1/automations/{automation_id}/runs", {}, 201)["input"] == {}
    error(
        api.call("POST", f"/v1/automations/{automation_id}/runs", {"payload": 1}), 400, "malformed"
    )


def test_rule_1_changing_the_plan_does_not_change_an_admitted_run(api: Api) -> None:
    automation_id = api.with_plan()
    run = api.ok("POST", f"/v1/automations/{automation_id}/runs", {}, 201)
    api.ok("PUT", f"/v1/automations/{automation_id}/plan", OTHER_PLAN)
    shown = api.ok("GET", f"/v1/runs/{run['id']}")
    assert shown["plan"]["steps"] == PLAN["steps"]
    assert shown["plan"] == run["plan"]
    # Even removing the plan or the automation leaves the run and its snapshot.
    assert api.call("DELETE", f"/v1/automations/{automation_id}/plan").status_code == 204
    assert api.call("DELETE", f"/v1/automations/{automation_id}").status_code == 204
    assert api.ok("GET", f"/v1/runs/{run['id']}")["plan"] == run["plan"]
    # A new run takes the plan of its own moment.
    second = api.with_plan(OTHER_PLAN)
    later = api.ok("POST", f"/v1/automations/{second}/runs", {}, 201)
    assert later["plan"]["steps"] == OTHER_PLAN["steps"]


def test_a_paused_automation_or_one_without_a_plan_cannot_be_triggered(api: Api) -> None:
    automation_id = api.automation()["id"]
    runs = f"/v1/automations/{automation_id}/runs"
    detail = error(api.call("POST", runs, {}), 409, "no_plan")
    assert "no plan" in detail["message"]
    api.ok("PUT", f"/v1/automations/{automation_id}/plan", PLAN)
    api.ok("POST", f"/v1/automations/{automation_id}/pause")
    detail = error(api.call("POST", runs, {}), 409, "automation_paused")
    assert "paused" in detail["message"]
    assert api.ok("GET", "/v1/runs", params={"automation_id": automation_id})["items"] == []
    api.ok("POST", f"/v1/automations/{automation_id}/resume")
    api.ok("POST", runs, {}, 201)


def test_show_run_includes_its_step_journal(api: Api) -> None:
    h = api.h
    run = api.ok("POST", f"/v1/automations/{api.with_plan()}/runs", {}, 201)
    assert api.ok("GET", f"/v1/runs/{run['id']}")["steps"] == []
    with connect(h.database.url) as conn:
        conn.execute(
            "INSERT INTO charter.run_steps (run_id, step_id, position, status, idempotency_key,"
            " output, finished_at) VALUES (%s, 'fetch', 0, 'completed', %s, '{\"ok\": true}',"
            " now()), (%s, 'file', 1, 'running', %s, NULL, NULL)",
            (run["id"], f"{run['id']}:fetch", run["id"], f"{run['id']}:file"),
        )
    shown = api.ok("GET", f"/v1/runs/{run['id']}")
    assert [(s["step_id"], s["position"], s["status"]) for s in shown["steps"]] == [
        ("fetch", 0, "completed"),
        ("file", 1, "running"),
    ]
    assert shown["steps"][0]["output"] == {"ok": True}
    assert shown["steps"][0]["idempotency_key"] == f"{run['id']}:fetch"
    assert shown["id"] == run["id"]


def test_runs_filter_and_paginate_newest_first(api: Api) -> None:
    h = api.h
    first, second = api.with_plan(), api.with_plan(OTHER_PLAN)
    made = [
        api.ok("POST", f"/v1/automations/{first}/runs", {"input": i}, 201)["id"] for i in range(5)
    ]
    made += [api.ok("POST", f"/v1/automations/{second}/runs", {}, 201)["id"] for _ in range(2)]
    with connect(h.database.url) as conn:
        conn.execute(
            "UPDATE charter.runs SET status = 'failed', finished_at = now(), error = 'boom' "
            "WHERE id = %s",
            (made[0],),
        )

    seen: list[str] = []
    cursor = None
    while True:
        page = api.ok(
            "GET", "/v1/runs", params={"limit": 2, **({"cursor": cursor} if cursor else {})}
        )
        seen += [r["id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 7
    assert set(seen) == set(made)

    of_first = api.ok("GET", "/v1/runs", params={"automation_id": first})["items"]
    assert {r["id"] for r in of_first} == set(made[:5])
    failed = api.ok("GET", "/v1/runs", params={"status": "failed"})["items"]
    assert [(r["id"], r["error"]) for r in failed] == [(made[0], "boom")]
    pending = api.ok("GET", "/v1/runs", params={"status": "pending", "automation_id": second})
    assert {r["id"] for r in pending["items"]} == set(made[5:])
    error(api.call("GET", "/v1/runs", params={"status": "sent"}), 400, "malformed")
    error(api.call("GET", "/v1/runs", params={"automation_id": "nope"}), 400, "malformed")
    error(api.call("GET", "/v1/runs", params={"cursor": "%%%"}), 400, "malformed")


# --- scopes -----------------------------------------------------------------------------

A = "00000000-0000-4000-8000-00000000000a"
T = "00000000-0000-4000-8000-00000000000b"
ENDPOINTS = [
    ("POST", "/v1/automations", "automations:write"),
    ("GET", "/v1/automations", "automations:read"),
    ("GET", f"/v1/automations/{A}", "automations:read"),
    ("PATCH", f"/v1/automations/{A}", "automations:write"),
    ("DELETE", f"/v1/automations/{A}", "automations:write"),
    ("POST", f"/v1/automations/{A}/pause", "automations:write"),
    ("POST", f"/v1/automations/{A}/resume", "automations:write"),
    ("GET", f"/v1/automations/{A}/schedules", "automations:read"),
    ("POST", f"/v1/automations/{A}/schedules", "automations:write"),
    ("PATCH", f"/v1/automations/{A}/schedules/{T}", "automations:write"),
    ("DELETE", f"/v1/automations/{A}/schedules/{T}", "automations:write"),
    ("GET", f"/v1/automations/{A}/webhooks", "automations:read"),
    ("POST", f"/v1/automations/{A}/webhooks", "automations:write"),
    ("PATCH", f"/v1/automations/{A}/webhooks/{T}", "automations:write"),
    ("DELETE", f"/v1/automations/{A}/webhooks/{T}", "automations:write"),
    ("PUT", f"/v1/automations/{A}/plan", "automations:write"),
    ("GET", f"/v1/automations/{A}/plan", "automations:read"),
    ("DELETE", f"/v1/automations/{A}/plan", "automations:write"),
    ("POST", f"/v1/automations/{A}/runs", "runs:execute"),
    ("GET", "/v1/runs", "runs:read"),
    ("GET", f"/v1/runs/{A}", "runs:read"),
]
AUTOMATION_SCOPES = {"automations:read", "automations:write", "runs:read", "runs:execute"}


@pytest.mark.parametrize(("method", "path", "scope"), ENDPOINTS)
def test_every_endpoint_needs_a_token(h: Harness, method: str, path: str, scope: str) -> None:
    response = h.http.request(method, path, content=b"{}")
    error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    revoked = h.http.request(method, path, content=b"{}", headers=bearer("ch_unknown"))
    error(revoked, 401, "unauthorized")


@pytest.mark.parametrize(("method", "path", "scope"), ENDPOINTS)
def test_every_endpoint_needs_its_scope(h: Harness, method: str, path: str, scope: str) -> None:
    others = sorted(AUTOMATION_SCOPES - {scope} | {"processes:read"})
    token = h.token(*others, principal="scoped")
    response = h.http.request(method, path, content=b"{}", headers=bearer(token))
    detail = error(response, 403, "forbidden")
    assert detail["scope"] == scope
    # With exactly that scope the request gets past authorization (to 404 / 400 / 2xx).
    allowed = h.http.request(method, path, content=b"{}", headers=bearer(h.token(scope)))
    assert allowed.status_code not in (401, 403), allowed.text


def test_narrow_scopes_do_what_they_name(h: Harness) -> None:
    principal = f"narrow-{uuid.uuid4().hex[:6]}"
    writer = Api(h, h.token("automations:write", principal=principal))
    reader = Api(h, h.token("automations:read", principal=principal))
    executor = Api(h, h.token("runs:execute", principal=principal))
    runs_reader = Api(h, h.token("runs:read", principal=principal))
    automation_id = writer.automation()["id"]
    writer.ok("PUT", f"/v1/automations/{automation_id}/plan", PLAN)
    assert reader.ok("GET", f"/v1/automations/{automation_id}")["id"] == automation_id
    error(reader.call("POST", f"/v1/automations/{automation_id}/pause"), 403, "forbidden")
    error(writer.call("POST", f"/v1/automations/{automation_id}/runs", {}), 403, "forbidden")
    run = executor.ok("POST", f"/v1/automations/{automation_id}/runs", {}, 201)
    error(executor.call("GET", f"/v1/runs/{run['id']}"), 403, "forbidden")
    assert runs_reader.ok("GET", f"/v1/runs/{run['id']}")["id"] == run["id"]
    error(runs_reader.call("GET", "/v1/automations"), 403, "forbidden")


# --- principal isolation ----------------------------------------------------------------


def test_principals_see_and_change_only_their_own(h: Harness) -> None:
    alice = Api(h, h.token(*AUTOMATION_SCOPES, principal=f"alice-{uuid.uuid4().hex[:6]}"))
    bob = Api(h, h.token(*AUTOMATION_SCOPES, principal=f"bob-{uuid.uuid4().hex[:6]}"))
    automation_id = alice.with_plan()
    base = f"/v1/automations/{automation_id}"
    schedule = alice.ok("POST", f"{base}/schedules", {"cron": "0 9 * * *", "timezone": "UTC"}, 201)
    webhook = alice.ok("POST", f"{base}/webhooks", {"source": "github"}, 201)
    run = alice.ok("POST", f"{base}/runs", {}, 201)
    before = alice.ok("GET", base)

    attempts = [
        ("GET", base, None),
        ("PATCH", base, {"name": "mine now"}),
        ("POST", f"{base}/pause", None),
        ("POST", f"{base}/resume", None),
        ("GET", f"{base}/schedules", None),
        ("POST", f"{base}/schedules", {"cron": "0 9 * * *", "timezone": "UTC"}),
        ("PATCH", f"{base}/schedules/{schedule['id']}", {"maxOccurrences": None}),
        ("DELETE", f"{base}/schedules/{schedule['id']}", None),
        ("GET", f"{base}/webhooks", None),
        ("POST", f"{base}/webhooks", {"source": "evil"}),
        ("PATCH", f"{base}/webhooks/{webhook['id']}", {"secret": webhook["secret"]}),
        ("DELETE", f"{base}/webhooks/{webhook['id']}", None),
        ("GET", f"{base}/plan", None),
        ("PUT", f"{base}/plan", OTHER_PLAN),
        ("DELETE", f"{base}/plan", None),
        ("POST", f"{base}/runs", {}),
        ("GET", f"/v1/runs/{run['id']}", None),
        ("DELETE", base, None),
    ]
    for method, path, body in attempts:
        detail = error(bob.call(method, path, body), 404, "not_found")
        assert "forbidden" not in detail["message"]

    assert bob.ok("GET", "/v1/automations")["items"] == []
    assert bob.ok("GET", "/v1/runs")["items"] == []
    assert bob.ok("GET", "/v1/runs", params={"automation_id": automation_id})["items"] == []
    # Alice's things are exactly as they were, and still hers.
    assert alice.ok("GET", base) == before
    assert [r["id"] for r in alice.ok("GET", "/v1/runs")["items"]] == [run["id"]]
    assert _secret_in_db(h, webhook["id"]) == webhook["secret"]


def test_openapi_documents_the_control_api(h: Harness) -> None:
    spec = h.http.get("/openapi.json").json()
    paths = spec["paths"]
    for method, path, _scope in ENDPOINTS:
        template = re.sub(r"/[0-9a-f-]{36}", "/{}", path)
        found = [p for p in paths if re.sub(r"\{[a-z_]+\}", "{}", p) == template]
        assert found, path
        assert method.lower() in paths[found[0]], (method, path)
    plan = paths["/v1/automations/{automation_id}/plan"]["put"]["requestBody"]
    schema = plan["content"]["application/json"]["schema"]
    assert schema["required"] == ["version", "steps"]
    schedule = paths["/v1/automations/{automation_id}/schedules"]["post"]["requestBody"]
    assert "maxOccurrences" in schedule["content"]["application/json"]["schema"]["properties"]


def test_the_secret_shown_once_is_the_one_that_verifies_deliveries(api: Api) -> None:
    """The write-only secret is not a dead end: the one returned at creation (and the one
    set by rotation) is what admission checks signatures against."""
    h = api.h
    automation_id = api.with_plan()
    base = f"/v1/automations/{automation_id}/webhooks"
    created = api.ok("POST", base, {"source": "github", "event": "push"}, 201)
    me = _principal_of(api)

    def deliver(secret: str, message_id: str) -> httpx.Response:
        body = dumps({"type": "push", "ref": "main"})
        stamp = int(NOW.timestamp())
        response: httpx.Response = h.http.post(
            "/events",
            content=body,
            headers={
                "x-charter-principal": me,
                "x-charter-target": "laptop",
                "x-charter-source": "github",
                "webhook-id": message_id,
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(secret, message_id, stamp, body),
            },
        )
        return response

    first = deliver(created["secret"], "msg_1")
    assert first.status_code == 202, first.text
    [run_id] = first.json()["runs"]
    run = api.ok("GET", f"/v1/runs/{run_id}")
    assert (run["trigger_kind"], run["trigger_id"]) == ("webhook", created["id"])

    rotated = "whsec_" + base64.b64encode(b"n" * 32).decode()
    api.ok("PATCH", f"{base}/{created['id']}", {"secret": rotated})
    assert deliver(created["secret"], "msg_2").status_code == 401
    assert deliver(rotated, "msg_3").status_code == 202


def _principal_of(api: Api) -> str:
    token = api.headers["Authorization"].removeprefix("Bearer ")
    with connect(api.h.database.url) as conn:
        info = find_token(conn, token)
    assert info is not None
    return info.principal
