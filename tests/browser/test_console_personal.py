"""Personal fields signed in the browser: the Act section builds a v2 envelope.

For an action whose input marks fields `x-personal`, the page takes them out of the
signed input, commits to each in `sd` by the digest of a salted disclosure and sends
the disclosures beside the signature; the engine keeps them in charter.event_disclosures
and verification checks them. Other actions stay v1. The browser's disclosures are
checked byte for byte against charter.core.disclosures, golden vector first.

The console acts on an existing process only (create actions are not offered), so the
personal fields here are on `register`, the first action after the create.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, Request, expect

from charter.audit.verify_stored import verify_process
from charter.core.disclosures import is_salt, make_disclosure, parse_disclosure, split_personal
from charter.core.ed25519 import write_secret_key_file
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Database, connect
from tests.browser.test_console import sign_in
from tests.browser.test_console_sign import (
    NO_ED25519,
    Site,
    assert_key_never_sent,
    on_process_page,
    open_forms_process,
    recorded_requests,
    stored_events,
    verified,
)
from tests.integration.apikit import bearer, make_harness
from tests.integration.liveserver import live_server

PEOPLE = "tests/people"
PEOPLE_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "registered"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open"},
        "register": {
            "role": "clerk",
            "from": "open",
            "to": "registered",
            "input": {
                "type": "object",
                "required": ["name", "dob", "country"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1, "x-personal": True},
                    "dob": {"type": "string", "format": "date", "x-personal": True},
                    "country": {"type": "string"},
                },
            },
            "mutate": {
                "$set": {
                    "name": "{{ input.name }}",
                    "dob": "{{ input.dob }}",
                    "country": "{{ input.country }}",
                }
            },
        },
        # A personal field inside an object, entered in the form's JSON field.
        "move": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {
                "type": "object",
                "properties": {
                    "address": {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string", "x-personal": True},
                            "city": {"type": "string"},
                        },
                    }
                },
            },
        },
        "note": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    },
}
GOLDEN_SALT = "2GLC42sKQveCfGfryNRN9w"
GOLDEN_TEXT = '["2GLC42sKQveCfGfryNRN9w","/name","Ada Lovelace"]'
GOLDEN_DIGEST = "ed7723ea6241cd3184601d640ce821b623a5642c2e885c3da6cff068def57051"


@pytest.fixture(scope="module")
def site(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    harness = make_harness(database)
    harness.deploy(PEOPLE, PEOPLE_DEFINITION)
    folder = tmp_path_factory.mktemp("keys")
    paths = {}
    for who in ("clerk", "boss"):
        paths[who] = folder / f"{who}.key"
        write_secret_key_file(paths[who], harness.keys[who])
    with live_server(harness.http.app) as base:
        yield Site(base, harness, paths["clerk"], paths["boss"])


def import_disclosures(page: Page, site: Site, body: str, arg: Any = None) -> Any:
    """Run `body` (an async function of `d`, the disclosures.js module, and `arg`) in the
    console page."""
    sign_in(page, site.base, site.harness.admin)
    script = f"""async (arg) => {{
      const main = document.querySelector("script[type=module]").src;
      const d = await import(new URL("disclosures.js", main));
      return await ({body})(d, arg);
    }}"""
    return page.evaluate(script, arg)


def test_the_golden_vector_digests_alike_in_the_browser(page: Page, site: Site) -> None:
    result = import_disclosures(
        page,
        site,
        "async (d, salt) => d.makeDisclosure('/name', 'Ada Lovelace', salt)",
        GOLDEN_SALT,
    )
    assert result["text"] == GOLDEN_TEXT
    assert result["digest"] == GOLDEN_DIGEST
    python = make_disclosure("/name", "Ada Lovelace", salt=GOLDEN_SALT)
    assert (python.text, python.digest) == (GOLDEN_TEXT, GOLDEN_DIGEST)


# Values and pointers whose disclosure texts are easy to get wrong: escapes in the
# pointer, non-ASCII and line separators, number forms, key order by UTF-16 code units.
CASES: list[tuple[str, JsonValue]] = [
    ("/dob", "1815-12-10"),
    ("/a~1b~0c", "Zoë\u2019s 😀 \u2028 <b>"),
    ("/n", 1e21),
    ("/n", 0.1),
    ("/n", -9007199254740991),
    ("/address", {"street": "12 St James's Square", "\u20ac": [True, None], "1": 2.5e-7}),
    ("/__proto__", {"__proto__": 1}),
]


def test_browser_disclosures_are_byte_identical_to_pythons(page: Page, site: Site) -> None:
    salts = [make_disclosure("/x", 0).salt for _ in CASES]
    results = import_disclosures(
        page,
        site,
        """async (d, arg) => {
          const made = [];
          for (const [i, [pointer, value]] of arg.cases.entries()) {
            made.push(await d.makeDisclosure(pointer, JSON.parse(value), arg.salts[i]));
          }
          return made;
        }""",
        {"cases": [[p, json.dumps(v)] for p, v in CASES], "salts": salts},
    )
    for (pointer, value), salt, result in zip(CASES, salts, results, strict=True):
        python = make_disclosure(pointer, value, salt=salt)
        assert result["text"] == python.text, pointer
        assert result["digest"] == python.digest == hashlib.sha256(python.text.encode()).hexdigest()


def test_salts_are_fresh_and_well_formed(page: Page, site: Site) -> None:
    salts = import_disclosures(page, site, "async (d) => Array.from({length: 200}, d.newSalt)")
    assert all(is_salt(salt) for salt in salts), salts
    assert len(set(salts)) == len(salts)


def test_the_browser_splits_input_as_split_personal_does(page: Page, site: Site) -> None:
    input_: JsonObject = {
        "name": "Ada",
        "address": {"street": "1 Main St", "city": "London"},
        "country": "GB",
        "zzz": "not an object",
    }
    # An ancestor and its descendant, an absent field, one below a non-object.
    personal = ["/address/street", "/name", "/address", "/missing", "/zzz/deep"]
    split = import_disclosures(
        page,
        site,
        """async (d, arg) => {
          const input = JSON.parse(arg.input);
          const before = JSON.stringify(input);
          const got = await d.splitPersonal(input, arg.personal);
          const unchanged = JSON.stringify(input) === before;
          return { ...got, sd: d.digests(got.disclosures), unchanged };
        }""",
        {"input": json.dumps(input_), "personal": personal},
    )
    clear, disclosed = split_personal(input_, personal)
    assert split["unchanged"] is True
    assert split["input"] == clear == {"country": "GB", "zzz": "not an object"}
    assert [(d["pointer"], d["value"]) for d in split["disclosures"]] == [
        (d.pointer, d.value) for d in disclosed
    ]
    for got in split["disclosures"]:
        python = make_disclosure(got["pointer"], got["value"], salt=got["salt"])
        assert (got["text"], got["digest"]) == (python.text, python.digest)
    assert split["sd"] == {d["pointer"]: d["digest"] for d in split["disclosures"]}


def event_posts(requests: list[Request]) -> list[Any]:
    return [
        json.loads(r.post_data or "")
        for r in requests
        if r.method == "POST" and r.url.endswith("/v1/events")
    ]


def kept_disclosures(database: Database, event_hash: str) -> dict[str, str]:
    with connect(database.url) as conn:
        rows = conn.execute(
            "SELECT pointer, disclosure FROM charter.event_disclosures WHERE event_hash = %s",
            (event_hash,),
        ).fetchall()
    return {str(pointer): str(text) for pointer, text in rows}


def stored_text(database: Database, event_hash: str) -> str:
    with connect(database.url) as conn:
        row = conn.execute(
            "SELECT envelope::text FROM charter.events WHERE hash = %s", (event_hash,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def sign_as_clerk(page: Page, site: Site) -> None:
    page.select_option("#actor", "clerk")
    page.set_input_files("#key-file", site.clerk_key)
    expect(page.locator("#key-status")).to_contain_text("loaded")


def test_personal_fields_are_signed_as_a_v2_envelope(page: Page, site: Site) -> None:
    process = open_forms_process(site, PEOPLE)
    requests = recorded_requests(page)
    on_process_page(page, site, process)
    sign_as_clerk(page, site)
    page.select_option("#action", "register")
    fields = page.locator("#input-fields")
    tags = fields.locator(".tag.personal")
    expect(tags).to_have_count(2)
    expect(fields.locator("label", has=page.locator(".tag.personal"))).to_have_text(
        ["dob * personal", "name * personal"]  # canonical key order
    )
    expect(page.locator("#personal-note")).to_be_visible()
    fields.get_by_label("name").fill("Ada Lovelace")
    fields.get_by_label("dob").fill("1815-12-10")
    fields.get_by_label("country").fill("GB")
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_contain_text("Accepted: register as event #2")
    expect(page.locator("#state")).to_have_text("registered")

    # What was sent: a v2 envelope without the values, and their disclosures beside it.
    [body] = event_posts(requests)
    assert set(body) == {"envelope", "signature", "disclosures"}
    envelope = body["envelope"]
    assert envelope["v"] == 2
    assert envelope["input"] == {"country": "GB"}
    assert sorted(envelope["sd"]) == ["/dob", "/name"]
    sent = {parse_disclosure(text).pointer: parse_disclosure(text) for text in body["disclosures"]}
    assert {p: d.value for p, d in sent.items()} == {"/name": "Ada Lovelace", "/dob": "1815-12-10"}
    assert {p: d.digest for p, d in sent.items()} == envelope["sd"]

    # What was stored: the envelope with digests only, the values in their own rows.
    events = stored_events(site, process)
    assert len(events) == 2
    stored = events[1]
    assert stored["envelope"] == envelope
    text = stored_text(site.harness.database, stored["hash"])
    for value in ("Ada", "Lovelace", "1815"):
        assert value not in text
    kept = kept_disclosures(site.harness.database, stored["hash"])
    assert kept == {d.pointer: d.text for d in sent.values()}
    for pointer, disclosure in kept.items():
        assert hashlib.sha256(disclosure.encode()).hexdigest() == envelope["sd"][pointer]

    report = verified(site, process)
    assert report["ok"] is True, report
    replayed = verify_process(site.harness.database, process, replay=True)
    assert replayed.ok, replayed.problems
    data = site.harness.http.get(f"/v1/processes/{process}", headers=bearer(site.harness.admin))
    assert data.json()["data"] == {"name": "Ada Lovelace", "dob": "1815-12-10", "country": "GB"}

    # The chain shows the digests and never asks for the disclosed values.
    event = page.locator("#seq-2")
    expect(event.locator("details.sd summary")).to_have_text(
        "personal fields (digests only): /dob, /name"
    )
    event.locator("details.sd summary").click()
    expect(event.locator("details.sd")).to_contain_text(envelope["sd"]["/name"])
    expect(page.locator("#events")).not_to_contain_text("Lovelace")
    events_path = f"/v1/processes/{process}/events"
    assert any(urlsplit(r.url).path == events_path for r in requests), "no events read"
    assert not [r.url for r in requests if "disclosures" in parse_qs(urlsplit(r.url).query)]
    assert_key_never_sent(requests, site.harness.keys["clerk"], site.harness.keys["boss"])


def test_an_action_without_personal_fields_stays_v1(page: Page, site: Site) -> None:
    process = open_forms_process(site, PEOPLE)
    requests = recorded_requests(page)
    on_process_page(page, site, process)
    sign_as_clerk(page, site)
    page.select_option("#action", "note")
    expect(page.locator("#input-fields .tag.personal")).to_have_count(0)
    expect(page.locator("#personal-note")).to_be_hidden()
    page.locator("#input-fields").get_by_label("text").fill("called back")
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_contain_text("Accepted: note as event #2")
    [body] = event_posts(requests)
    assert set(body) == {"envelope", "signature"}
    assert body["envelope"]["v"] == 1
    assert "sd" not in body["envelope"]
    assert stored_events(site, process)[1]["envelope"]["input"] == {"text": "called back"}
    assert verified(site, process)["ok"] is True


def test_a_nested_personal_field_and_one_left_out(page: Page, site: Site) -> None:
    process = open_forms_process(site, PEOPLE)
    requests = recorded_requests(page)
    on_process_page(page, site, process)
    sign_as_clerk(page, site)
    page.select_option("#action", "move")
    fields = page.locator("#input-fields")
    expect(fields.locator(".tag.personal")).to_have_text(["personal: /street"])
    fields.get_by_label("address").fill('{"street": "1 Main St", "city": "London"}')
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_contain_text("as event #2")
    # The street left out: still v2, committing to nothing, with no disclosures sent.
    fields = page.locator("#input-fields")
    fields.get_by_label("address").fill('{"city": "Paris"}')
    page.click("#sign-submit")
    expect(page.locator("#accepted")).to_contain_text("as event #3")

    first, second = event_posts(requests)
    assert first["envelope"]["v"] == 2
    assert first["envelope"]["input"] == {"address": {"city": "London"}}
    assert list(first["envelope"]["sd"]) == ["/address/street"]
    [text] = first["disclosures"]
    assert parse_disclosure(text).value == "1 Main St"
    assert set(second) == {"envelope", "signature"}
    assert second["envelope"]["v"] == 2
    assert second["envelope"]["sd"] == {}
    assert second["envelope"]["input"] == {"address": {"city": "Paris"}}
    events = stored_events(site, process)
    assert "Main" not in stored_text(site.harness.database, events[1]["hash"])
    assert list(kept_disclosures(site.harness.database, events[1]["hash"])) == ["/address/street"]
    assert kept_disclosures(site.harness.database, events[2]["hash"]) == {}
    assert verified(site, process)["ok"] is True


def test_without_ed25519_the_cli_command_comes_with_a_warning(page: Page, site: Site) -> None:
    process = open_forms_process(site, PEOPLE)
    page.add_init_script(NO_ED25519)
    on_process_page(page, site, process)
    page.select_option("#actor", "clerk")
    page.select_option("#action", "register")
    fields = page.locator("#input-fields")
    fields.get_by_label("name").fill("Ada Lovelace")
    fields.get_by_label("dob").fill("1815-12-10")
    fields.get_by_label("country").fill("GB")
    page.click("#sign-submit")
    expect(page.locator("#cli-command")).to_be_visible()
    expect(page.locator("#cli-personal")).to_contain_text("personal_in_clear")
    page.select_option("#action", "note")
    page.locator("#input-fields").get_by_label("text").fill("x")
    page.click("#sign-submit")
    expect(page.locator("#cli-command")).to_be_visible()
    expect(page.locator("#cli-personal")).to_have_count(0)
