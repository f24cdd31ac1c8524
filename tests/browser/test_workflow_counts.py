"""The workflow page counts processes on its diagram: a badge per state with how many are
in it (under any revision), hovering it names each revision's, and a table per revision."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from tests.browser.test_console import sign_in
from tests.browser.world import Seeded
from tests.integration.apikit import Harness, new_id

TALLIED = "tests/tallied"
UNTALLIED = "tests/untallied"
FIRST: JsonObject = {
    "dsl": 2,
    "states": ["open", "approved", "parked"],
    "roles": ["clerk"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "approve": {"role": "clerk", "from": "open", "to": "approved"},
        "park": {"role": "clerk", "from": "open", "to": "parked"},
    },
}
# Revision 2 drops `parked` (a process of revision 1 stays there) and adds `held`.
SECOND: JsonObject = {
    "dsl": 2,
    "states": ["open", "approved", "held"],
    "roles": ["clerk"],
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "approve": {"role": "clerk", "from": "open", "to": "approved"},
        "hold": {"role": "clerk", "from": "open", "to": "held"},
    },
}


def _open(h: Harness) -> tuple[str, str]:
    clerk, process = h.keys["clerk"], new_id("tally")
    body = h.accept(sign(h.envelope(clerk, process, "open", workflow=TALLIED), clerk))
    return process, str(body["hash"])


def _take(h: Harness, process: tuple[str, str], action: str) -> None:
    clerk = h.keys["clerk"]
    envelope = h.envelope(clerk, process[0], action, prev=process[1], workflow=TALLIED)
    h.accept(sign(envelope, clerk))


@pytest.fixture(scope="module")
def tallied(stack: tuple[str, Seeded, Harness]) -> tuple[str, str]:
    """(base URL, admin token), with TALLIED run under two revisions: revision 2 has
    2 open and 1 held, revision 1 has 1 approved and 1 parked."""
    base, data, h = stack
    h.deploy(TALLIED, FIRST)
    first = [_open(h) for _ in range(3)]
    _take(h, first[0], "approve")
    _take(h, first[1], "park")
    h.deploy(TALLIED, SECOND)
    _open(h)
    _open(h)
    _take(h, first[2], "hold")
    h.deploy(UNTALLIED, FIRST)
    return base, data.admin


def test_each_state_of_the_diagram_wears_its_count(page: Page, tallied: tuple[str, str]) -> None:
    base, admin = tallied
    sign_in(page, base, admin, "/console/workflows/" + TALLIED)
    for state, count in (("open", "2"), ("approved", "1"), ("held", "1")):
        badge = page.locator(f'#diagram g.state[data-state="{state}"] g.count')
        expect(badge).to_have_text(count)
        expect(badge).to_have_attribute("data-count", count)
    # Hovering a state names its processes by revision.
    title = page.locator('#diagram g.state[data-state="approved"] > title')
    expect(title).to_have_text("1 process is in approved: 1 under revision 1")
    open_title = page.locator('#diagram g.state[data-state="open"] > title')
    expect(open_title).to_have_text("2 processes are in open: 2 under revision 2")
    # The badge sits inside its box, clear of the name.
    for state in ("open", "approved", "held"):
        box = page.locator(f'#diagram g.state[data-state="{state}"]')
        outer = box.locator("> rect").bounding_box()
        inner = box.locator("g.count rect").bounding_box()
        name = box.locator("> text").bounding_box()
        assert outer is not None
        assert inner is not None
        assert name is not None
        assert outer["x"] < inner["x"]
        assert inner["x"] + inner["width"] < outer["x"] + outer["width"]
        assert name["x"] + name["width"] < inner["x"]


def test_the_counts_are_tabled_per_revision(page: Page, tallied: tuple[str, str]) -> None:
    base, admin = tallied
    sign_in(page, base, admin, "/console/workflows/" + TALLIED)
    counts = page.locator("#state-counts")
    expect(counts.locator("thead th")).to_have_text(
        ["State", "Revision 2", "Revision 1", "All revisions"]
    )
    rows = {
        "open": ["open", "2", "0", "2"],
        "approved": ["approved", "0", "1", "1"],
        "held": ["held", "1", "0", "1"],
        "parked": ["parked not in the current revision", "0", "1", "1"],
    }
    for state, cells in rows.items():
        expect(counts.locator(f'tbody tr[data-state="{state}"] td')).to_have_text(cells)
    expect(counts.locator("tbody tr.total td")).to_have_text(["All states", "3", "2", "5"])
    # `parked` is no state of the current revision: the diagram has no box for it.
    expect(page.locator('#diagram g.state[data-state="parked"]')).to_have_count(0)


def test_a_workflow_without_processes_counts_zero(page: Page, tallied: tuple[str, str]) -> None:
    base, admin = tallied
    sign_in(page, base, admin, "/console/workflows/" + UNTALLIED)
    expect(page.locator("#diagram g.state g.count.none")).to_have_count(3)
    expect(page.locator("#diagram g.state g.count")).to_have_text(["0", "0", "0"])
    expect(page.locator("#state-counts")).to_have_text("No process runs this workflow yet.")


def test_without_its_counts_the_diagram_is_still_drawn(
    page: Page, tallied: tuple[str, str]
) -> None:
    base, admin = tallied
    page.route(
        "**/v1/workflows/" + TALLIED + "/states",
        lambda route: route.fulfill(
            status=500,
            content_type="application/json",
            body='{"error": {"code": "internal", "message": "counts are down"}}',
        ),
    )
    sign_in(page, base, admin, "/console/workflows/" + TALLIED)
    expect(page.locator("#diagram g.state")).to_have_count(3)
    expect(page.locator("#diagram g.count")).to_have_count(0)
    expect(page.locator("#diagram-card p.error")).to_contain_text("counts are down")
