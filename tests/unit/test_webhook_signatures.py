"""Standard Webhooks signatures: the spec's test vector, the ±5 minute window, strict
headers, several signatures per header, constant-time comparison of every entry."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from charter.automations.webhooks import (
    Delivery,
    WebhookRejected,
    parse_delivery,
    secret_key,
    sign,
    verifies,
)

# The Standard Webhooks specification's published test vector.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MESSAGE_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
SIGNED_AT = datetime.fromtimestamp(TIMESTAMP, UTC)
OTHER_SECRET = "whsec_" + base64.b64encode(b"another secret, 32 bytes long!!!").decode()


def headers(
    *, message_id: str = MESSAGE_ID, timestamp: str = str(TIMESTAMP), signature: str = SIGNATURE
) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": timestamp,
        "webhook-signature": signature,
    }


def delivery(**overrides: str) -> Delivery:
    return parse_delivery(headers(**overrides), now=SIGNED_AT)


def test_signing_reproduces_the_spec_vector() -> None:
    assert sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY) == SIGNATURE


def test_the_spec_vector_verifies() -> None:
    assert verifies(delivery(), BODY, SECRET)


@pytest.mark.parametrize(
    ("body", "secret", "message_id"),
    [
        (b'{"test": 2432232315}', SECRET, MESSAGE_ID),  # tampered body
        (BODY + b" ", SECRET, MESSAGE_ID),  # the raw bytes count, not the JSON value
        (BODY, OTHER_SECRET, MESSAGE_ID),  # wrong secret
        (BODY, SECRET, "msg_other"),  # another message id
    ],
)
def test_any_change_fails_verification(body: bytes, secret: str, message_id: str) -> None:
    assert not verifies(delivery(message_id=message_id), body, secret)


def test_a_changed_timestamp_fails_verification() -> None:
    moved = parse_delivery(headers(timestamp=str(TIMESTAMP + 1)), now=SIGNED_AT)
    assert not verifies(moved, BODY, SECRET)


def test_one_valid_entry_among_several_is_enough() -> None:
    rotated = sign(OTHER_SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    value = f"v1,bm90LWl0 v1a,ignored {rotated} garbage v1,!!!notbase64 {SIGNATURE}"
    assert verifies(delivery(signature=value), BODY, SECRET)
    assert verifies(delivery(signature=value), BODY, OTHER_SECRET)


def test_entries_of_other_versions_never_verify() -> None:
    digest = SIGNATURE.removeprefix("v1,")
    with pytest.raises(WebhookRejected, match="no v1 signature"):
        delivery(signature=f"v2,{digest} v1a,{digest} {digest}")


def test_headers_are_found_whatever_their_case() -> None:
    mixed = {"Webhook-Id": MESSAGE_ID, "WEBHOOK-TIMESTAMP": str(TIMESTAMP)}
    mixed["webhook-Signature"] = SIGNATURE
    assert verifies(parse_delivery(mixed, now=SIGNED_AT), BODY, SECRET)


@pytest.mark.parametrize(
    "offset", [timedelta(minutes=5), -timedelta(minutes=5), timedelta(seconds=299)]
)
def test_timestamps_within_five_minutes_either_way_pass(offset: timedelta) -> None:
    assert verifies(parse_delivery(headers(), now=SIGNED_AT + offset), BODY, SECRET)


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        (timedelta(minutes=6), "too old"),
        (timedelta(minutes=5, seconds=1), "too old"),
        (-timedelta(minutes=6), "in the future"),
        (-timedelta(minutes=5, seconds=1), "in the future"),
    ],
)
def test_timestamps_outside_the_window_are_rejected(offset: timedelta, message: str) -> None:
    with pytest.raises(WebhookRejected, match=message) as caught:
        parse_delivery(headers(), now=SIGNED_AT + offset)
    assert caught.value.http_status == 401


@pytest.mark.parametrize(
    "timestamp",
    ["NaN", "nan", "Infinity", "1e9", "-1614265330", "+1614265330", "1614265330.0", "0x60", "١٦"],
)
def test_timestamps_that_are_not_integer_seconds_are_rejected(timestamp: str) -> None:
    with pytest.raises(WebhookRejected, match="integer Unix seconds"):
        parse_delivery(headers(timestamp=timestamp), now=SIGNED_AT)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_named(missing: str) -> None:
    partial = headers()
    del partial[missing]
    with pytest.raises(WebhookRejected, match=missing):
        parse_delivery(partial, now=SIGNED_AT)
    partial[missing] = "   "
    with pytest.raises(WebhookRejected, match=missing):
        parse_delivery(partial, now=SIGNED_AT)


@pytest.mark.parametrize("message_id", ["has space", "x" * 257, "naïve"])
def test_message_ids_must_be_short_printable_ascii(message_id: str) -> None:
    with pytest.raises(WebhookRejected, match="webhook-id"):
        parse_delivery(headers(message_id=message_id), now=SIGNED_AT)


@pytest.mark.parametrize("secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_!!!!"])
def test_malformed_secrets_never_verify(secret: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        secret_key(secret)
    assert not verifies(delivery(), BODY, secret)


def test_signatures_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every v1 entry goes through hmac.compare_digest, never `==`."""
    import hmac

    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    two = f"{sign(OTHER_SECRET, MESSAGE_ID, TIMESTAMP, BODY)} {SIGNATURE}"
    assert verifies(delivery(signature=two), BODY, SECRET)
    assert len(compared) == 2


def test_the_documented_signing_example_runs_and_matches_charter() -> None:
    """docs/automations-triggers.md shows signing with only the standard library; it
    must run and agree with Charter's own verification."""
    doc = Path(__file__).parents[2] / "docs" / "automations-triggers.md"
    blocks = re.findall(r"^```python\n(.*?)^```$", doc.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    scope: dict[str, object] = {}
    exec(compile(blocks[0], str(doc), "exec"), scope)  # asserts the vector itself
    assert scope["signature"] == sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    assert verifies(delivery(signature=str(scope["signature"])), BODY, SECRET)
