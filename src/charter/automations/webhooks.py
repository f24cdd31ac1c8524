"""Standard Webhooks signature verification (https://www.standardwebhooks.com).

A delivery carries three headers:

- `webhook-id`: the message id, the same on every retry of one message;
- `webhook-timestamp`: integer Unix seconds when it was signed;
- `webhook-signature`: space-separated `v1,<base64 HMAC-SHA256>` entries (several while
  a sender rotates secrets; entries of other versions are ignored).

The signature is HMAC-SHA256, keyed with the base64-decoded part of the `whsec_...`
secret, over the exact bytes `<webhook-id>.<webhook-timestamp>.<raw body>`: the raw body,
never a re-serialization of parsed JSON. A timestamp more than five minutes from the
server clock either way is refused (an old capture cannot be replayed later, once the
`webhook-id` dedupe has been pruned or was never reached); digests are compared in
constant time (`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from charter.core.errors import BadSignature

TOLERANCE_SECONDS = 5 * 60
SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
# Printable ASCII without spaces: it is part of the signed content and of the run's
# dedupe key, which a btree index holds (keep it short).
_MESSAGE_ID = re.compile(r"[\x21-\x7e]{1,256}")
# Unix seconds as plain ASCII digits: no sign, no fraction, no exponent, no NaN.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


class WebhookRejected(BadSignature):
    """The webhook delivery is not signed by a secret of a matching trigger."""


@dataclass(frozen=True)
class Delivery:
    """The Standard Webhooks headers of one delivery, checked for form and freshness."""

    message_id: str
    timestamp: int
    signatures: tuple[bytes, ...]

    def signed_content(self, raw_body: bytes) -> bytes:
        return f"{self.message_id}.{self.timestamp}.".encode("ascii") + raw_body


def parse_delivery(headers: Mapping[str, str], *, now: datetime) -> Delivery:
    """The delivery's headers; WebhookRejected naming what is missing, malformed or stale."""
    lowered = {name.lower(): value for name, value in headers.items()}
    missing = [
        name
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
        if not lowered.get(name, "").strip()
    ]
    if missing:
        raise WebhookRejected(f"missing Standard Webhooks header(s): {', '.join(missing)}")
    message_id = lowered["webhook-id"].strip()
    if not _MESSAGE_ID.fullmatch(message_id):
        raise WebhookRejected("webhook-id must be 1 to 256 printable ASCII characters")
    raw_timestamp = lowered["webhook-timestamp"].strip()
    if not _TIMESTAMP.fullmatch(raw_timestamp):
        raise WebhookRejected("webhook-timestamp must be integer Unix seconds")
    timestamp = int(raw_timestamp)
    drift = timestamp - now.astimezone(UTC).timestamp()
    if abs(drift) > TOLERANCE_SECONDS:
        when = "in the future" if drift > 0 else "too old"
        raise WebhookRejected(
            f"webhook-timestamp is {when}: more than {TOLERANCE_SECONDS} s from the server clock"
        )
    signatures = tuple(_v1_signatures(lowered["webhook-signature"].split()))
    if not signatures:
        raise WebhookRejected("webhook-signature has no v1 signature")
    return Delivery(message_id, timestamp, signatures)


def _v1_signatures(entries: Iterable[str]) -> Iterable[bytes]:
    for entry in entries:
        version, _, encoded = entry.partition(",")
        if version != "v1" or not encoded:
            continue
        try:
            yield base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue  # one garbled entry does not spoil the others


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret; ValueError if it is not one."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret is whsec_ followed by base64") from None
    if not key:
        raise ValueError("a webhook secret has an empty key")
    return key


def sign(secret: str, message_id: str, timestamp: int, raw_body: bytes) -> str:
    """The `webhook-signature` value a sender puts on this delivery: `v1,<base64>`."""
    content = f"{message_id}.{timestamp}.".encode("ascii") + raw_body
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def verifies(delivery: Delivery, raw_body: bytes, secret: str) -> bool:
    """Whether any v1 signature of the delivery is the HMAC of its content under `secret`."""
    try:
        key = secret_key(secret)
    except ValueError:
        return False
    expected = hmac.new(key, delivery.signed_content(raw_body), hashlib.sha256).digest()
    # Every entry is compared (no early exit), each in constant time.
    matched = False
    for candidate in delivery.signatures:
        matched |= hmac.compare_digest(expected, candidate)
    return matched
