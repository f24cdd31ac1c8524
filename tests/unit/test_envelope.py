"""The v1 envelope and submission: golden events, every rejection, signing and geneses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from charter.core import ijson
from charter.core.canonical import canonical_bytes
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
from charter.core.errors import BadSignature, Malformed

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
