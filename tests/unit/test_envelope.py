"""The envelope and submission: golden events, every rejection, signing and geneses, and
v2's personal fields (sd and disclosures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from charter.core import ijson
from charter.core.canonical import canonical_bytes
from charter.core.disclosures import digests, make_disclosure, parse_disclosure, split_personal
from charter.core.ed25519 import SecretKey
from charter.core.envelope import (
    MAX_INPUT_BYTES,
    Envelope,
    Submission,
    check_genesis,
    genesis_envelope,
    parse_submission,
    sign,
    verify_submission,
)
from charter.core.errors import BadDisclosure, BadSignature, Malformed

GOLDEN = ijson.loads((Path(__file__).parents[1] / "vectors" / "charter-events.json").read_bytes())
KEY = SecretKey(bytes(range(32)))
HEAD = "1d58587ec9d8c3fd25b0f95f6c7ee5656ed8b4cd054c05e98694eadd9f94abec"


def _valid() -> dict[str, Any]:
    return {
        "v": 1,
        "process": "customer-123",
        "workflow": "customer/retail/retail-customer",
        "action": "submit_onboarding",
        "input": {"name": "Ada"},
        "prev": HEAD,
        "actor": KEY.public_key_hex,
        "at": "2026-06-18T10:00:00.000Z",
    }


def _events() -> list[dict[str, Any]]:
    assert isinstance(GOLDEN, dict)
    events = GOLDEN["events"]
    assert isinstance(events, list)
    return [event for event in events if isinstance(event, dict)]


# --- Golden events -----------------------------------------------------------------------


def test_golden_file_key_matches() -> None:
    assert isinstance(GOLDEN, dict)
    assert GOLDEN["secret_key"] == KEY.hex()
    assert GOLDEN["public_key"] == KEY.public_key_hex
    assert len(_events()) == 8


@pytest.mark.parametrize("event", _events(), ids=lambda event: str(event["name"]))
def test_golden_event(event: dict[str, Any]) -> None:
    envelope = Envelope.from_json(event["envelope"])
    assert envelope.message() == event["message"].encode("utf-8")
    assert envelope.hash() == event["hash"]
    assert envelope.to_json() == event["envelope"]
    if event["signature"] is None:
        assert envelope.cause is not None
    else:
        submission = sign(envelope, KEY)
        assert submission.signature == event["signature"]
        verify_submission(submission)


def test_golden_genesis_follows_its_parent() -> None:
    by_name = {event["name"]: event for event in _events()}
    parent = by_name["spawn parent"]
    genesis = Envelope.from_json(by_name["spawn genesis (unsigned)"]["envelope"])
    check_genesis(
        genesis,
        None,
        Submission(Envelope.from_json(parent["envelope"]), parent["signature"]),
    )


# --- Envelope rejections -----------------------------------------------------------------

_MISSING = object()


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("v", 3, "v"),
        ("v", 0, "v"),
        ("v", True, "v"),
        ("v", 1.0, "v"),
        ("v", "1", "v"),
        ("v", _MISSING, "envelope"),
        ("process", "", "process"),
        ("process", "-leading-dash", "process"),
        ("process", ".hidden", "process"),
        ("process", "a" * 129, "process"),
        ("process", "has space", "process"),
        ("process", "slash/no", "process"),
        ("process", "ünïcode", "process"),
        ("process", "trailing-newline\n", "process"),
        ("process", 123, "process"),
        ("process", None, "process"),
        ("workflow", "", "workflow"),
        ("workflow", "/leading", "workflow"),
        ("workflow", "trailing/", "workflow"),
        ("workflow", "a//b", "workflow"),
        ("workflow", "a/../b", "workflow"),
        ("workflow", "a/b c", "workflow"),
        ("workflow", "a/" + "b" * 129, "workflow"),
        ("workflow", ["a", "b"], "workflow"),
        ("action", "", "action"),
        ("action", "do it", "action"),
        ("action", "a/b", "action"),
        ("action", False, "action"),
        ("input", [], "input"),
        ("input", "text", "input"),
        ("input", None, "input"),
        ("input", {"n": float("nan")}, "input"),
        ("input", {"n": 2**53}, "input"),
        ("input", {"s": "\ud800"}, "input"),
        ("input", {"t": (1, 2)}, "input"),
        ("input", {"big": "x" * MAX_INPUT_BYTES}, "input"),
        ("prev", HEAD.upper(), "prev"),
        ("prev", HEAD[:63], "prev"),
        ("prev", HEAD + "0", "prev"),
        ("prev", 0, "prev"),
        ("prev", _MISSING, "envelope"),
        ("actor", KEY.public_key_hex.upper(), "actor"),
        ("actor", None, "actor"),
        ("actor", "", "actor"),
        ("at", "2026-06-18T10:00:00.000+01:00", "at"),
        ("at", "2026-06-18T10:00:00+00:00", "at"),
        ("at", "2026-06-18 10:00:00Z", "at"),
        ("at", "2026-06-18", "at"),
        ("at", "2026-02-30T10:00:00Z", "at"),
        ("at", "", "at"),
        ("at", 1781776800, "at"),
        ("at", None, "at"),
        ("cause", HEAD, "cause"),  # prev is not null: only a genesis has a cause
        ("unexpected", 1, "envelope"),
        ("signature", "0" * 128, "envelope"),
    ],
)
def test_envelope_rejects(key: str, value: object, field: str) -> None:
    body = _valid()
    if value is _MISSING:
        del body[key]
    else:
        body[key] = value
    with pytest.raises(Malformed) as caught:
        Envelope.from_json(body)
    assert caught.value.context["field"] == field
    assert (key in caught.value.message) if field == "envelope" else field in caught.value.message


@pytest.mark.parametrize("value", [[], "envelope", None, 1])
def test_envelope_must_be_an_object(value: Any) -> None:
    with pytest.raises(Malformed, match="envelope must be a JSON object"):
        Envelope.from_json(value)


def test_missing_and_unknown_keys_are_all_named() -> None:
    body = _valid()
    del body["actor"], body["at"]
    body["zzz"] = 1
    with pytest.raises(Malformed) as caught:
        Envelope.from_json(body)
    assert caught.value.message == "envelope is missing actor, at and has unknown key(s) 'zzz'"


def test_cause_with_bad_hex_is_rejected() -> None:
    body = _valid() | {"prev": None, "cause": "xyz"}
    with pytest.raises(Malformed, match=r"envelope\.cause must be 64 lowercase hex") as caught:
        Envelope.from_json(body)
    assert caught.value.context["field"] == "cause"


def test_input_at_the_size_limit_is_accepted() -> None:
    padding = MAX_INPUT_BYTES - len(b'{"big":""}')
    body = _valid() | {"input": {"big": "x" * padding}}
    envelope = Envelope.from_json(body)
    assert len(canonical_bytes(envelope.input)) == MAX_INPUT_BYTES


@pytest.mark.parametrize(
    "name",
    ["a", "A0", "customer-123", "x" * 128, "order:42.a_b-c", "0.9", "Z:_-."],
)
def test_names_accepted(name: str) -> None:
    body = _valid() | {"process": name, "action": name, "workflow": f"{name}/{name}"}
    envelope = Envelope.from_json(body)
    assert (envelope.process, envelope.action) == (name, name)


def test_to_json_round_trips_and_at_parses() -> None:
    envelope = Envelope.from_json(_valid())
    assert envelope.to_json() == _valid()
    assert Envelope.from_json(envelope.to_json()) == envelope
    assert envelope.at_datetime().isoformat() == "2026-06-18T10:00:00+00:00"


# --- Submissions -------------------------------------------------------------------------


def _body() -> dict[str, Any]:
    return sign(Envelope.from_json(_valid()), KEY).to_json()


def test_parse_submission_end_to_end() -> None:
    raw = json.dumps(_body()).encode()
    submission = parse_submission(raw)
    verify_submission(submission)
    assert submission.to_json() == _body()


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("signature"), "submission"),
        (lambda b: b.pop("envelope"), "submission"),
        (lambda b: b.update(extra=1), "submission"),
        (lambda b: b.update(signature=None), "signature"),
        (lambda b: b.update(signature=b["signature"].upper()), "signature"),
        (lambda b: b.update(signature=b["signature"][:127]), "signature"),
        (lambda b: b.update(signature=1), "signature"),
        (lambda b: b.update(envelope=[]), "envelope"),
        (lambda b: b["envelope"].update(v=3), "v"),
        (lambda b: b["envelope"].update(prev=None, cause=HEAD), "cause"),
    ],
)
def test_submission_rejects(mutate: Any, field: str) -> None:
    body = _body()
    mutate(body)
    with pytest.raises(Malformed) as caught:
        Submission.from_json(body)
    assert caught.value.context["field"] == field


@pytest.mark.parametrize("value", [[], None, "x"])
def test_submission_must_be_an_object(value: Any) -> None:
    with pytest.raises(Malformed, match="submission must be a JSON object"):
        Submission.from_json(value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"envelope": {}, "envelope": {}, "signature": ""}', "duplicate object key"),
        (b'{"envelope": {"v": NaN}}', "NaN"),
        (b"\xff", "not UTF-8"),
        (b"[", "invalid JSON"),
        (b'{"envelope": {"input": {"t": "a\\u0000"}}, "signature": ""}', "NUL"),
    ],
)
def test_parse_submission_rejects_non_ijson(raw: bytes, expected: str) -> None:
    with pytest.raises(Malformed, match=expected):
        parse_submission(raw)


def test_an_envelope_cannot_carry_nul_so_nothing_signed_is_unstorable() -> None:
    """PostgreSQL stores U+0000 in neither text nor jsonb: such an envelope is malformed
    before it can be signed or submitted."""
    envelope = _valid()
    envelope["input"] = {"name": "a\x00b"}
    with pytest.raises(Malformed, match=r"NUL \(U\+0000\)"):
        Envelope.from_json(envelope)


def test_tampered_submission_fails_verification() -> None:
    body = _body()
    body["envelope"]["input"]["name"] = "Eve"
    with pytest.raises(BadSignature):
        verify_submission(Submission.from_json(body))


def test_signature_by_another_key_fails_verification() -> None:
    envelope = Envelope.from_json(_valid())
    forged = Submission(envelope, SecretKey.generate().sign(envelope.message()))
    with pytest.raises(BadSignature):
        verify_submission(forged)


def test_sign_refuses_a_key_that_is_not_the_actor() -> None:
    with pytest.raises(ValueError, match="not the public key"):
        sign(Envelope.from_json(_valid()), SecretKey.generate())


# --- Spawn geneses -----------------------------------------------------------------------


def _parent() -> Submission:
    return sign(Envelope.from_json(_valid()), KEY)


def _genesis(parent: Submission) -> Envelope:
    return genesis_envelope(
        parent.envelope, process="child-1", workflow="child/flow", action="begin", input={}
    )


def test_genesis_envelope() -> None:
    parent = _parent()
    genesis = _genesis(parent)
    assert genesis.cause == parent.envelope.hash()
    assert genesis.prev is None
    assert genesis.actor == parent.envelope.actor
    assert genesis.at == parent.envelope.at
    check_genesis(genesis, None, parent)
    with pytest.raises(ValueError, match="never signed"):
        sign(genesis, KEY)


def test_genesis_rule_violations() -> None:
    parent = _parent()
    genesis = _genesis(parent)
    with pytest.raises(Malformed, match="must be unsigned"):
        check_genesis(genesis, "0" * 128, parent)
    with pytest.raises(Malformed, match="is required"):
        check_genesis(Envelope.from_json(genesis.to_json() | {"cause": None}), None, parent)
    other = sign(Envelope.from_json(_valid() | {"action": "other"}), KEY)
    with pytest.raises(Malformed, match="not the hash of the parent"):
        check_genesis(genesis, None, other)
    stranger = SecretKey.generate()
    foreign = sign(Envelope.from_json(_valid() | {"actor": stranger.public_key_hex}), stranger)
    wrong_actor = genesis_envelope(
        foreign.envelope, process="child-1", workflow="child/flow", action="begin", input={}
    )
    wrong_actor = Envelope.from_json(wrong_actor.to_json() | {"actor": KEY.public_key_hex})
    with pytest.raises(Malformed, match="parent event's actor"):
        check_genesis(wrong_actor, None, foreign)
    unsigned_parent = Submission(parent.envelope, stranger.sign(parent.envelope.message()))
    with pytest.raises(BadSignature):
        check_genesis(genesis, None, unsigned_parent)


# --- Envelope v2: personal fields ----------------------------------------------------------

FULL_INPUT: dict[str, Any] = {
    "name": "Ada Lovelace",
    "address": {"street": "12 St James's Square", "city": "London"},
    "plan": "gold",
    "items": [{"sku": "a"}],
}
PERSONAL = ["/name", "/address/street"]


def _split() -> tuple[dict[str, Any], dict[str, str], list[str]]:
    clear, disclosed = split_personal(FULL_INPUT, PERSONAL)
    return clear, digests(disclosed), [d.text for d in disclosed]


def _valid_v2() -> tuple[dict[str, Any], list[str]]:
    clear, sd, texts = _split()
    return _valid() | {"v": 2, "input": clear, "sd": sd}, texts


def test_v2_round_trip() -> None:
    body, _ = _valid_v2()
    envelope = Envelope.from_json(body)
    assert envelope.v == 2
    assert envelope.sd == body["sd"]
    assert envelope.to_json() == body
    assert envelope.message() == canonical_bytes(body)
    assert b'"sd":{"/address/street":"' in envelope.message()
    # The fast path (canonical text) and the strict one (any other text) agree.
    assert Envelope.from_text(envelope.message().decode()) == envelope
    assert Envelope.from_text(json.dumps(body, indent=1)) == envelope
    assert Envelope.from_text(json.dumps(body, indent=1)).message() == envelope.message()


def test_v2_hash_covers_sd() -> None:
    body, _ = _valid_v2()
    envelope = Envelope.from_json(body)
    other_sd = dict(body["sd"]) | {"/name": "0" * 64}
    other = Envelope.from_json(body | {"sd": other_sd})
    assert other.hash() != envelope.hash()
    assert KEY.sign(other.message()) != KEY.sign(envelope.message())


def test_v2_with_nothing_personal() -> None:
    envelope = Envelope.from_json(_valid() | {"v": 2, "sd": {}})
    assert envelope.sd == {}
    assert b'"sd":{}' in envelope.message()
    assert Envelope.from_text(envelope.message().decode()) == envelope


def test_v2_spawn_genesis_may_have_a_cause() -> None:
    body, _ = _valid_v2()
    envelope = Envelope.from_json(body | {"prev": None, "cause": HEAD})
    assert envelope.cause == HEAD


def test_v1_is_unchanged() -> None:
    envelope = Envelope.from_json(_valid())
    assert envelope.sd is None
    assert "sd" not in envelope.to_json()
    assert envelope.message() == canonical_bytes(_valid())
    assert genesis_envelope(
        envelope, process="c", workflow="w", action="a", input={}
    ).to_json().keys() == set(_valid()) | {"cause"}


def test_sd_is_refused_on_v1() -> None:
    with pytest.raises(Malformed) as caught:
        Envelope.from_json(_valid() | {"sd": {}})
    assert caught.value.message == "envelope has unknown key(s) 'sd'"
    text = canonical_bytes(_valid() | {"sd": {}}).decode()
    with pytest.raises(Malformed, match=r"unknown key\(s\) 'sd'"):
        Envelope.from_text(text)
    with pytest.raises(Malformed, match=r"envelope\.sd is only allowed on a v2") as direct:
        Envelope(**_valid(), sd={})
    assert direct.value.context["field"] == "sd"


def test_v2_requires_sd() -> None:
    with pytest.raises(Malformed) as caught:
        Envelope.from_json(_valid() | {"v": 2})
    assert caught.value.message == "envelope is missing sd"
    with pytest.raises(Malformed, match=r"envelope\.sd is required") as direct:
        Envelope(**(_valid() | {"v": 2}))
    assert direct.value.context["field"] == "sd"


_DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("sd", "problem"),
    [
        (None, "is required"),
        ([], "must be a JSON object"),
        ("/name", "must be a JSON object"),
        ({"": _DIGEST}, "not a non-empty RFC 6901"),
        ({"name": _DIGEST}, "not a non-empty RFC 6901"),
        ({"/a~2": _DIGEST}, "not a non-empty RFC 6901"),
        ({"/a~": _DIGEST}, "not a non-empty RFC 6901"),
        ({"/name": _DIGEST.upper()}, "64 lowercase hex"),
        ({"/name": _DIGEST[:63]}, "64 lowercase hex"),
        ({"/name": 1}, "64 lowercase hex"),
        ({"/name": None}, "64 lowercase hex"),
        ({"/items/0": _DIGEST}, "through objects"),  # an array is never a parent
        ({"/items/0/sku": _DIGEST}, "through objects"),
        ({"/plan/x": _DIGEST}, "through objects"),
        ({"/missing/x": _DIGEST}, "through objects"),
        ({"/plan": _DIGEST}, "present in input"),
        ({"/address/city": _DIGEST}, "present in input"),
        ({"/n\ud800": _DIGEST}, "is invalid"),
        ({"/n\x00": _DIGEST}, "is invalid"),
    ],
)
def test_sd_rules(sd: Any, problem: str) -> None:
    body, _ = _valid_v2()
    with pytest.raises(Malformed) as caught:
        Envelope.from_json(body | {"sd": sd})
    assert caught.value.context["field"] == "sd"
    assert caught.value.message.startswith("envelope.sd ")
    assert problem in caught.value.message


def test_sd_rules_on_the_fast_path() -> None:
    body, _ = _valid_v2()
    text = canonical_bytes(body | {"sd": {"/plan": _DIGEST}}).decode()
    with pytest.raises(Malformed, match="present in input"):
        Envelope.from_text(text)


def test_sd_pointers_may_be_digits_and_escaped() -> None:
    body = _valid() | {"v": 2, "input": {"0": {}, "a/b": {"~": {}}}}
    sd = {"/1": _DIGEST, "/0/0": _DIGEST, "/a~1b/~0/x": _DIGEST, "/a~1c": _DIGEST}
    assert Envelope.from_json(body | {"sd": sd}).sd == sd


def test_size_limit_counts_input_and_sd() -> None:
    sd: dict[str, Any] = {"/name": _DIGEST}
    padding = MAX_INPUT_BYTES - len(b'{"big":""}') - len(canonical_bytes(sd))
    body = _valid() | {"v": 2, "input": {"big": "x" * padding}, "sd": sd}
    Envelope.from_json(body)
    with pytest.raises(Malformed, match=r"envelope\.input and sd are 262145 bytes") as caught:
        Envelope.from_json(body | {"input": {"big": "x" * (padding + 1)}})
    assert caught.value.context["field"] == "input"


# --- Submissions with disclosures ---------------------------------------------------------


def _v2_body() -> dict[str, Any]:
    body, texts = _valid_v2()
    return sign(Envelope.from_json(body), KEY, texts).to_json()


def test_v2_submission_round_trip() -> None:
    body = _v2_body()
    assert len(body["disclosures"]) == 2
    submission = parse_submission(json.dumps(body).encode())
    verify_submission(submission)
    assert submission.to_json() == body
    assert submission.full_input() == FULL_INPUT
    assert submission.full_input() is submission.full_input()  # joined once


def test_v1_full_input_is_the_input() -> None:
    submission = Submission.from_json(_body())
    assert submission.disclosures == ()
    assert submission.full_input() is submission.envelope.input


@pytest.mark.parametrize("disclosures", [_MISSING, []])
def test_v2_submission_with_empty_sd_needs_no_disclosures(disclosures: Any) -> None:
    body = sign(Envelope.from_json(_valid() | {"v": 2, "sd": {}}), KEY).to_json()
    assert "disclosures" not in body
    if disclosures is not _MISSING:
        body["disclosures"] = disclosures
    submission = Submission.from_json(body)
    assert submission.disclosures == ()
    assert submission.full_input() == _valid()["input"]


def _v2_empty_sd_body() -> dict[str, Any]:
    return sign(Envelope.from_json(_valid() | {"v": 2, "sd": {}}), KEY).to_json()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (lambda: _v2_body() | {"disclosures": []}, "are required"),
        (lambda: {k: v for k, v in _v2_body().items() if k != "disclosures"}, "are required"),
        (lambda: _v2_body() | {"disclosures": "text"}, "list of strings"),
        (lambda: _v2_body() | {"disclosures": [1]}, "list of strings"),
        (lambda: _v2_body() | {"disclosures": None}, "list of strings"),
        (lambda: _v2_empty_sd_body() | {"disclosures": ["x"]}, "must be absent"),
        (lambda: _body() | {"disclosures": []}, "only allowed with a v2"),
        (lambda: _body() | {"disclosures": ["x"]}, "only allowed with a v2"),
    ],
)
def test_submission_disclosure_presence_rules(body: Any, problem: str) -> None:
    with pytest.raises(Malformed) as caught:
        Submission.from_json(body())
    assert caught.value.context["field"] == "disclosures"
    assert problem in caught.value.message


def test_full_input_refuses_disclosures_that_do_not_match() -> None:
    body = _v2_body()
    body["disclosures"] = body["disclosures"][:1]
    with pytest.raises(BadDisclosure, match="no disclosure for"):
        Submission.from_json(body).full_input()
    body = _v2_body()
    body["disclosures"][0] = make_disclosure(PERSONAL[0], "Eve").text
    with pytest.raises(BadDisclosure, match="does not match its digest"):
        Submission.from_json(body).full_input()


def test_disclosures_are_not_signed_but_committed() -> None:
    """The signature covers `sd`, not the disclosures: swapping one still verifies, and
    the join is what refuses it."""
    body = _v2_body()
    pointer = parse_disclosure(body["disclosures"][0]).pointer
    body["disclosures"][0] = make_disclosure(pointer, "Eve").text
    submission = Submission.from_json(body)
    verify_submission(submission)
    with pytest.raises(BadDisclosure):
        submission.full_input()


def test_sign_and_submission_check_the_disclosure_types() -> None:
    body, texts = _valid_v2()
    envelope = Envelope.from_json(body)
    with pytest.raises(TypeError):
        sign(envelope, KEY, texts[0])
    with pytest.raises(TypeError):
        Submission(envelope, "0" * 128, texts)  # type: ignore[arg-type]
