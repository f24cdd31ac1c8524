"""The v1 event envelope and the signed submission (docs/wire-format.md).

An `Envelope` or `Submission` that exists is valid: construction checks every field, so
`from_json` only has to check the set of keys. Every failure is a `Malformed` whose
message and `field` context name the field.
"""

from __future__ import annotations

import re
from dataclasses import InitVar, dataclass, field
from datetime import datetime
from typing import Any, cast

from charter.core import identifiers, ijson
from charter.core.canonical import canonical_bytes, sha256_hex
from charter.core.canonical_fast import parse_canonical
from charter.core.ed25519 import SecretKey, verify
from charter.core.errors import BadSignature, Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339

MAX_INPUT_BYTES = 256 * 1024  # canonical size of `input`

_NAME_RE = identifiers.NAME
_NAME = _NAME_RE.pattern
_PATH_RE = identifiers.WORKFLOW_PATH
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
_SIGNATURE_RE = re.compile(r"[0-9a-f]{128}")

_ENVELOPE_KEYS = frozenset({"v", "process", "workflow", "action", "input", "prev", "actor", "at"})
_OPTIONAL_ENVELOPE_KEYS = frozenset({"cause"})
_SUBMISSION_KEYS = frozenset({"envelope", "signature"})


@dataclass(frozen=True)
class Envelope:
    """An event envelope, v1. Treat `input` as read-only: `message()` is computed once."""

    v: int
    process: str
    workflow: str
    action: str
    input: JsonObject
    prev: str | None
    actor: str
    at: str
    cause: str | None = None  # only on the unsigned genesis of a spawned process
    # Private to `from_text`: bytes it proved to be the canonical form of these fields.
    _canonical: InitVar[bytes | None] = None
    _message: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self, _canonical: bytes | None) -> None:
        if type(self.v) is not int or self.v != 1:
            raise _bad("v", "must be the integer 1")
        _match("process", self.process, _NAME_RE, f"must match {_NAME}")
        _match("workflow", self.workflow, _PATH_RE, f"must be '/'-separated names ({_NAME})")
        _match("action", self.action, _NAME_RE, f"must match {_NAME}")
        # Text `from_text` proved canonical was parsed as strictly as ijson.loads does:
        # its input is I-JSON already.
        _check_input(self.input, parsed=_canonical is not None)
        if self.prev is not None:
            _match("prev", self.prev, _HEX64_RE, "must be null or 64 lowercase hex characters")
        _match("actor", self.actor, _HEX64_RE, "must be 64 lowercase hex characters")
        self.at_datetime()
        if self.cause is not None:
            _match("cause", self.cause, _HEX64_RE, "must be 64 lowercase hex characters")
            if self.prev is not None:
                raise _bad("cause", "is only allowed on a spawn genesis, whose prev is null")
        # Canonicalized once: every envelope is hashed or verified, often both.
        message = canonical_bytes(self.to_json()) if _canonical is None else _canonical
        object.__setattr__(self, "_message", message)
        # JCS writes each member's value as is, so swapping `input` for {} (2 bytes) shrinks
        # the message by exactly the canonical size of `input` minus 2. `input` is never
        # larger than the whole message, so a small message needs no second encoding.
        if len(message) <= MAX_INPUT_BYTES:
            return
        skeleton = canonical_bytes(self.to_json() | {"input": {}})
        input_size = len(message) - len(skeleton) + 2
        if input_size > MAX_INPUT_BYTES:
            raise _bad(
                "input", f"is {input_size} bytes canonical, over the {MAX_INPUT_BYTES} limit"
            )

    @classmethod
    def from_json(cls, value: JsonValue) -> Envelope:
        """Validate a parsed envelope: exactly the v1 keys (`cause` optional), valid fields."""
        fields = _exact_keys(value, "envelope", _ENVELOPE_KEYS, optional=frozenset({"cause"}))
        # The values are still JsonValue; __post_init__ checks each one's type.
        return cls(**cast("dict[str, Any]", fields))

    @classmethod
    def from_text(cls, text: str) -> Envelope:
        """Parse and validate envelope text (strict I-JSON), parsing it once.

        When the text is provably its own canonical form (the common case a verifier
        meets), its bytes become `message()` as they are, with no re-encoding; otherwise
        the strict parser and `rfc8785` decide, and `message()` is the canonical form,
        which a caller compares with the text to find a non-canonical one.
        """
        canonical = parse_canonical(text)
        if canonical is None:
            return cls.from_json(ijson.loads(text))
        # The values are still JsonValue; __post_init__ checks each one's type.
        fields: dict[str, Any] = _exact_keys(
            canonical.value, "envelope", _ENVELOPE_KEYS, optional=_OPTIONAL_ENVELOPE_KEYS
        )
        return cls(**fields, _canonical=canonical.message)

    def at_datetime(self) -> datetime:
        """`at` as an aware UTC datetime."""
        if not isinstance(self.at, str):
            raise _bad("at", "must be an RFC 3339 UTC timestamp string")
        try:
            return parse_rfc3339(self.at, utc_only=True)
        except TimeFormatError as exc:
            raise _bad("at", f"must be an RFC 3339 UTC timestamp ({exc})") from None

    def to_json(self) -> JsonObject:
        """The envelope as a JSON object (`cause` only when present)."""
        value: JsonObject = {
            "v": self.v,
            "process": self.process,
            "workflow": self.workflow,
            "action": self.action,
            "input": self.input,
            "prev": self.prev,
            "actor": self.actor,
            "at": self.at,
        }
        if self.cause is not None:
            value["cause"] = self.cause
        return value

    def message(self) -> bytes:
        """The signed bytes: RFC 8785 canonical JSON of the envelope."""
        return self._message

    def hash(self) -> str:
        """The event hash: lowercase hex SHA-256 of `message()`."""
        return sha256_hex(self.message())


@dataclass(frozen=True)
class Submission:
    """A signed envelope as `POST /v1/events` receives it."""

    envelope: Envelope
    signature: str

    def __post_init__(self) -> None:
        if not isinstance(self.envelope, Envelope):
            raise TypeError("Submission.envelope must be an Envelope")
        if self.envelope.cause is not None:
            raise _bad("cause", "is only for a spawn genesis, which is never submitted")
        if not isinstance(self.signature, str) or not _SIGNATURE_RE.fullmatch(self.signature):
            raise Malformed("signature must be 128 lowercase hex characters", field="signature")

    @classmethod
    def from_json(cls, body: JsonValue) -> Submission:
        """Validate a parsed body: exactly `envelope` and `signature`."""
        fields = _exact_keys(body, "submission", _SUBMISSION_KEYS)
        return cls(Envelope.from_json(fields["envelope"]), cast(str, fields["signature"]))

    def to_json(self) -> JsonObject:
        """The submission body."""
        return {"envelope": self.envelope.to_json(), "signature": self.signature}


def parse_submission(raw: bytes) -> Submission:
    """Parse a request body end to end: strict I-JSON, then the submission shape."""
    return Submission.from_json(ijson.loads(raw))


def sign(envelope: Envelope, secret_key: SecretKey) -> Submission:
    """Sign `envelope` with the key whose public key is its `actor`."""
    if envelope.actor != secret_key.public_key_hex:
        raise ValueError("envelope.actor is not the public key of the signing key")
    if envelope.cause is not None:
        raise ValueError("a spawn genesis is never signed")
    return Submission(envelope, secret_key.sign(envelope.message()))


def verify_submission(submission: Submission) -> None:
    """Strictly verify the signature against `envelope.actor`, or raise `BadSignature`."""
    envelope = submission.envelope
    if not verify(envelope.actor, envelope.message(), submission.signature):
        raise BadSignature()


def genesis_envelope(
    parent: Envelope, *, process: str, workflow: str, action: str, input: JsonObject
) -> Envelope:
    """The unsigned genesis of a process spawned by `parent`.

    Its `cause` is the parent event's hash, `prev` is null, and `actor` and `at` are the
    parent event's, so replaying the parent re-derives the same genesis.
    """
    return Envelope(
        v=1,
        process=process,
        workflow=workflow,
        action=action,
        input=input,
        prev=None,
        actor=parent.actor,
        at=parent.at,
        cause=parent.hash(),
    )


def check_genesis(genesis: Envelope, signature: str | None, parent: Submission) -> None:
    """The genesis rule: unsigned, caused by `parent`'s hash, the same actor, and `parent`
    itself a validly signed event. Raises `Malformed` (or `BadSignature` for the parent).
    """
    if signature is not None:
        raise Malformed("a spawn genesis must be unsigned", field="signature")
    if genesis.cause is None:
        raise _bad("cause", "is required on a spawn genesis")
    if genesis.cause != parent.envelope.hash():
        raise _bad("cause", "is not the hash of the parent event")
    if genesis.actor != parent.envelope.actor:
        raise _bad("actor", "of a spawn genesis must be the parent event's actor")
    verify_submission(parent)


def _bad(field: str, problem: str) -> Malformed:
    return Malformed(f"envelope.{field} {problem}", field=field)


def _match(field: str, value: object, pattern: re.Pattern[str], problem: str) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _bad(field, problem)


def _check_input(value: object, *, parsed: bool) -> None:
    if not isinstance(value, dict):
        raise _bad("input", "must be a JSON object")
    if parsed:
        return
    try:
        ijson.check_value(value)
    except Malformed as exc:
        raise _bad("input", f"is invalid: {exc.message}") from None


def _exact_keys(
    value: JsonValue, what: str, required: frozenset[str], optional: frozenset[str] = frozenset()
) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} must be a JSON object", field=what)
    keys = value.keys()
    if keys == required or keys - optional == required:
        return value  # the common case, in set comparisons only
    missing = sorted(required - value.keys())
    unknown = sorted(value.keys() - required - optional)
    problems = []
    if missing:
        problems.append("is missing " + ", ".join(missing))
    if unknown:
        problems.append("has unknown key(s) " + ", ".join(repr(key[:40]) for key in unknown))
    if problems:
        raise Malformed(f"{what} {' and '.join(problems)}", field=what)
    return value
