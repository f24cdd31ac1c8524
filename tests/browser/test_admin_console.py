"""The console under an admin (`*`) token shows every principal's automations and runs,
with their owner; a run, automation or plan that is not there (or, for a token without
`*`, is another principal's) reads "not found, or owned by another principal", not as a
missing API route."""

from __future__ import annotations

import uuid
from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.test_console import sign_in
from tests.browser.world import Seeded
from tests.integration.apikit import Harness, bearer

OWNER_SCOPES = ("automations:read", "automations:write", "runs:read", "runs:execute")
PLAN = {"version": 1, "steps": [{"id": "only", "actionId": "http.request", "input": {}}]}


def _someone_elses(harness: Harness) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(token, automation, run) of a principal other than the admin's, made over the API."""
    token = harness.token(*OWNER_SCOPES, principal=f"zoe-{uuid.uuid4().hex[:6]}")
    auth = bearer(token)
    name = f"zoe's report {uuid.uuid4().hex[:6]}"
    made = harness.http.post("/v1/automations", json={"name": name, "target": "zb"}, headers=auth)
    assert made.status_code == 201, made.text
    automation = made.json()
    planned = harness.http.put(f"/v1/automations/{automation['id']}/plan", json=PLAN, headers=auth)
    assert planned.status_code == 200, planned.text
    run = harness.http.post(f"/v1/automations/{automation['id']}/runs", json={}, headers=auth)
    assert run.status_code == 201, run.text
    return token, automation, run.json()


def test_the_admin_sees_another_principals_automation_and_run(
    page: Page, stack: tuple[str, Seeded, Harness]
) -> None:
    base, data, harness = stack
    _, automation, run = _someone_elses(harness)
    sign_in(page, base, data.admin, "/console/automations")
    row = page.locator("#automations tbody tr", has_text=automation["name"])
    expect(row).to_have_count(1)
    expect(row).to_contain_text(automation["principal"])  # the owner column
    row.locator("details summary").click()
    expect(row.locator("details")).to_contain_text("http.request")  # its plan
    runs = page.locator("#runs tbody tr", has_text=automation["principal"])
    expect(runs).to_have_count(1)

    page.goto(base + "/console/runs/" + run["id"])
    expect(page.locator("#run-status")).to_have_text("pending")
    expect(page.locator("main")).to_contain_text(automation["principal"])
    expect(page.locator(".unavailable")).to_have_count(0)


def test_a_missing_run_says_not_found_or_owned_by_another_principal(
    page: Page, stack: tuple[str, Seeded, Harness]
) -> None:
    base, data, harness = stack
    sign_in(page, base, data.admin, "/console/runs/" + str(uuid.uuid4()))
    said = page.locator("main .card").first
    expect(said).to_contain_text("Not found, or owned by another principal")
    expect(page.locator("main")).not_to_contain_text("Not available on this server")

    # Another principal's run under a token without `*` reads the same way.
    token, _, run = _someone_elses(harness)
    stranger = harness.token(*OWNER_SCOPES, principal="stranger")
    assert harness.http.get(f"/v1/runs/{run['id']}", headers=bearer(token)).status_code == 200
    page.evaluate("sessionStorage.clear()")
    sign_in(page, base, stranger, "/console/runs/" + run["id"])
    expect(page.locator("main .card").first).to_contain_text(
        "Not found, or owned by another principal"
    )
    expect(page.locator("main")).not_to_contain_text("Not available on this server")
