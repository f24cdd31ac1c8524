"""charter.Client and charter.AsyncClient with personal input fields, against the real API
over HTTP: `submit` learns an action's personal pointers from the workflow, sends those
fields as disclosures beside a v2 envelope (a v1 one where there are none), keeps its
split through stale-head re-signs, and reads the marks again when a new revision changed
them. Each test runs for both clients (`kind`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.core.disclosures import parse_disclosure
from charter.core.ed25519 import SecretKey
from charter.core.envelope import sign
from charter.core.errors import PersonalInClear
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.db.database import connect as db_connect
from charter.engine.reads import Reads
from charter.sdk.signing import EventSigner
from tests.integration.apikit import NOW, Harness, bearer, make_harness, new_id
from tests.integration.liveserver import live_server
from tests.sdkclients import KINDS, connect

PEOPLE: dict[str, Any] = {
    "dsl": 2,
    "states": ["open", "closed"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "input": {
                "type": "object",
                "required": ["country"],
                "properties": {
                    "name": {"type": "string", "x-personal": True},
                    "dob": {"type": "string", "x-personal": True},
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
        "rename": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {
                "type": "object",
                "properties": {"name": {"type": "string", "x-personal": True}},
            },
            "mutate": {"$set": {"name": "{{ input.name }}"}},
        },
        "remark": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "input": {"type": "object", "properties": {"nickname": {"type": "string"}}},
        },
        "note": {"type": "update", "role": "clerk", "from": "*"},
        "close": {"role": "clerk", "from": "open", "to": "closed"},
    },
}
ADA: JsonObject = {"name": "Ada Lovelace", "dob": "1815-12-10", "country": "GB"}


def _marking_nickname(definition: dict[str, Any], personal: bool) -> dict[str, Any]:
    """`definition` with `remark`'s nickname marked personal, or not."""
    changed = copy.deepcopy(definition)
    nickname = changed["actions"]["remark"]["input"]["properties"]["nickname"]
    nickname.pop("x-personal", None)
    if personal:
        nickname["x-personal"] = True
    return changed


class Recorder:
    """The app, recording each request's method and path; with `hide_marks`, answering
    every workflow reading with an empty `personal` map (a server whose marks the client
    cannot learn)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: list[tuple[str, str]] = []
        self.hide_marks = False

    def count(self, method: str, path: str) -> int:
        return self.requests.count((method, path))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.requests.append((scope["method"], scope["path"]))
        if not (self.hide_marks and scope["path"].startswith("/v1/workflows/")):
            await self.app(scope, receive, send)
            return
        start: Message = {}
        body = bytearray()

        async def rewrite(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return
            answer = json.loads(bytes(body))
            if start["status"] == 200:
                answer["personal"] = {}
            content = json.dumps(answer).encode()
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(content)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": content})

        await self.app(scope, receive, rewrite)


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


@pytest.fixture(scope="module")
def recorder(h: Harness) -> Recorder:
    return Recorder(h.http.app)


@pytest.fixture(scope="module")
def url(recorder: Recorder) -> Iterator[str]:
    with live_server(recorder) as base:
        yield base


@pytest.fixture
def path(h: Harness, recorder: Recorder) -> Iterator[str]:
    """A workflow path of this test's own, so that its revisions concern it alone."""
    chosen = f"tests/people-{new_id('w')}"
    h.deploy(chosen, PEOPLE)
    yield chosen
    recorder.hide_marks = False


def _stored(h: Harness, process_id: str) -> list[str]:
    """The envelope text of each event of the process, in seq order."""
    with db_connect(h.database.url) as conn:
        rows = conn.execute(
            "SELECT envelope::text FROM charter.events WHERE process_id = %s ORDER BY seq",
            (process_id,),
        ).fetchall()
    return [str(row[0]) for row in rows]


def _kept(h: Harness, process_id: str) -> list[dict[str, str]]:
    """Each event's disclosures, by pointer, as a `personal:read` token reads them."""
    reader = h.token("processes:read", "personal:read")
    response = h.http.get(
        f"/v1/processes/{process_id}/events",
        params={"disclosures": "true"},
        headers=bearer(reader),
    )
    assert response.status_code == 200, response.text
    return [event["disclosures"] for event in response.json()["items"]]


def _racer(h: Harness, process_id: str, times: int) -> Callable[[], datetime]:
    """A clock for the client's envelopes that, when the client signs (after it read the
    head), first has another writer extend the chain (the first `times` times)."""
    clerk = h.keys["clerk"]
    raced: list[int] = []

    def now() -> datetime:
        if len(raced) < times:
            found = Reads(h.database).process(process_id)
            note = h.envelope(clerk, process_id, "note", prev=found.head, workflow=found.workflow)
            h.engine.process_event(sign(note, clerk))
            raced.append(1)
        return h.clock.now()

    return now


@pytest.mark.parametrize("kind", KINDS)
def test_submit_sends_personal_fields_as_disclosures_of_a_v2_envelope(
    h: Harness, url: str, path: str, kind: str
) -> None:
    clerk, process_id = h.keys["clerk"], new_id("ada")
    with connect(kind, url, h.admin) as client:
        created = client.submit(clerk, process_id, "open", ADA, path, now=h.clock.now)
        noted = client.submit(clerk, process_id, "note", {}, now=h.clock.now)
        events = client.events(process_id)
    # The process document holds the full values: the engine joined the disclosures.
    assert created.process.data == ADA
    assert noted.seq == 2
    first, second = events[0].envelope, events[1].envelope
    assert first["v"] == 2
    assert first["input"] == {"country": "GB"}
    assert isinstance(first["sd"], dict)
    assert sorted(first["sd"]) == ["/dob", "/name"]
    # An action without personal fields still gets a v1 envelope.
    assert second["v"] == 1
    assert "sd" not in second
    texts = _stored(h, process_id)
    assert '"v":2' in texts[0].replace(" ", "")
    # No `name` or `dob` member, nor their values: only the pointers in `sd` name them.
    for personal in ('"name":', '"dob":', "Ada", "Lovelace", "1815"):
        assert personal not in texts[0], personal
    kept = _kept(h, process_id)
    assert sorted(kept[0]) == ["/dob", "/name"]
    assert kept[1] == {}
    name, dob = parse_disclosure(kept[0]["/name"]), parse_disclosure(kept[0]["/dob"])
    assert (name.value, dob.value) == ("Ada Lovelace", "1815-12-10")
    assert first["sd"] == {"/name": name.digest, "/dob": dob.digest}
    report = h.http.get(
        f"/v1/processes/{process_id}/verify", params={"replay": "true"}, headers=bearer(h.admin)
    ).json()
    assert report["ok"], report


@pytest.mark.parametrize("kind", KINDS)
def test_an_action_whose_personal_fields_are_left_out_gets_a_v1_envelope(
    h: Harness, url: str, path: str, kind: str
) -> None:
    clerk, process_id = h.keys["clerk"], new_id("anon")
    with connect(kind, url, h.admin) as client:
        created = client.submit(clerk, process_id, "open", {"country": "FR"}, path, now=h.clock.now)
        [event] = client.events(process_id)
    assert created.process.data == {"name": None, "dob": None, "country": "FR"}
    assert event.envelope["v"] == 1
    assert "sd" not in event.envelope


@pytest.mark.parametrize("kind", KINDS)
def test_the_personal_marks_are_read_once_per_workflow(
    h: Harness, url: str, path: str, recorder: Recorder, kind: str
) -> None:
    clerk = h.keys["clerk"]
    reading = ("GET", f"/v1/workflows/{path}")
    before = recorder.count(*reading)
    with connect(kind, url, h.admin) as client:
        for _ in range(3):
            client.submit(clerk, new_id("once"), "open", ADA, path, now=h.clock.now)
    assert recorder.count(*reading) == before + 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_stale_head_is_resigned_with_the_same_disclosures(
    h: Harness, url: str, path: str, kind: str
) -> None:
    clerk, process_id = h.keys["clerk"], new_id("stale")
    retries: list[int] = []
    with connect(kind, url, h.admin) as client:
        client.submit(clerk, process_id, "open", ADA, path, now=h.clock.now)
        renamed = client.submit(
            clerk, process_id, "rename", {"name": "Augusta Ada King"},
            now=_racer(h, process_id, times=2), on_stale=retries.append,
        )  # fmt: skip
        events = client.events(process_id)
    assert retries == [1, 2]
    assert renamed.seq == 4  # open, two racers, ours
    assert renamed.process.data["name"] == "Augusta Ada King"
    ours = events[-1].envelope
    assert (ours["v"], ours["input"], ours["prev"]) == (2, {}, events[-2].hash)
    assert isinstance(ours["sd"], dict)
    assert list(ours["sd"]) == ["/name"]
    kept = _kept(h, process_id)[-1]
    assert parse_disclosure(kept["/name"]).value == "Augusta Ada King"
    assert "Augusta" not in _stored(h, process_id)[-1]


def test_the_signer_keeps_its_split_for_every_head() -> None:
    key = SecretKey.generate()
    signer = EventSigner(key, "p-1", "open", ADA, "tests/people", lambda: NOW)
    assert signer.use_personal(["/name", "/dob"])
    first, again = signer.sign(None), signer.sign("ab" * 32)
    assert first.envelope.sd == again.envelope.sd
    assert first.disclosures == again.disclosures
    assert first.envelope.input == {"country": "GB"}
    # The same disclosed fields again: nothing changes, the salts stay.
    assert not signer.use_personal(["/dob", "/name", "/absent"])
    assert signer.sign(None).disclosures == first.disclosures
    # Other fields: a new split.
    assert signer.use_personal(["/name"])
    third = signer.sign(None)
    assert third.envelope.input == {"dob": "1815-12-10", "country": "GB"}
    assert third.envelope.sd is not None
    assert list(third.envelope.sd) == ["/name"]
    assert signer.use_personal([])
    plain = signer.sign(None)
    assert (plain.envelope.v, plain.envelope.sd, plain.disclosures) == (1, None, ())
    assert plain.envelope.input == ADA


@pytest.mark.parametrize("kind", KINDS)
def test_a_revision_that_marks_a_field_personal_is_learned_on_the_refusal(
    h: Harness, url: str, path: str, recorder: Recorder, kind: str
) -> None:
    clerk, process_id = h.keys["clerk"], new_id("rev")
    reading = ("GET", f"/v1/workflows/{path}")
    with connect(kind, url, h.admin) as client:
        # The client reads the marks of the first revision: nickname is not personal.
        client.submit(clerk, process_id, "open", ADA, path, now=h.clock.now)
        plain = client.submit(clerk, process_id, "remark", {"nickname": "Ada"}, now=h.clock.now)
        read = recorder.count(*reading)
        h.deploy(path, _marking_nickname(PEOPLE, True))
        # Sent in clear first (personal_in_clear), then as a disclosure.
        marked = client.submit(clerk, process_id, "remark", {"nickname": "Lady L"}, now=h.clock.now)
        reread = recorder.count(*reading)
        h.deploy(path, _marking_nickname(PEOPLE, False))
        # A digest first (bad_disclosure), then in clear.
        unmarked = client.submit(clerk, process_id, "remark", {"nickname": "A."}, now=h.clock.now)
        events = client.events(process_id)
    assert (plain.seq, marked.seq, unmarked.seq) == (2, 3, 4)
    assert reread == read + 1
    assert recorder.count(*reading) == read + 2
    envelopes = [e.envelope for e in events]
    assert (envelopes[1]["v"], envelopes[1]["input"]) == (1, {"nickname": "Ada"})
    assert (envelopes[2]["v"], envelopes[2]["input"]) == (2, {})
    assert isinstance(envelopes[2]["sd"], dict)
    assert list(envelopes[2]["sd"]) == ["/nickname"]
    assert (envelopes[3]["v"], envelopes[3]["input"]) == (1, {"nickname": "A."})
    assert "Lady L" not in _stored(h, process_id)[2]
    assert parse_disclosure(_kept(h, process_id)[2]["/nickname"]).value == "Lady L"
    assert h.rejections("personal_in_clear") >= 1
    assert h.rejections("bad_disclosure") >= 1


@pytest.mark.parametrize("kind", KINDS)
def test_marks_that_stay_unknown_give_the_servers_refusal_after_one_more_reading(
    h: Harness, url: str, path: str, recorder: Recorder, kind: str
) -> None:
    clerk, process_id = h.keys["clerk"], new_id("hidden")
    reading = ("GET", f"/v1/workflows/{path}")
    posting = ("POST", "/v1/events")
    recorder.hide_marks = True
    before, posted = recorder.count(*reading), recorder.count(*posting)
    with connect(kind, url, h.admin) as client, pytest.raises(PersonalInClear) as refused:
        client.submit(clerk, process_id, "open", ADA, path, now=h.clock.now)
    assert refused.value.code == "personal_in_clear"
    assert recorder.count(*reading) == before + 2  # read, then once more on the refusal
    assert recorder.count(*posting) == posted + 1  # nothing new to sign: not sent again
    assert "Ada" not in refused.value.message
    assert h.http.get(f"/v1/processes/{process_id}", headers=bearer(h.admin)).status_code == 404
