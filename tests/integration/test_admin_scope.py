"""A `*` token sees and acts on every principal's automations, triggers, plans and runs
(through the API and so the SDK); a token of another principal without `*` still gets
404 for them, never 403, and empty lists."""

from __future__ import annotations

import json
import secrets
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from charter.cli import automations as automations_cli
from charter.cli import main as cli_main
from charter.db.database import Database, connect
from charter.sdk import Client
from tests.integration.apikit import Harness, bearer, dumps, make_harness

PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [{"id": "only", "actionId": "http.request", "input": {"url": "https://x.test"}}],
}
OTHER_PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [{"id": "second", "actionId": "http.request", "input": {}}],
}
OWNER_SCOPES = ("automations:read", "automations:write", "runs:read", "runs:execute")


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


class Api:
    def __init__(self, h: Harness, token: str) -> None:
        self.h, self.token = h, token

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        content = dumps(body) if body is not None else None
        response: httpx.Response = self.h.http.request(
            method, path, content=content, headers=bearer(self.token), **kw
        )
        return response

    def ok(self, method: str, path: str, body: Any = None, status: int = 200, **kw: Any) -> Any:
        response = self.call(method, path, body, **kw)
        assert response.status_code == status, response.text
        return response.json() if response.content else None


def owner(h: Harness, name: str) -> Api:
    """A principal with every automation scope but not `*`."""
    return Api(h, h.token(*OWNER_SCOPES, principal=f"{name}-{uuid.uuid4().hex[:6]}"))


@pytest.fixture
def alice_things(h: Harness) -> dict[str, Any]:
    alice = owner(h, "alice")
    automation = alice.ok("POST", "/v1/automations", {"name": "nightly", "target": "box"}, 201)
    base = f"/v1/automations/{automation['id']}"
    alice.ok("PUT", f"{base}/plan", PLAN)
    schedule = alice.ok("POST", f"{base}/schedules", {"cron": "0 9 * * *", "timezone": "UTC"}, 201)
    webhook = alice.ok("POST", f"{base}/webhooks", {"source": "github"}, 201)
    run = alice.ok("POST", f"{base}/runs", {"input": {"n": 1}}, 201)
    return {
        "alice": alice,
        "automation": automation,
        "base": base,
        "schedule": schedule,
        "webhook": webhook,
        "run": run,
    }


def test_admin_lists_and_reads_another_principals_automation_plan_and_run(
    h: Harness, alice_things: dict[str, Any]
) -> None:
    admin = Api(h, h.admin)
    automation, base, run = alice_things["automation"], alice_things["base"], alice_things["run"]
    alice = alice_things["alice"]
    principal = alice.ok("GET", base)["principal"]
    assert principal.startswith("alice-")

    listed = admin.ok("GET", "/v1/automations", params={"limit": 500})["items"]
    mine = [a for a in listed if a["id"] == automation["id"]]
    assert len(mine) == 1
    assert mine[0]["principal"] == principal  # an admin view says whose it is
    shown = admin.ok("GET", base)
    assert shown["id"] == automation["id"]
    assert shown["plan"]["steps"] == PLAN["steps"]
    assert [s["id"] for s in shown["schedules"]] == [alice_things["schedule"]["id"]]
    assert [w["id"] for w in shown["webhooks"]] == [alice_things["webhook"]["id"]]
    assert admin.ok("GET", f"{base}/plan")["steps"] == PLAN["steps"]
    assert [s["id"] for s in admin.ok("GET", f"{base}/schedules")["items"]] == [
        alice_things["schedule"]["id"]
    ]
    assert len(admin.ok("GET", f"{base}/webhooks")["items"]) == 1

    runs = admin.ok("GET", "/v1/runs", params={"automation_id": automation["id"]})["items"]
    assert [r["id"] for r in runs] == [run["id"]]
    assert runs[0]["principal"] == principal
    every = admin.ok("GET", "/v1/runs", params={"limit": 500})["items"]
    assert run["id"] in {r["id"] for r in every}
    assert admin.ok("GET", f"/v1/runs/{run['id']}")["input"] == {"n": 1}


def test_admin_acts_on_another_principals_automation_and_runs(
    h: Harness, alice_things: dict[str, Any]
) -> None:
    admin = Api(h, h.admin)
    alice, base, run = alice_things["alice"], alice_things["base"], alice_things["run"]
    principal = alice.ok("GET", base)["principal"]

    assert admin.ok("POST", f"{base}/pause")["enabled"] is False
    assert alice.ok("GET", base)["enabled"] is False
    assert admin.ok("POST", f"{base}/resume")["enabled"] is True
    assert admin.ok("PATCH", base, {"name": "renamed by admin"})["name"] == "renamed by admin"
    admin.ok("PUT", f"{base}/plan", OTHER_PLAN)
    schedule = alice_things["schedule"]
    admin.ok("PATCH", f"{base}/schedules/{schedule['id']}", {"enabled": False})
    added = admin.ok("POST", f"{base}/schedules", {"cron": "0 10 * * *", "timezone": "UTC"}, 201)
    admin.ok("DELETE", f"{base}/schedules/{added['id']}", status=204)

    # A manual run the admin triggers is still the owner's run, on the owner's target.
    triggered = admin.ok("POST", f"{base}/runs", {}, 201)
    assert triggered["principal"] == principal
    assert triggered["plan"]["steps"] == OTHER_PLAN["steps"]
    assert triggered["id"] in {r["id"] for r in alice.ok("GET", "/v1/runs")["items"]}

    cancelled = admin.ok("POST", f"/v1/runs/{run['id']}/cancel")
    assert cancelled["status"] == "failed"
    assert alice.ok("GET", f"/v1/runs/{run['id']}")["status"] == "failed"
    retried = admin.ok("POST", f"/v1/runs/{run['id']}/retry", status=201)
    assert retried["principal"] == principal
    assert retried["input"] == {"n": 1}

    # The admin's own automations are still made under its own principal.
    own = admin.ok("POST", "/v1/automations", {"name": "admin's", "target": "box"}, 201)
    assert own["principal"] == "admin"
    admin.ok("DELETE", base, status=204)
    assert alice.call("GET", base).status_code == 404


def test_a_non_admin_other_principal_still_gets_404(
    h: Harness, alice_things: dict[str, Any]
) -> None:
    bob = owner(h, "bob")
    base, run = alice_things["base"], alice_things["run"]
    schedule, webhook = alice_things["schedule"], alice_things["webhook"]
    attempts = [
        ("GET", base, None),
        ("PATCH", base, {"name": "mine"}),
        ("POST", f"{base}/pause", None),
        ("GET", f"{base}/plan", None),
        ("PUT", f"{base}/plan", OTHER_PLAN),
        ("GET", f"{base}/schedules", None),
        ("PATCH", f"{base}/schedules/{schedule['id']}", {"enabled": False}),
        ("DELETE", f"{base}/webhooks/{webhook['id']}", None),
        ("POST", f"{base}/runs", {}),
        ("GET", f"/v1/runs/{run['id']}", None),
        ("POST", f"/v1/runs/{run['id']}/cancel", None),
        ("POST", f"/v1/runs/{run['id']}/retry", None),
        ("DELETE", base, None),
    ]
    for method, path, body in attempts:
        response = bob.call(method, path, body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"
    assert bob.ok("GET", "/v1/automations")["items"] == []
    assert bob.ok("GET", "/v1/runs")["items"] == []
    assert alice_things["alice"].ok("GET", f"/v1/runs/{run['id']}")["status"] == "pending"


def test_the_sdk_under_an_admin_token_sees_and_acts_on_everything(
    h: Harness, alice_things: dict[str, Any]
) -> None:
    api = Client(str(h.http.base_url), h.admin, http=h.http)
    automation_id = alice_things["automation"]["id"]
    assert automation_id in {a.id for a in api.automations(limit=500).items}
    assert api.automation(automation_id).automation.id == automation_id
    assert [step.id for step in api.plan(automation_id).steps] == ["only"]
    run = api.run(alice_things["run"]["id"]).run
    assert run.id == alice_things["run"]["id"]
    assert run.principal is not None
    assert run.principal.startswith("alice-")
    assert api.pause_automation(automation_id).enabled is False


def test_admin_sees_another_principals_machines(h: Harness) -> None:
    principal = f"carol-{uuid.uuid4().hex[:6]}"
    with connect(h.database.url) as conn:
        conn.execute(
            "INSERT INTO charter.machines (id, target, principal, thumbprint, public_jwk) "
            "VALUES (%s, 'box', %s, %s, '{}')",
            (f"m-{principal}", principal, secrets.token_urlsafe(32)),
        )
    admin = Api(h, h.admin)
    machines = admin.ok("GET", "/v1/machines")["machines"]
    assert f"m-{principal}" in {m["id"] for m in machines}
    assert owner(h, "dave").ok("GET", "/v1/machines")["machines"] == []


def test_the_cli_under_an_admin_token_lists_and_shows_everyones(
    h: Harness,
    alice_things: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(
        automations_cli, "client", lambda: Client(str(h.http.base_url), h.admin, http=h.http)
    )
    monkeypatch.setenv("COLUMNS", "250")

    def charter(*args: str) -> str:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["charter", *args])
        code: object = 0
        try:
            cli_main.main()
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        assert code in (0, None), captured.err
        return captured.out

    automation_id, run_id = alice_things["automation"]["id"], alice_things["run"]["id"]
    listed = json.loads(charter("automations", "list", "--all", "--json"))["items"]
    assert automation_id in {a["id"] for a in listed}
    table = charter("automations", "list", "--all")
    row = next(line for line in table.splitlines() if automation_id in line)
    assert "alice-" in row  # the owner column
    assert automation_id in charter("automations", "show", automation_id)
    assert run_id in charter("runs", "show", run_id)
    assert "alice-" in charter("runs", "show", run_id)
