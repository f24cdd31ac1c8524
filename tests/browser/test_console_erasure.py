"""A process whose personal values were erased by `charter:erase`, seen in the console.

The name and birth date went in as disclosures beside a v2 envelope, `mutate` copied
them (and a greeting built from the name) into the data, and a `charter:erase` signed
here took them. The console must then show them nowhere: not in any page's DOM, not in
any response the pages fetched (the export included), while the data says which fields
were erased, the erase event reads as one (basis and request), and the chain verifies.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Response, expect

from charter.core.disclosures import digests, split_personal
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from tests.browser.test_console import sign_in
from tests.integration.apikit import Harness, bearer, make_harness, new_id
from tests.integration.liveserver import live_server

PATH = "tests/console-erasure"
DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["applied"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a", "art17-1d"]},
    "actions": {
        "apply": {
            "type": "create",
            "role": "clerk",
            "to": "applied",
            "input": {
                "type": "object",
                "required": ["name", "dob", "country"],
                "properties": {
                    "name": {"type": "string", "x-personal": True},
                    "dob": {"type": "string", "x-personal": True},
                    "country": {"type": "string"},
                },
            },
            "mutate": {
                "$set": {
                    "name": "{{ input.name }}",
                    "greeting": "Dear {{ input.name }}",
                    "dob": "{{ input.dob }}",
                    "country": "{{ input.country }}",
                },
                "$push": {"names": "{{ input.name }}"},
            },
        },
        "note": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {"type": "object", "properties": {"text": {"type": "string"}}},
            "mutate": {"$set": {"note": "{{ input.text }}"}},
        },
    },
}
PERSONAL = ("/name", "/dob")
REQUEST = "DSR-2026-0042"


@dataclass(frozen=True)
class Site:
    base: str
    harness: Harness


@pytest.fixture(scope="module")
def site(database: Database) -> Iterator[Site]:
    harness = make_harness(database)
    harness.deploy(PATH, DEFINITION)
    harness.actor("dpo", "dpo")
    with live_server(harness.http.app) as base:
        yield Site(base, harness)


@dataclass
class Person:
    """One process with a random name and birth date, driven through the API (signed
    as tests/integration/test_erasure.py signs them)."""

    h: Harness
    id: str = field(default_factory=lambda: new_id("erasure"))
    # Random, so that finding either anywhere can only mean this process's value.
    name: str = field(default_factory=lambda: "Zelda Q" + secrets.token_hex(6))
    dob: str = field(
        default_factory=lambda: (
            f"19{secrets.randbelow(90) + 10}-0{secrets.randbelow(9) + 1}-1{secrets.randbelow(10)}"
        )
    )
    hashes: list[str] = field(default_factory=list)

    def act(self, actor: str, action: str, input_: JsonObject | None = None) -> Any:
        key = self.h.keys[actor]
        clear, disclosed = split_personal(input_ or {}, PERSONAL if action == "apply" else ())
        prev = self.hashes[-1] if self.hashes else None
        envelope = self.h.envelope(key, self.id, action, clear, prev=prev, workflow=PATH)
        if disclosed:
            envelope = replace(envelope, v=2, sd=digests(disclosed))
        answer: Any = self.h.accept(sign(envelope, key, [d.text for d in disclosed]))
        self.hashes.append(str(answer["hash"]))
        return answer

    def applied(self) -> Person:
        self.act("clerk", "apply", {"name": self.name, "dob": self.dob, "country": "GB"})
        self.act("clerk", "note", {"text": "called back"})
        return self

    def erase(self, basis: str = "art17-1d", **scope: Any) -> Any:
        request: JsonObject = {"basis": basis, "request": REQUEST}
        if scope:
            request["scope"] = scope
        return self.act("dpo", "charter:erase", request)

    def erased_values(self) -> tuple[str, ...]:
        return (self.name, self.name.split()[-1], self.dob)


def recorded_responses(page: Page) -> list[Response]:
    responses: list[Response] = []
    page.on("response", lambda response: responses.append(response))
    return responses


def bodies(responses: list[Response]) -> dict[str, str]:
    """Each recorded response's body by URL (several of one URL joined). The event
    stream never ends, so its body is not read (it carries only hints: ids and seqs)."""
    read: dict[str, str] = {}
    for response in responses:
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream") or 300 <= response.status < 400:
            continue
        text = response.body().decode("utf-8", "replace")
        read[response.url] = read.get(response.url, "") + text
    return read


def assert_nowhere(page: Page, responses: list[Response], person: Person) -> None:
    """None of `person`'s erased values is in the page (text, markup, attributes) nor in
    any response it fetched."""
    shown = page.evaluate("document.documentElement.outerHTML + document.body.textContent")
    fetched = bodies(responses)
    for value in person.erased_values():
        assert value not in shown, f"{value!r} is in the page"
        leaks = [url for url, body in fetched.items() if value in body]
        assert not leaks, f"{value!r} was fetched from {leaks}"


def test_erased_values_are_shown_nowhere_and_the_chain_verifies(page: Page, site: Site) -> None:
    person = Person(site.harness).applied()
    # Before the erasure the page shows what mutate copied into the data, and it came in
    # a response: the checks below would see it.
    before = recorded_responses(page)
    sign_in(page, site.base, site.harness.admin, "/console/processes/" + person.id)
    expect(page.locator("#data")).to_contain_text(person.name)
    expect(page.locator("#data .erased")).to_have_count(0)
    assert [url for url, body in bodies(before).items() if person.name in body] == [
        f"{site.base}/v1/processes/{person.id}"
    ]

    erased = person.erase()
    assert erased["process"]["data"]["name"] == {"erased": True}
    # The open page follows the erasure live.
    expect(page.locator("#events li.event")).to_have_count(3)
    expect(page.locator("#data .tag.erased")).to_have_count(4)
    expect(page.locator("#data")).not_to_contain_text(person.name)
    # Leaving it first ends its fetches, so every response recorded from here on is one
    # of the pages below (and its body can still be read: all come from one document).
    page.goto("about:blank")
    responses = recorded_responses(page)
    page.goto(site.base + "/console/")  # the token is still in this tab's session
    expect(page.locator("h1")).to_have_text("Overview")

    page.locator("#nav").get_by_role("link", name="Processes").click()
    listed = page.locator("#results").get_by_role("link", name=person.id)
    expect(listed).to_be_visible()
    assert_nowhere(page, responses, person)

    listed.click()
    events = page.locator("#events li.event")
    expect(events).to_have_count(3)
    expect(page.locator("#state")).to_have_text("applied")

    # The data: each erased field (and what was built from one) a marker, the rest as is.
    data = page.locator("#data")
    markers = data.locator(".tag.erased")
    expect(markers).to_have_count(4)  # name, greeting, dob, names[0]
    expect(markers).to_have_text(["erased"] * 4)
    expect(data).to_contain_text('"name": erased')
    expect(data).to_contain_text('"greeting": erased')
    expect(data).to_contain_text('"country": "GB"')
    expect(data).to_contain_text('"note": "called back"')
    expect(data).not_to_contain_text('"erased": true')

    # The erase event reads as one: what it is, on what basis, under which request.
    erase = events.nth(2)
    expect(erase.locator(".action")).to_have_text("charter:erase")
    expect(erase.locator(".tag")).to_have_text("erasure")
    expect(erase.locator(".actor")).to_have_text("dpo (dpo)")
    expect(erase.locator(".cause")).to_have_text(
        f"erased personal values on basis art17-1d under request {REQUEST}"
    )
    for details in page.locator("#events details").all():
        details.locator("summary").click()  # every input and digest list open

    # Verification: every event still checks, and the verdict says what was erased.
    page.click("#verify")
    verdict = page.locator("#verdict")
    expect(verdict).to_contain_text("Chain verified: 3 events;")
    expect(verdict).to_contain_text("2 personal values erased by charter:erase")
    expect(page.locator("#events li.verified")).to_have_count(3)
    expect(events.nth(0).locator(".erasures p")).to_have_text(
        "erased by event #3 (art17-1d): /dob, /name"
    )
    report = site.harness.http.get(
        f"/v1/processes/{person.id}/verify", headers=bearer(site.harness.admin)
    ).json()
    assert report["ok"] is True, report

    # The export holds the chain and none of the values (the admin token may read
    # personal values: those still kept would be in it).
    with page.expect_download() as download:
        page.click("#export")
    bundle = Path(download.value.path()).read_text()
    assert [e["seq"] for e in json.loads(bundle)["events"]] == [1, 2, 3]
    for value in person.erased_values():
        assert value not in bundle

    page.locator("#summary").get_by_role("link", name=PATH).click()
    expect(page.locator("h1")).to_contain_text(PATH)
    expect(page.locator("svg.diagram")).to_be_visible()

    paths = {r.url.split("?")[0].removeprefix(site.base) for r in responses}
    for path in ("/v1/processes", f"/v1/processes/{person.id}",
                 f"/v1/processes/{person.id}/events", f"/v1/processes/{person.id}/verify",
                 f"/v1/processes/{person.id}/export"):  # fmt: skip
        assert path in paths, f"the pages never read {path}"
    assert not [r.url for r in responses if "disclosures=" in r.url]
    assert_nowhere(page, responses, person)


def test_an_erasure_of_one_field_shows_its_scope_and_keeps_the_other(
    page: Page, site: Site
) -> None:
    person = Person(site.harness).applied()
    person.erase("art17-1a", pointers=["/name"])
    person.erase("art17-1d", events=person.hashes[:1])  # then the rest
    kept = Person(site.harness).applied()
    kept.erase("art17-1a", pointers=["/name"])
    responses = recorded_responses(page)
    sign_in(page, site.base, site.harness.admin, "/console/processes/" + kept.id)

    events = page.locator("#events li.event")
    expect(events).to_have_count(3)
    expect(events.nth(2).locator(".cause")).to_have_text(
        f"erased personal values on basis art17-1a under request {REQUEST}, scope: pointers /name"
    )
    data = page.locator("#data")
    expect(data.locator(".tag.erased")).to_have_count(3)  # name, greeting, names[0]
    expect(data).to_contain_text(f'"dob": "{kept.dob}"')  # not erased: still shown
    page.click("#verify")
    expect(page.locator("#verdict")).to_contain_text("1 personal value erased by charter:erase")
    expect(events.nth(0).locator(".erasures p")).to_have_text(
        "erased by event #3 (art17-1a): /name"
    )
    fetched = "".join(bodies(responses).values())
    assert kept.name not in fetched
    assert kept.name not in page.content()

    # Two erasures of one process: each event names its own scope, each value its eraser.
    page.goto(site.base + "/console/processes/" + person.id)
    events = page.locator("#events li.event")
    expect(events).to_have_count(4)
    expect(events.nth(3).locator(".cause")).to_have_text(
        f"erased personal values on basis art17-1d under request {REQUEST}, scope: events #1"
    )
    expect(events.nth(3).locator(".cause a")).to_have_attribute("href", "#seq-1")
    page.click("#verify")
    expect(page.locator("#verdict")).to_contain_text("2 personal values erased by charter:erase")
    expect(events.nth(0).locator(".erasures p")).to_have_text(
        ["erased by event #3 (art17-1a): /name", "erased by event #4 (art17-1d): /dob"]
    )
    assert person.name not in page.content()
    assert person.dob not in page.content()
