"""The event envelope, v1 and v2, and the signed submission (docs/wire-format.md).

A v2 envelope is a v1 envelope plus `sd`, the digests of the personal fields its `input`
leaves out; the submission carries their disclosures beside it (`charter.core.disclosures`).

An `Envelope` or `Submission` that exists is valid: construction checks every field, so
`from_json` only has to check the set of keys. Every failure is a `Malformed` whose
message and `field` context name the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from datetime import datetime
from typing import Any, cast

from charter.core import identifiers, ijson, pointers
from charter.core.canonical import canonical_bytes, sha256_hex
from charter.core.canonical_fast import parse_canonical
from charter.core.disclosures import join_disclosures
from charter.core.ed25519 import SecretKey, verify
from charter.core.errors import BadSignature, Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339

MAX_INPUT_BYTES = 256 * 1024  # canonical size of `input` (plus `sd` on v2)

_NAME_RE = identifiers.NAME
_NAME = _NAME_RE.pattern
_PATH_RE = identifiers.WORKFLOW_PATH
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
_SIGNATURE_RE = re.compile(r"[0-9a-f]{128}")

_ENVELOPE_KEYS = frozenset({"v", "process", "workflow", "action", "input", "prev", "actor", "at"})
_V2_ENVELOPE_KEYS = _ENVELOPE_KEYS | {"sd"}
_OPTIONAL_ENVELOPE_KEYS = frozenset({"cause"})
_SUBMISSION_KEYS = frozenset({"envelope", "signature"})
_OPTIONAL_SUBMISSION_KEYS = frozenset({"disclosures"})


@dataclass(frozen=True)
class Envelope:
    """An event envelope, v1 or v2 (with `sd`). Treat `input` and `sd` as read-only:
    `message()` is computed once."""

    v: int
    process: str
    workflow: str
    action: str
    input: JsonObject
    prev: str | None
    actor: str
    at: str
    cause: str | None = None  # only on the unsigned genesis of a spawned process
    sd: Mapping[str, str] | None = None  # v2 only: personal field pointer -> digest
    # Private to `from_text`: bytes it proved to be the canonical form of these fields.
    _canonical: InitVar[bytes | None] = None
    _message: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self, _canonical: bytes | None) -> None:
        if type(self.v) is not int or (self.v != 1 and self.v != 2):
            raise _bad("v", "must be the integer 1 or 2")
        _match("process", self.process, _NAME_RE, f"must match {_NAME}")
        _match("workflow", self.workflow, _PATH_RE, f"must be '/'-separated names ({_NAME})")
        _match("action", self.action, _NAME_RE, f"must match {_NAME}")
        # Text `from_text` proved canonical was parsed as strictly as ijson.loads does:
        # its input is I-JSON already.
        _check_input(self.input, parsed=_canonical is not None)
        if self.v == 1:
            if self.sd is not None:
                raise _bad("sd", "is only allowed on a v2 envelope")
        else:
            _check_sd(self.sd, self.input, parsed=_canonical is not None)
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
        # `input` and `sd` are never larger than the whole message, so a small message
        # needs no second encoding (nor a call, on this hot path).
        if len(message) > MAX_INPUT_BYTES:
            self._check_size(message)

    def _check_size(self, message: bytes) -> None:
        # JCS writes each member's value as is, so swapping `input` (and `sd`) for {}
        # (2 bytes each) shrinks the message by exactly their canonical size minus 2 each.
        emptied: JsonObject = {"input": {}} if self.sd is None else {"input": {}, "sd": {}}
        skeleton = canonical_bytes(self.to_json() | emptied)
        size = len(message) - len(skeleton) + 2 * len(emptied)
        if size > MAX_INPUT_BYTES:
            what = "is" if self.sd is None else "and sd are"
            raise _bad("input", f"{what} {size} bytes canonical, over the {MAX_INPUT_BYTES} limit")

    @classmethod
    def from_json(cls, value: JsonValue) -> Envelope:
        """Validate a parsed envelope: exactly the keys of its `v` (`cause` optional),
        valid fields."""
        fields = _exact_keys(
            value, "envelope", _envelope_keys(value), optional=_OPTIONAL_ENVELOPE_KEYS
        )
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
        value = canonical.value
        fields: dict[str, Any] = _exact_keys(
            value, "envelope", _envelope_keys(value), optional=_OPTIONAL_ENVELOPE_KEYS
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
        """The envelope as a JSON object (`cause` only when present, `sd` only on v2)."""
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
        if self.sd is not None:
            value["sd"] = cast(JsonObject, self.sd)
        return value

    def message(self) -> bytes:
        """The signed bytes: RFC 8785 canonical JSON of the envelope."""
        return self._message

    def hash(self) -> str:
        """The event hash: lowercase hex SHA-256 of `message()`."""
        return sha256_hex(self.message())


@dataclass(frozen=True)
class Submission:
    """A signed envelope as `POST /v1/events` receives it, with the disclosures of a v2
    envelope's personal fields.

    Construction checks that disclosures are present exactly when the envelope's `sd`
    has entries; whether they match it is `full_input()`'s check (`BadDisclosure`).
    """

    envelope: Envelope
    signature: str
    disclosures: tuple[str, ...] = ()
    _full_input: JsonObject | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.envelope, Envelope):
            raise TypeError("Submission.envelope must be an Envelope")
        if self.envelope.cause is not None:
            raise _bad("cause", "is only for a spawn genesis, which is never submitted")
        if not isinstance(self.signature, str) or not _SIGNATURE_RE.fullmatch(self.signature):
            raise Malformed("signature must be 128 lowercase hex characters", field="signature")
        _check_disclosures(self.disclosures, self.envelope)

    @classmethod
    def from_json(cls, body: JsonValue) -> Submission:
        """Validate a parsed body: `envelope`, `signature` and, for a v2 envelope whose
        `sd` has entries, `disclosures`."""
        fields = _exact_keys(
            body, "submission", _SUBMISSION_KEYS, optional=_OPTIONAL_SUBMISSION_KEYS
        )
        envelope = Envelope.from_json(fields["envelope"])
        disclosures = _disclosures_from_json(fields, envelope)
        return cls(envelope, cast(str, fields["signature"]), disclosures)

    def to_json(self) -> JsonObject:
        """The submission body (`disclosures` only when there are some)."""
        body: JsonObject = {"envelope": self.envelope.to_json(), "signature": self.signature}
        if self.disclosures:
            body["disclosures"] = list(self.disclosures)
        return body

    def full_input(self) -> JsonObject:
        """The input with its personal fields: a v2 envelope's `input` joined with the
        disclosures (`BadDisclosure` unless they match `sd` one to one), a v1 one's as is.
        Computed once; treat it as read-only."""
        envelope = self.envelope
        if envelope.sd is None:
            return envelope.input
        if self._full_input is None:
            joined = join_disclosures(envelope.input, envelope.sd, self.disclosures)
            object.__setattr__(self, "_full_input", joined)
            return joined
        return self._full_input


def parse_submission(raw: bytes) -> Submission:
    """Parse a request body end to end: strict I-JSON, then the submission shape."""
    return Submission.from_json(ijson.loads(raw))


def sign(envelope: Envelope, secret_key: SecretKey, disclosures: Sequence[str] = ()) -> Submission:
    """Sign `envelope` with the key whose public key is its `actor`; the `disclosures`
    of a v2 envelope's personal fields travel beside it, unsigned (`sd` commits to them).
    """
    if isinstance(disclosures, str):
        raise TypeError("disclosures must be a sequence of disclosure texts, not one string")
    if envelope.actor != secret_key.public_key_hex:
        raise ValueError("envelope.actor is not the public key of the signing key")
    if envelope.cause is not None:
        raise ValueError("a spawn genesis is never signed")
    return Submission(envelope, secret_key.sign(envelope.message()), tuple(disclosures))


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


def _envelope_keys(value: JsonValue) -> frozenset[str]:
    # The key set follows `v`; a bad `v` gets the v1 set, and __post_init__ names it.
    if type(value) is dict and value.get("v") == 2:
        return _V2_ENVELOPE_KEYS
    return _ENVELOPE_KEYS


def _check_sd(sd: object, input: JsonObject, *, parsed: bool) -> None:
    """The v2 rules: an object mapping pointers to digests, each pointer's parent an
    object in `input` (reached through objects only) that does not hold its field."""
    if sd is None:
        raise _bad("sd", "is required on a v2 envelope")
    if type(sd) is not dict:
        raise _bad("sd", "must be a JSON object")
    if not parsed:
        try:
            ijson.check_value(sd)
        except Malformed as exc:
            raise _bad("sd", f"is invalid: {exc.message}") from None
    for pointer, digest in sd.items():
        shown = repr(pointer[:60])
        if not pointers.is_pointer(pointer):
            raise _bad("sd", f"key {shown} is not a non-empty RFC 6901 JSON pointer")
        if not isinstance(digest, str) or not _HEX64_RE.fullmatch(digest):
            raise _bad("sd", f"value of {shown} must be 64 lowercase hex characters")
        path = pointers.tokens(pointer)
        parent = pointers.parent_object(input, path)
        if parent is None:
            raise _bad("sd", f"key {shown} does not lead through objects of input")
        if path[-1] in parent:
            raise _bad("sd", f"key {shown} names a field that is present in input")


def _disclosures_from_json(fields: dict[str, JsonValue], envelope: Envelope) -> tuple[str, ...]:
    if "disclosures" not in fields:
        return ()
    if envelope.sd is None:
        raise Malformed("disclosures are only allowed with a v2 envelope", field="disclosures")
    value = fields["disclosures"]
    if type(value) is not list or not all(type(text) is str for text in value):
        raise Malformed("disclosures must be a list of strings", field="disclosures")
    return tuple(cast("list[str]", value))


def _check_disclosures(disclosures: object, envelope: Envelope) -> None:
    if type(disclosures) is not tuple or not all(type(text) is str for text in disclosures):
        raise TypeError("Submission.disclosures must be a tuple of str")
    if envelope.sd:
        if not disclosures:
            raise Malformed(
                "disclosures are required: the envelope's sd has entries", field="disclosures"
            )
    elif disclosures:
        raise Malformed(
            "disclosures must be absent: the envelope's sd has no entries", field="disclosures"
        )


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
