"""Signing a governed action in the browser: the Act section of a process page.

The page reads a real key file (`charter keys new`'s format) with FileReader, signs the
RFC 8785 bytes of the envelope with WebCrypto's Ed25519 and POSTs it; the engine checks
the signature like any other, and the verify API re-checks the stored chain. The key
must never appear in a request. A browser without Ed25519 gets the `charter submit`
command instead. The JavaScript canonicalizer is checked against Python's rfc8785.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from playwright.sync_api import FilePayload, Page, Request, Route, expect

from charter.core import ijson
from charter.core.ed25519 import SecretKey, write_secret_key_file
from charter.core.envelope import sign
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from tests.browser.test_console import sign_in
from tests.browser.world import HOSTILE
from tests.integration.apikit import Harness, bearer, make_harness, new_id
from tests.integration.liveserver import live_server

FORMS = "tests/forms"
# An input schema with a field of every kind the form generates.
FORMS_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "closed"],
    "roles": ["clerk", "boss", "AUTOMATION"],
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open"},
        "record": {
            "type": "update",
            "role": "clerk",
            "from": "open",
            "input": {
                "type": "object",
                "required": ["title", "count"],
                "additionalProperties": False,
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "count": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "urgent": {"type": "boolean"},
                    "colour": {"enum": ["red", "green"]},
                    "details": {"type": "object"},
                },
            },
            "mutate": {"$set": {"last": "{{ input.title }}"}},
        },
        "close": {"role": "boss", "from": "open", "to": "closed"},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
    },
}


HOSTILE_FORMS = "tests/hostile-forms"
# Markup in every part of an input schema the form shows: property names, a description,
# enum values, the state and action names cannot hold it (their grammar forbids it).
HOSTILE_FORMS_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk"],
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open"},
        "say": {
            "type": "update",
            "role": "clerk",
            "from": "open",
            "input": {
                "type": "object",
                "required": [HOSTILE],
                "properties": {
                    HOSTILE: {"type": "string", "description": HOSTILE, "format": HOSTILE},
                    "choice": {"enum": [HOSTILE, {"x": HOSTILE}]},
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Site:
    base: str
    harness: Harness
    clerk_key: Path
    boss_key: Path


@pytest.fixture(scope="module")
def site(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    harness = make_harness(database)
    harness.deploy(FORMS, FORMS_DEFINITION)
    harness.deploy(HOSTILE_FORMS, HOSTILE_FORMS_DEFINITION)
    folder = tmp_path_factory.mktemp("keys")
    paths = {}
    for who in ("clerk", "boss"):
        paths[who] = folder / f"{who}.key"
        write_secret_key_file(paths[who], harness.keys[who])
    with live_server(harness.http.app) as base:
        yield Site(base, harness, paths["clerk"], paths["boss"])


def open_forms_process(site: Site, workflow: str = FORMS) -> str:
    process = new_id("forms")
    clerk = site.harness.keys["clerk"]
    envelope = site.harness.envelope(clerk, process, "create", workflow=workflow)
    site.harness.accept(sign(envelope, clerk))
    return process


def on_process_page(page: Page, site: Site, process: str) -> None:
    # The server runs on a fake clock; the browser signs with its own time, which must
    # be within the allowed skew of the server's.
    page.clock.set_fixed_time(site.harness.clock.now())
    sign_in(page, site.base, site.harness.admin, "/console/processes/" + process)
    expect(page.locator("#act-form")).to_be_visible()


def recorded_requests(page: Page) -> list[Request]:
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    return requests


def assert_key_never_sent(requests: list[Request], *keys: SecretKey) -> None:
    assert requests, "no request was recorded"
    for request in requests:
        seen = request.url + json.dumps(request.headers) + (request.post_data or "")
        for key in keys:
            assert key.hex() not in seen.lower(), f"the secret key went out in {request.url}"


def stored_events(site: Site, process: str) -> list[Any]:
    response = site.harness.http.get(
        f"/v1/processes/{process}/events", headers=bearer(site.harness.admin)
    )
    assert response.status_code == 200, response.text
    events: list[Any] = response.json()["items"]
    return events


def verified(site: Site, process: str) -> Any:
    response = site.harness.http.get(
        f"/v1/processes/{process}/verify", headers=bearer(site.harness.admin)
    )
    assert response.status_code == 200, response.text
    return response.json()


def fill_record(page: Page) -> None:
    page.select_option("#action", "record")
    form = page.locator("#input-fields")
    form.get_by_label("title").fill("Zoë\u2019s <b>report</b> 😀")
    form.get_by_label("count").fill("42")
    form.get_by_label("ratio").fill("0.1")
    form.get_by_label("urgent").select_option("true")
    form.get_by_label("colour").select_option(label='"green"')
    form.get_by_label("details").fill('{"z": [1, 2.5e-7], "a": {"b": null}}')


RECORDED: JsonObject = {
    "title": "Zoë\u2019s <b>report</b> 😀",
    "count": 42,
    "ratio": 0.1,
    "urgent": True,
    "colour": "green",
    "details": {"z": [1, 2.5e-7], "a": {"b": None}},
}


def test_an_action_signed_in_the_browser_is_accepted_and_verifies(page: Page, site: Site) -> None:
    process = open_forms_process(site)
    requests = recorded_requests(page)
    on_process_page(page, site, process)
    # Only what a person may do from `open`: not create, not the automation's tick.
    options = page.locator("#action option")
    expect(options).to_have_count(2)
    assert sorted(options.evaluate_all("(all) => all.map((o) => o.value)")) == ["close", "record"]

    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    expect(page.locator("#key-status")).to_contain_text("loaded")
    fill_record(page)
    page.click("#sign-submit")

    expect(page.locator("#accepted")).to_contain_text("Accepted: record as event #2")
    expect(page.locator("#events li.event")).to_have_count(2)  # the timeline shows it
    expect(page.locator("#events li.event").nth(1).locator(".action")).to_have_text("record")

    events = stored_events(site, process)
    assert len(events) == 2
    envelope = events[1]["envelope"]
    assert envelope["input"] == RECORDED
    assert envelope["actor"] == site.harness.keys["clerk"].public_key_hex
    assert envelope["prev"] == events[0]["hash"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", envelope["at"])
    report = verified(site, process)
    assert report["ok"] is True, report
    assert report["events"] == 2
    assert_key_never_sent(requests, site.harness.keys["clerk"], site.harness.keys["boss"])
    stored = page.evaluate("JSON.stringify([{...sessionStorage}, {...localStorage}])")
    assert site.harness.keys["clerk"].hex() not in stored
    assert any(r.method == "POST" and r.url.endswith("/v1/events") for r in requests)


def test_a_verdict_the_chain_outgrew_is_cleared(page: Page, site: Site) -> None:
    process = open_forms_process(site)
    on_process_page(page, site, process)
    page.click("#verify")
    expect(page.locator("#verdict")).to_contain_text("Chain verified: 1 event;")
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    fill_record(page)
    page.click("#sign-submit")
    expect(page.locator("#events li.event")).to_have_count(2)
    expect(page.locator("#verdict")).to_have_text("")  # it said nothing of event 2
    page.click("#verify")
    expect(page.locator("#verdict")).to_contain_text("Chain verified: 2 events;")


def test_screenshot_of_a_signed_action(page: Page, site: Site, tmp_path: Path) -> None:
    """With CHARTER_CONSOLE_SCREENSHOTS=DIR, the Act section after an accepted action is
    saved there as sign.png (docs/console/ holds the committed one)."""
    process = open_forms_process(site)
    on_process_page(page, site, process)
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    fill_record(page)
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_be_visible()
    expect(page.locator("#events li.event")).to_have_count(2)
    folder = Path(os.environ.get("CHARTER_CONSOLE_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    page.locator("#act").screenshot(path=str(folder / "sign.png"))


def test_a_moved_head_is_read_again_and_signed_once_more(page: Page, site: Site) -> None:
    process = open_forms_process(site)
    on_process_page(page, site, process)
    clerk = site.harness.keys["clerk"]
    raced: list[str] = []

    def race(route: Route) -> None:
        # Someone else extends the chain between the page's head read and its POST.
        if not raced:
            events = stored_events(site, process)
            envelope = site.harness.envelope(
                clerk, process, "record", {"title": "first", "count": 1},
                prev=events[-1]["hash"], workflow=FORMS,
            )  # fmt: skip
            raced.append(str(site.harness.accept(sign(envelope, clerk))["hash"]))
        route.continue_()

    page.route("**/v1/events", race)
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    fill_record(page)
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_contain_text("as event #3")
    expect(page.locator("#accepted")).to_contain_text("signed again on the new head")
    events = stored_events(site, process)
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert events[2]["envelope"]["prev"] == raced[0]
    assert verified(site, process)["ok"] is True


def test_a_refused_action_shows_its_code(page: Page, site: Site) -> None:
    process = open_forms_process(site)
    on_process_page(page, site, process)
    page.select_option("#actor", "boss")
    page.set_input_files("#key-file", site.boss_key)
    expect(page.locator("#key-status")).to_contain_text("loaded")
    fill_record(page)  # `record` is the clerk's
    page.click("#sign-submit")
    expect(page.locator("#refused")).to_contain_text("Refused: forbidden_role")
    assert len(stored_events(site, process)) == 1


def test_the_form_checks_input_and_the_key_before_signing(page: Page, site: Site) -> None:
    process = open_forms_process(site)
    on_process_page(page, site, process)
    posts: list[Request] = []
    page.on("request", lambda r: posts.append(r) if r.method == "POST" else None)
    page.select_option("#action", "record")
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.boss_key)  # the wrong actor's key
    page.locator("#input-fields").get_by_label("count").fill("4.5")
    page.locator("#input-fields").get_by_label("details").fill("{not json")
    page.click("#sign-submit")
    errors = page.locator("#form-errors")
    expect(errors).to_contain_text("title: required")
    expect(errors).to_contain_text("count: must be an integer")
    expect(errors).to_contain_text("details: not valid JSON")
    page.locator("#input-fields").get_by_label("title").fill("t")
    page.locator("#input-fields").get_by_label("count").fill("4")
    page.locator("#input-fields").get_by_label("details").fill("")
    page.click("#sign-submit")
    expect(page.locator("#act-result")).to_contain_text("not clerk's current key")
    # A file that is not a key is refused without repeating its content.
    not_a_key: FilePayload = {"name": "x.key", "mimeType": "text/plain", "buffer": b"secret-ish"}
    page.set_input_files("#key-file", files=[not_a_key])
    expect(page.locator("#key-status")).to_contain_text("does not hold a secret key")
    expect(page.locator("#key-status")).not_to_contain_text("secret-ish")
    assert posts == []


def test_markup_in_an_input_schema_is_shown_as_text(page: Page, site: Site) -> None:
    process = open_forms_process(site, HOSTILE_FORMS)
    on_process_page(page, site, process)
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    fields = page.locator("#input-fields")
    expect(fields.locator("label").first).to_have_text(HOSTILE + " *")
    expect(fields).to_contain_text(HOSTILE)  # the description, verbatim
    assert fields.locator("img, script, svg").count() == 0
    fields.get_by_label(HOSTILE).fill(HOSTILE)
    fields.get_by_label("choice").select_option(
        label=json.dumps({"x": HOSTILE}, separators=(",", ":"))
    )
    fields.get_by_label("Other input members").fill('{"__proto__": {"polluted": 1}}')
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_be_visible()
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("({}).polluted") is None
    assert stored_events(site, process)[1]["envelope"]["input"] == {
        HOSTILE: HOSTILE,
        "choice": {"x": HOSTILE},
        "__proto__": {"polluted": 1},
    }
    assert verified(site, process)["ok"] is True


# Makes WebCrypto refuse Ed25519 keys, as a browser without the algorithm does.
NO_ED25519 = """
const importKey = SubtleCrypto.prototype.importKey;
SubtleCrypto.prototype.importKey = function (format, data, algorithm, ...rest) {
  const name = typeof algorithm === "string" ? algorithm : algorithm && algorithm.name;
  if (String(name).toLowerCase() === "ed25519") {
    return Promise.reject(new DOMException("Unrecognized algorithm name", "NotSupportedError"));
  }
  return importKey.call(this, format, data, algorithm, ...rest);
};
"""


def test_without_ed25519_the_page_offers_the_cli_command(page: Page, site: Site) -> None:
    process = open_forms_process(site)
    page.add_init_script(NO_ED25519)
    on_process_page(page, site, process)
    expect(page.locator("#sign-unsupported")).to_contain_text("does not support Ed25519")
    expect(page.locator("#sign-submit")).to_have_text("Show the CLI command")
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    fill_record(page)
    page.click("#sign-submit")
    command = page.locator("#cli-command")
    expect(command).to_be_visible()
    words = shlex.split(command.inner_text().replace("\\\n", " "))
    assert words[:2] == ["charter", "submit"]
    options = dict(zip(words[2::2], words[3::2], strict=True))
    assert options == {
        "--key-file": "clerk.key",
        "--process": process,
        "--workflow": FORMS,
        "--action": "record",
        "--input": options["--input"],
    }
    assert json.loads(options["--input"]) == RECORDED
    assert len(stored_events(site, process)) == 1


# JSON texts whose canonical forms are easy to get wrong: number forms (exponents,
# shortest round trip, -0), escapes and non-ASCII, and key order by UTF-16 code units
# (RFC 8785 §3.2.3's example keys among them).
TRICKY = [
    "1e21",
    "1e-7",
    "0.1",
    "-0",
    "-0.0",
    "123456789012345.67",
    "9007199254740991",
    "-9007199254740991",
    "5e-324",
    "1.7976931348623157e308",
    "0.000001",
    "333333333.33333329",
    "1E+30",
    '"\\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"',
    '"\\u2028\\u2029 \\u007f \\u0000\\u001f <\\/script>"',
    '"😀 Zoë ﬡ"',
    '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",'
    '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control",'
    '"\\u00f6":"Latin Small Letter O With Diaeresis"}',
    '{"b": [1, {"z": true, "a": false, "A": null}], "a": {"y": {"x": [[], {}]}}, "": 0}',
    '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],'
    '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
]
# Texts the server refuses as input, which the canonicalizer must refuse rather than sign.
REFUSED = ["9007199254740992", "1e20", '"\\ud800"', '{"\\udc00": 1}']


def test_the_javascript_canonicalizer_matches_rfc8785(page: Page, site: Site) -> None:
    sign_in(page, site.base, site.harness.admin)
    results = page.evaluate(
        """async (texts) => {
          const main = document.querySelector("script[type=module]").src;
          const jcs = await import(new URL("jcs.js", main));
          return texts.map((text) => {
            try {
              const value = JSON.parse(text);
              const bytes = jcs.canonicalBytes(value);
              return { text: jcs.canonicalize(value), bytes: Array.from(bytes) };
            } catch (error) {
              return { error: error.name + ": " + error.message };
            }
          });
        }""",
        TRICKY + REFUSED,
    )
    for text, result in zip(TRICKY, results[: len(TRICKY)], strict=True):
        expected = rfc8785.dumps(json.loads(text))
        assert "error" not in result, (text, result)
        assert bytes(result["bytes"]) == expected, text
        assert result["text"].encode("utf-8") == expected, text
    for text, result in zip(REFUSED, results[len(TRICKY) :], strict=True):
        assert result.get("error", "").startswith("CanonicalError"), (text, result)
        with pytest.raises(Malformed):
            ijson.loads(('{"input": ' + text + "}").encode())
