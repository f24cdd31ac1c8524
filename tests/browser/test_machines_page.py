"""The machines page (/console/machines) against the real API: the list with status, last
seen and runs in progress; Disable and Enable acting on the server; no buttons for a
token that may not use them; markup in a machine's fields shown as text."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from charter.automations.dpop import public_jwk
from charter.core.ed25519 import SecretKey
from charter.db.database import Database
from tests.browser.test_console import sign_in
from tests.browser.world import HOSTILE
from tests.integration.apikit import Harness, bearer
from tests.integration.liveserver import live_server
from tests.integration.machinekit import (
    Machine,
    admit,
    create_automation,
    machine_harness,
    register,
)


@dataclass(frozen=True)
class Site:
    base: str
    harness: Harness
    busy: Machine  # seen recently, one run in progress
    idle: Machine  # never made a request


@pytest.fixture(scope="module")
def site(database: Database) -> Iterator[Site]:
    harness = machine_harness(database)
    busy = register(harness, "console-busy", principal="admin", machine_id="busy-1")
    automation = create_automation(database, target=busy.target, principal="admin")
    admit(database, automation, harness, input={"n": 1})
    busy.claimed()  # a DPoP request (last seen) that leases the run (in progress)
    idle = register(harness, "console-idle", principal="admin", machine_id="idle-1")
    with live_server(harness.http.app) as base:
        yield Site(base, harness, busy, idle)


def row(page: Page, machine_id: str) -> Locator:
    return page.locator("#machines tbody tr", has_text=machine_id)


def served(site: Site, machine_id: str) -> dict[str, Any]:
    """The machine as the API has it now."""
    listed = site.harness.http.get("/v1/machines", headers=bearer(site.harness.admin))
    [machine] = [m for m in listed.json()["items"] if m["id"] == machine_id]
    assert isinstance(machine, dict)
    return machine


def test_the_list_shows_registered_machines(page: Page, site: Site) -> None:
    sign_in(page, site.base, site.harness.admin)
    page.locator("#nav a", has_text="Machines").click()
    expect(page).to_have_url(site.base + "/console/machines")
    expect(page.locator("#nav a[data-nav=machines]")).to_have_attribute("aria-current", "page")
    busy = row(page, site.busy.id)
    expect(busy).to_contain_text("console-busy")
    expect(busy).to_contain_text("enabled")
    expect(busy.locator("td").nth(5)).to_have_text("1")  # runs in progress
    expect(busy.locator("td").nth(4)).not_to_contain_text("not recently")
    idle = row(page, site.idle.id)
    expect(idle.locator("td").nth(4)).to_have_text("not recently")
    expect(idle.locator("td").nth(5)).to_have_text("0")


def test_screenshots(page: Page, site: Site, tmp_path: Path) -> None:
    """With CHARTER_CONSOLE_SCREENSHOTS=DIR the page's picture is saved there, as
    test_console.py's screenshots are (docs/console/machines.png). The browser's clock is
    set to the server's fake one, so "last seen" reads as it would in real use."""
    page.clock.set_fixed_time(site.harness.clock.now() + timedelta(seconds=42))
    sign_in(page, site.base, site.harness.admin, "/console/machines")
    expect(row(page, site.busy.id)).to_contain_text("42s ago")
    expect(row(page, site.idle.id)).to_be_visible()
    page.wait_for_load_state("load")
    folder = Path(os.environ.get("CHARTER_CONSOLE_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / "machines.png"), full_page=True)


def test_disable_then_enable_changes_the_machine_on_the_server(page: Page, site: Site) -> None:
    sign_in(page, site.base, site.harness.admin, "/console/machines")
    idle = row(page, site.idle.id)
    idle.get_by_role("button", name="Disable").click()
    expect(idle).to_contain_text("disabled")
    assert served(site, site.idle.id)["disabled_at"] is not None
    idle.get_by_role("button", name="Enable").click()
    expect(idle.get_by_role("button", name="Disable")).to_be_visible()
    expect(idle.locator(".state")).to_have_text("enabled")
    assert served(site, site.idle.id)["disabled_at"] is None
    expect(page.locator("#machine-action-error")).to_be_empty()


def test_a_refused_action_is_said_with_its_code(page: Page, site: Site) -> None:
    """Scopes can change under an open page: the server's refusal is shown, not lost."""
    sign_in(page, site.base, site.harness.admin, "/console/machines")
    page.route(
        "**/v1/machines/*/disable",
        lambda route: route.fulfill(
            status=403,
            content_type="application/json",
            body='{"error": {"code": "forbidden", "message": "the token lacks the scope"}}',
        ),
    )
    row(page, site.idle.id).get_by_role("button", name="Disable").click()
    expect(page.locator("#machine-action-error")).to_contain_text("forbidden")
    assert served(site, site.idle.id)["disabled_at"] is None


def test_a_token_that_may_only_read_sees_no_buttons(page: Page, site: Site) -> None:
    reader = site.harness.token("automations:read", principal="admin")
    sign_in(page, site.base, reader, "/console/machines")
    expect(row(page, site.busy.id)).to_contain_text("enabled")
    expect(page.locator("#machines button")).to_have_count(0)


def test_a_token_that_may_not_read_machines_has_no_machines_entry(page: Page, site: Site) -> None:
    runs_only = site.harness.token("runs:read", principal="admin")
    sign_in(page, site.base, runs_only)
    expect(page.locator("#nav a[data-nav=machines]")).to_be_hidden()


def test_markup_in_a_machine_renders_as_text(page: Page, site: Site) -> None:
    """Ids and targets are refused unless they are plain names; the principal is free
    text, so it carries the markup here."""
    registered = site.harness.http.post(
        "/v1/machines",
        json={
            "id": f"hostile-{secrets.token_hex(3)}",
            "target": "console-hostile",
            "principal": HOSTILE,
            "public_jwk": public_jwk(SecretKey.generate()),
        },
        headers=bearer(site.harness.admin),
    )
    assert registered.status_code == 201, registered.text
    sign_in(page, site.base, site.harness.admin, "/console/machines")
    hostile = row(page, registered.json()["id"])
    expect(hostile).to_contain_text("window.__xss")
    expect(hostile).to_contain_text(HOSTILE.split(" ")[0])
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img, main script, main svg").count() == 0
