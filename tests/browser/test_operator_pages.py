"""The pages written against the operator API's contract (GET /v1/processes, /v1/stats,
/v1/automation/scheduled|queue, /v1/stream), which this server may not have yet.

The browser's requests to those routes are answered here with contract-shaped bodies
(Playwright's request routing), so the pages are checked now and keep working when the
routes land; the other tests see the degraded pages of a server without them.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page, Route, expect

from charter.core.envelope import sign
from tests.browser.test_console import sign_in
from tests.browser.world import HOSTILE, Seeded
from tests.integration.apikit import Harness

STATS = {
    "processes": [
        {"workflow": "tests/errands", "state": "open", "count": 3},
        {"workflow": "tests/errands", "state": "approved", "count": 1},
        {"workflow": "tests/notes", "state": "open", "count": 2},
    ],
    "timers_due_next_hour": 4,
    "queue": {"pending": 2, "failed": 1},
    "failed_work": 1,
    "runs": {"running": 1},
    "machines_seen_recently": 1,
    "as_of": "2026-06-20T10:01:00Z",
}


def _json(route: Route, body: Any, status: int = 200) -> None:
    route.fulfill(status=status, content_type="application/json", body=json.dumps(body))


def _process(harness: Harness, process_id: str) -> Any:
    response = harness.http.get(f"/v1/processes/{process_id}", headers=_auth(harness))
    return response.json()


def _auth(harness: Harness) -> dict[str, str]:
    return {"Authorization": f"Bearer {harness.admin}"}


def test_the_overview_shows_the_stats(page: Page, seeded: tuple[str, Seeded]) -> None:
    base, data = seeded
    page.route("**/v1/stats", lambda route: _json(route, STATS))
    sign_in(page, base, data.admin)
    stats = page.locator("#stats")
    expect(stats).to_contain_text("Timers due in the next hour")
    expect(stats).to_contain_text("pending: 2, failed: 1")
    row = stats.locator("tr", has_text="tests/errands")
    expect(row).to_contain_text("open 3")
    expect(row).to_contain_text("4")  # the workflow's total
    row.get_by_role("link", name="approved 1").click()
    expect(page).to_have_url(base + "/console/processes?workflow=tests%2Ferrands&state=approved")


def test_without_stats_the_overview_says_so(page: Page, seeded: tuple[str, Seeded]) -> None:
    """A server without the operator API (an older one) answers 404 not_found."""
    base, data = seeded
    page.route(
        "**/v1/stats*",
        lambda route: _json(route, {"error": {"code": "not_found", "message": "no route"}}, 404),
    )
    sign_in(page, base, data.admin)
    expect(page.locator("#stats .unavailable")).to_contain_text("GET /v1/stats")


def test_the_process_list_filters_and_pages(page: Page, stack: tuple[str, Seeded, Harness]) -> None:
    base, data, harness = stack
    rows = [_process(harness, p) for p in data.plain]
    asked: list[dict[str, list[str]]] = []

    def processes(route: Route) -> None:
        query = parse_qs(urlparse(route.request.url).query)
        asked.append(query)
        page_rows, following = (rows[2:], None) if "cursor" in query else (rows[:2], "c2")
        _json(route, {"items": page_rows, "next_cursor": following})

    page.route("**/v1/processes?*", processes)
    sign_in(page, base, data.admin, "/console/processes?workflow=tests%2Ferrands&state=open")
    expect(page.locator("#filter-workflow")).to_have_value("tests/errands")
    expect(page.locator("#results tbody tr")).to_have_count(2)
    assert asked[0]["workflow"] == ["tests/errands"]
    assert asked[0]["state"] == ["open"]
    page.click("#more")
    expect(page.locator("#results tbody tr")).to_have_count(len(rows))
    expect(page.locator("#more")).to_be_hidden()
    assert asked[1]["cursor"] == ["c2"]

    page.fill("#filter-q", "p-")
    page.fill("#filter-state", "")
    page.click("#filters button[type=submit]")
    expect(page).to_have_url(base + "/console/processes?workflow=tests%2Ferrands&q=p-")
    page.locator("#results a", has_text=data.plain[0]).click()
    expect(page.locator("h1")).to_contain_text(data.plain[0])


def test_hostile_values_in_the_list_render_as_text(
    page: Page, stack: tuple[str, Seeded, Harness]
) -> None:
    base, data, harness = stack
    hostile = _process(harness, data.hostile)
    hostile["state"] = HOSTILE
    page.route(
        "**/v1/processes?*",
        lambda route: _json(route, {"items": [hostile], "next_cursor": None}),
    )
    sign_in(page, base, data.admin, "/console/processes")
    expect(page.locator("#results tbody tr")).to_contain_text("window.__xss")
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img, main script, main svg").count() == 0


def test_global_timers_and_queue(page: Page, stack: tuple[str, Seeded, Harness]) -> None:
    """The timers come from the real `GET /v1/automation/scheduled`; the queue row is a
    real one, answered failed with a hostile error (which must render as text)."""
    base, data, harness = stack
    queue = harness.http.get("/v1/automation/queue", headers=_auth(harness))
    assert queue.status_code == 200, queue.text
    rows = [r for r in queue.json()["items"] if r["process"] == data.onboarding]
    failed = {**rows[0], "status": "failed", "last_error": HOSTILE}
    page.route(
        "**/v1/automation/queue*",
        lambda route: _json(route, {"items": [failed], "next_cursor": None}),
    )
    sign_in(page, base, data.admin, "/console/automations")
    expect(page.locator("#global-scheduled")).to_contain_text("start_review")
    expect(page.locator("#global-queue")).to_contain_text("failed")
    expect(page.locator("#global-queue")).to_contain_text("window.__xss")
    assert page.evaluate("window.__xss") is None


def test_a_new_event_appears_live(page: Page, stack: tuple[str, Seeded, Harness]) -> None:
    """A stream hint for the shown process re-reads it: the new event is on the page
    without a reload (the stream is the only trigger: the page polls only without one)."""
    base, data, harness = stack
    process_id = data.plain[1]
    ready = False

    def stream(route: Route) -> None:
        body = ": nothing yet\n\n"  # the stream ends; the page reconnects a second later
        if ready:
            # The event is appended as the hint about it goes out, as the server would.
            clerk = harness.keys["clerk"]
            head = _process(harness, process_id)["head"]
            accepted = harness.accept(
                sign(harness.envelope(clerk, process_id, "note", {"n": 1}, prev=head), clerk)
            )
            hint = {"process": process_id, "seq": accepted["seq"], "hash": accepted["hash"],
                    "action": "note", "actor_id": "clerk"}  # fmt: skip
            body = f"id: 1\nevent: event\ndata: {json.dumps(hint)}\n\n"
        route.fulfill(status=200, content_type="text/event-stream", body=body)
        if ready:
            page.unroute("**/v1/stream")  # later reconnections find no stream

    page.route("**/v1/stream", stream)
    sign_in(page, base, data.admin, "/console/processes/" + process_id)
    events = page.locator("#events li.event")
    expect(events).to_have_count(1)
    ready = True
    expect(events).to_have_count(2)
    expect(events.nth(1).locator(".action")).to_have_text("note")


def test_a_running_run_can_be_cancelled_and_a_refusal_is_said(
    page: Page, stack: tuple[str, Seeded, Harness]
) -> None:
    """The POSTs are answered here, so the shared run stays as it is for other tests."""
    base, data, _ = stack
    asked: list[str] = []
    answers = iter([
        (403, {"error": {"code": "forbidden", "message": f"needs runs:execute {HOSTILE}"}}),
        (200, {"id": data.run_id, "status": "failed"}),
    ])  # fmt: skip

    def cancel(route: Route) -> None:
        asked.append(route.request.method)
        status, body = next(answers)
        _json(route, body, status)

    page.route(f"**/v1/runs/{data.run_id}/cancel", cancel)
    sign_in(page, base, data.admin, f"/console/runs/{data.run_id}")
    expect(page.locator("#run-retry")).to_have_count(0)  # a running run: cancel only
    page.click("#run-cancel")
    expect(page.locator("#run-action-error")).to_contain_text("Cancel run refused: forbidden")
    expect(page.locator("#run-action-error")).to_contain_text("window.__xss")  # as text
    page.click("#run-cancel")
    expect(page.locator("#run-status")).to_be_visible()  # the page read the run again
    assert asked == ["POST", "POST"]
    assert page.evaluate("window.__xss") is None


def test_a_failed_run_can_be_retried_as_a_new_run(
    page: Page, stack: tuple[str, Seeded, Harness]
) -> None:
    base, data, harness = stack
    run = harness.http.get(f"/v1/runs/{data.run_id}", headers=_auth(harness)).json()
    page.route(
        f"**/v1/runs/{data.run_id}",
        lambda route: _json(route, {**run, "status": "failed", "error": "step b failed"}),
    )
    page.route(
        f"**/v1/runs/{data.run_id}/retry",
        lambda route: _json(route, {**run, "id": "retried-run", "status": "pending"}, 201),
    )
    sign_in(page, base, data.admin, f"/console/runs/{data.run_id}")
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator("#run-cancel")).to_have_count(0)
    page.click("#run-retry")
    expect(page).to_have_url(base + "/console/runs/retried-run")
