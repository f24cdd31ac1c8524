"""Personal input fields on the wire: the workflow's reading lists each action's
personal pointers; a deploy with a misplaced mark is refused with coded problems; a v2
event keeps its personal values beside the signed bytes, and verification checks them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from charter.audit.verify_stored import export_bundle, verify_bundle, verify_process
from charter.core.disclosures import Disclosure, digests, make_disclosure, split_personal
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, connect
from tests.integration.apikit import Harness, bearer, make_harness, new_id

PATH = "tests/personal"
KYC: dict[str, Any] = {
    "dsl": 2,
    "states": ["draft", "closed"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "draft",
            "input": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "x-personal": True},
                    "address": {
                        "type": "object",
                        "properties": {"street": {"type": "string", "x-personal": True}},
                    },
                    "country": {"type": "string"},
                },
            },
        },
        "close": {"role": "clerk", "from": "draft", "to": "closed", "when": "name != 'Mallory'"},
    },
}
KYC["actions"]["open"]["mutate"] = {
    "$set": {"name": "{{ input.name }}", "country": "{{ input.country }}"}
}
KYC["actions"]["open"]["input"]["properties"]["name"]["maxLength"] = 40
PERSONAL = ("/name", "/address/street")
ADA: JsonObject = {"name": "Ada Lovelace", "address": {"street": "12 St James's Square"},
                   "country": "GB"}  # fmt: skip


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy(PATH, KYC)
    yield harness
    harness.http.close()


def v2(h: Harness, key: SecretKey, process: str, action: str, input_: JsonObject,
       prev: str | None = None) -> tuple[Envelope, tuple[Disclosure, ...]]:  # fmt: skip
    clear, disclosed = split_personal(input_, PERSONAL)
    base = h.envelope(key, process, action, clear, prev=prev, workflow=PATH)
    return replace(base, v=2, sd=digests(disclosed)), disclosed


def opened(h: Harness, input_: JsonObject = ADA) -> tuple[str, Any]:
    clerk = h.keys["clerk"]
    process_id = new_id("kyc")
    envelope, disclosed = v2(h, clerk, process_id, "open", input_)
    return process_id, h.accept(sign(envelope, clerk, [d.text for d in disclosed]))


def _stored(h: Harness, process_id: str) -> tuple[list[str], list[tuple[str, str]]]:
    with connect(h.database.url) as conn:
        texts = [str(r[0]) for r in conn.execute(
            "SELECT envelope::text FROM charter.events WHERE process_id = %s ORDER BY seq",
            (process_id,))]  # fmt: skip
        kept = conn.execute(
            "SELECT d.pointer, d.disclosure FROM charter.event_disclosures d"
            " JOIN charter.events e ON e.hash = d.event_hash WHERE e.process_id = %s"
            " ORDER BY d.pointer", (process_id,)).fetchall()  # fmt: skip
    return texts, [(str(p), str(t)) for p, t in kept]


def _rejections(h: Harness, process_id: str) -> list[tuple[str, str]]:
    with connect(h.database.url) as conn:
        found = conn.execute(
            "SELECT code, message FROM charter.system_log WHERE process_id = %s"
            " AND kind = 'event.rejected' ORDER BY id", (process_id,)).fetchall()  # fmt: skip
    return [(str(c), str(m)) for c, m in found]


def test_a_workflow_reading_lists_the_personal_pointers_of_each_action(h: Harness) -> None:
    response = h.http.get(f"/v1/workflows/{PATH}", headers=bearer(h.admin))
    assert response.status_code == 200, response.text
    assert response.json()["personal"] == {"open": ["/name", "/address/street"]}


def test_a_workflow_without_personal_fields_lists_none(h: Harness) -> None:
    plain: Any = {**KYC, "actions": {"open": {"type": "create", "role": "clerk", "to": "draft"}}}
    plain.pop("erasure")
    plain["states"] = ["draft"]
    h.deploy(f"{PATH}-plain", plain)
    response = h.http.get(f"/v1/workflows/{PATH}-plain", headers=bearer(h.admin))
    assert response.json()["personal"] == {}


def test_a_deploy_with_personal_fields_and_no_erasure_block_is_refused_with_codes(
    h: Harness,
) -> None:
    broken: Any = {**KYC}
    broken.pop("erasure")
    response = h.http.post(
        "/v1/workflows",
        json={"path": f"{PATH}-broken", "definition": broken},
        headers=bearer(h.admin),
    )
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"]["code"] == "invalid_workflow"
    [problem] = body["error"]["problems"]
    assert problem["code"] == "personal_without_erasure"
    assert problem["pointer"] == ""


def test_a_v2_event_keeps_personal_values_beside_the_signed_envelope(h: Harness) -> None:
    process_id, answer = opened(h)
    assert answer["process"]["data"] == {"name": "Ada Lovelace", "country": "GB"}
    texts, kept = _stored(h, process_id)
    assert "Ada" not in texts[0]
    assert "James" not in texts[0]
    assert [pointer for pointer, _ in kept] == ["/address/street", "/name"]
    assert '"Ada Lovelace"' in dict(kept)["/name"]
    clerk = h.keys["clerk"]
    closing = h.envelope(clerk, process_id, "close", prev=answer["hash"], workflow=PATH)
    h.accept(sign(closing, clerk))  # v1 is fine where the action has no personal field
    report = verify_process(h.database, process_id, replay=True)
    assert report.ok, report.problems
    bundle: Any = export_bundle(h.database, process_id)
    assert bundle["events"][0]["disclosures"] == dict(sorted(kept))
    assert "disclosures" not in bundle["events"][1]  # a v1 event's shape is as before
    offline = verify_bundle(bundle, replay=True)
    assert offline.ok, offline.problems


def test_a_personal_value_sent_in_clear_is_refused_and_not_logged(h: Harness) -> None:
    clerk = h.keys["clerk"]
    process_id = new_id("kyc")
    envelope = h.envelope(clerk, process_id, "open", ADA, workflow=PATH)
    response = h.post(sign(envelope, clerk))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "personal_in_clear"
    assert h.http.get(f"/v1/processes/{process_id}", headers=bearer(h.admin)).status_code == 404
    [(code, message)] = _rejections(h, process_id)
    assert code == "personal_in_clear"
    assert "Ada" not in message


def _refused(h: Harness, submission: Submission, code: str) -> str:
    response = h.post(submission)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code, response.text
    assert (
        h.http.get(
            f"/v1/processes/{submission.envelope.process}", headers=bearer(h.admin)
        ).status_code
        == 404
    )
    return str(response.json()["error"]["message"])


def test_disclosures_that_do_not_match_sd_are_bad_disclosure(h: Harness) -> None:
    clerk = h.keys["clerk"]
    envelope, disclosed = v2(h, clerk, new_id("kyc"), "open", ADA)
    texts = [d.text for d in disclosed]
    forged = make_disclosure("/name", "Grace Hopper").text
    _refused(h, sign(envelope, clerk, [forged, texts[1]]), "bad_disclosure")
    _refused(h, sign(envelope, clerk, texts[:1]), "bad_disclosure")
    _refused(h, sign(envelope, clerk, [*texts, texts[0]]), "bad_disclosure")
    # A digest for a field the action does not mark personal.
    clear, extra = split_personal(ADA, (*PERSONAL, "/country"))
    base = h.envelope(clerk, new_id("kyc"), "open", clear, workflow=PATH)
    wrong = replace(base, v=2, sd=digests(extra))
    message = _refused(h, sign(wrong, clerk, [d.text for d in extra]), "bad_disclosure")
    assert "/country" in message


def test_a_reused_salt_is_bad_disclosure(h: Harness) -> None:
    clerk = h.keys["clerk"]
    _, first = opened(h)
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT disclosure FROM charter.event_disclosures WHERE event_hash = %s"
            " AND pointer = '/name'", (first["hash"],)).fetchone()  # fmt: skip
    assert row is not None
    again = ("/name", str(row[0]))
    envelope, _ = v2(h, clerk, new_id("kyc"), "open", {"country": "GB"})
    reused = replace(envelope, sd={"/name": hashlib.sha256(again[1].encode()).hexdigest()})
    _refused(h, sign(reused, clerk, [again[1]]), "bad_disclosure")


def test_an_input_error_in_a_personal_field_does_not_quote_it(h: Harness) -> None:
    clerk = h.keys["clerk"]
    long_name = "Augusta Ada King, Countess of Lovelace, née Byron"
    envelope, disclosed = v2(h, clerk, new_id("kyc"), "open", {**ADA, "name": long_name})
    message = _refused(h, sign(envelope, clerk, [d.text for d in disclosed]), "invalid_input")
    assert "/name" in message
    assert "Countess" not in message
    assert all("Countess" not in m for _, m in _rejections(h, envelope.process))


def test_verification_reports_a_missing_or_substituted_disclosure(h: Harness) -> None:
    process_id, answer = opened(h)
    with connect(h.database.url) as conn:
        # As a superuser with triggers off: what verification exists to catch.
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            "DELETE FROM charter.event_disclosures WHERE event_hash = %s AND pointer = '/name'",
            (answer["hash"],),
        )
        other = make_disclosure("/address/street", "1 Other Road")
        conn.execute(
            "UPDATE charter.event_disclosures SET disclosure = %s, digest = %s"
            " WHERE event_hash = %s AND pointer = '/address/street'",
            (other.text, other.digest, answer["hash"]),
        )
        conn.commit()
    report = verify_process(h.database, process_id)
    assert sorted((p.seq, p.code) for p in report.problems) == [
        (1, "disclosure_mismatch"),
        (1, "disclosure_missing"),
    ]
    replayed = verify_process(h.database, process_id, replay=True)
    assert "replay_rejected" in {p.code for p in replayed.problems}


def test_events_show_their_disclosures_only_with_personal_read(h: Harness) -> None:
    process_id, answer = opened(h)
    path = f"/v1/processes/{process_id}/events"
    reader = h.token("processes:read")
    plain = h.http.get(path, headers=bearer(reader))
    assert plain.status_code == 200
    assert "disclosures" not in plain.json()["items"][0]
    assert "Ada" not in plain.text
    refused = h.http.get(path, params={"disclosures": "true"}, headers=bearer(reader))
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "forbidden"
    assert "Ada" not in refused.text
    personal = h.token("processes:read", "personal:read")
    for token in (personal, h.admin):
        shown = h.http.get(path, params={"disclosures": "true"}, headers=bearer(token))
        assert shown.status_code == 200, shown.text
        [event] = shown.json()["items"]
        assert sorted(event["disclosures"]) == ["/address/street", "/name"]
        assert '"Ada Lovelace"' in event["disclosures"]["/name"]
        assert event["hash"] == answer["hash"]
    only_personal = h.token("personal:read")
    assert h.http.get(path, headers=bearer(only_personal)).status_code == 403
