"""The console reads every list from the one envelope's `items`: each list answer reaches
the browser with the deprecated keys (`processes`, `events`, `workflows`, `actors`,
`machines`, `scheduled`, `queue`) taken out, and every page still shows its rows."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Route, expect

from tests.browser.test_console import sign_in
from tests.browser.world import Seeded
from tests.integration.world import ONBOARDING

DEPRECATED = ("processes", "events", "workflows", "actors", "machines", "scheduled", "queue")
LISTS = re.compile(
    r"^/v1/(processes|processes/[^/]+/events|workflows|actors|machines|automation/(scheduled|queue)"
    r"|automations|automations/[^/]+/(schedules|webhooks)|runs)$"
)


@pytest.fixture
def items_only(page: Page) -> list[str]:
    """Every list answer, less its deprecated keys; the paths so answered."""
    answered: list[str] = []

    def strip(route: Route) -> None:
        response = route.fetch()
        body = response.json()
        assert "items" in body, (route.request.url, body)
        for key in DEPRECATED:
            body.pop(key, None)
        answered.append(urlsplit(route.request.url).path)
        route.fulfill(response=response, body=json.dumps(body))

    page.route(lambda url: bool(LISTS.match(urlsplit(url).path)), strip)
    return answered


def test_the_process_list_and_a_process_page(
    page: Page, seeded: tuple[str, Seeded], items_only: list[str]
) -> None:
    base, data = seeded
    sign_in(page, base, data.admin, "/console/processes")
    expect(page.locator("#results tbody tr", has_text=data.plain[0])).to_have_count(1)
    page.goto(base + "/console/processes/" + data.onboarding)
    expect(page.locator("#events li.event")).to_have_count(4)
    expect(page.locator("#actor option", has_text="ada (customer)")).to_have_count(1)
    assert "/v1/processes" in items_only
    assert f"/v1/processes/{data.onboarding}/events" in items_only
    assert "/v1/actors" in items_only


def test_the_workflows_automations_and_machines_pages(
    page: Page, seeded: tuple[str, Seeded], items_only: list[str]
) -> None:
    base, data = seeded
    sign_in(page, base, data.admin, "/console/workflows")
    expect(page.locator("#workflows")).to_contain_text(ONBOARDING)
    page.goto(base + "/console/automations")
    expect(page.locator("#global-scheduled")).to_contain_text("start_review")
    expect(page.locator("#machines")).to_contain_text("console-target")
    expect(page.locator("#runs tbody tr").first).to_be_visible()
    page.goto(base + "/console/machines")
    expect(page.locator("#machines tbody tr", has_text="console-target")).to_have_count(1)
    for path in ("/v1/workflows", "/v1/automation/scheduled", "/v1/machines", "/v1/runs"):
        assert path in items_only, path
