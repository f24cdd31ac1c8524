"""Signing-path throughput: JCS, sign, strict verify next to raw `cryptography` verify,
I-JSON parsing of a submission body. Run: python bench/signing.py
"""

from __future__ import annotations

import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from charter.core import ijson
from charter.core.canonical import canonical_bytes
from charter.core.ed25519 import SecretKey, verify
from charter.core.envelope import Envelope, parse_submission, sign
from common import Timing, measure, measure_interleaved, peak_rss_mib, print_results

SECONDS = 1.5


def typical_envelope(key: SecretKey) -> Envelope:
    """An onboarding submission of the size a form produces (about 1 KiB)."""
    return Envelope(
        v=1,
        process="customer-123",
        workflow="customer/retail/retail-customer",
        action="submit_onboarding",
        input={
            "name": "Ada Lovelace",
            "email": "ada@example.org",
            "birth_date": "1815-12-10",
            "address": {"street": "12 St James's Square", "city": "London", "country": "GB"},
            "phone": "+44 20 7946 0000",
            "risk_score": 0.37,
            "accounts": [{"iban": "GB33BUKB20201555555555", "currency": "GBP", "limit": 5000}],
            "documents": [{"kind": "passport", "number": "P1234567", "expires": "2031-04-01"}],
            "consents": {"marketing": False, "terms": True, "privacy": True},
            "notes": "Prefers contact by e-mail; résumé attached — 日本語 ok 🙂",
            "source": "web",
        },
        prev="1d58587ec9d8c3fd25b0f95f6c7ee5656ed8b4cd054c05e98694eadd9f94abec",
        actor=key.public_key_hex,
        at="2026-06-18T10:00:00.000Z",
    )


def main() -> None:
    key = SecretKey(bytes(range(32)))
    envelope = typical_envelope(key)
    value = envelope.to_json()
    message = envelope.message()
    submission = sign(envelope, key)
    body = json.dumps(submission.to_json(), ensure_ascii=False).encode()
    public_hex, signature_hex = key.public_key_hex, submission.signature
    raw_key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex))
    raw_signature = bytes.fromhex(signature_hex)

    results: dict[str, Timing] = {
        "JCS canonicalize envelope": measure(lambda: canonical_bytes(value), seconds=SECONDS),
        "sign (Ed25519)": measure(lambda: key.sign(message), seconds=SECONDS),
    }
    strict, raw = measure_interleaved(
        [
            lambda: verify(public_hex, message, signature_hex),
            lambda: raw_key.verify(raw_signature, message),
        ],
        seconds=2 * SECONDS,
    )
    results["strict verify (charter)"] = strict
    results["raw verify (cryptography)"] = raw
    results["I-JSON parse body (charter)"] = measure(lambda: ijson.loads(body), seconds=SECONDS)
    results["json.loads body (stdlib)"] = measure(lambda: json.loads(body), seconds=SECONDS)
    results["parse_submission (parse + validate)"] = measure(
        lambda: parse_submission(body), seconds=SECONDS
    )

    rows = [
        {
            "operation": name,
            "ops/s": timing.per_second,
            "p50 µs": timing.latency(50),
            "p99 µs": timing.latency(99),
        }
        for name, timing in results.items()
    ]
    overhead = (raw.per_second / strict.per_second - 1) * 100
    overhead_p50 = (strict.latency(50) / raw.latency(50) - 1) * 100
    print_results(f"Signing path — message {len(message)} B, body {len(body)} B", rows)
    print(
        f"strict verify overhead vs raw cryptography verify (interleaved): "
        f"{overhead:+.1f}% in throughput, {overhead_p50:+.1f}% at p50"
    )
    print(f"peak RSS: {peak_rss_mib():.1f} MiB")


if __name__ == "__main__":
    main()
