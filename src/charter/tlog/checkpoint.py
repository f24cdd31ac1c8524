"""C2SP tlog-checkpoint bodies and tlog-cosignature `cosignature/v1` (type 0x04).

A checkpoint is a signed note whose text is `<origin>\\n<size>\\n<base64 root>\\n`
followed by optional extension lines. Charter's log signs exactly three lines
(extension lines are unauditable), but bodies from other logs keep theirs.

A cosignature is an Ed25519 signature, by a witness key, over
`cosignature/v1\\ntime <t>\\n<checkpoint text>`; the note signature bytes are the 8-byte
big-endian timestamp followed by the 64-byte signature, and the key ID is computed with
type byte 0x04. That form does not commit to the cosigner name, so one key per cosigner.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from charter.core import ed25519
from charter.core.clock import Clock, SystemClock
from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors import InvalidPublicKey
from charter.core.errors.log import CheckpointUntrusted, MalformedCheckpoint, MalformedKey
from charter.tlog.merkle import HASH_SIZE
from charter.tlog.note import (
    NamedSecretKey,
    OpenedNote,
    Signature,
    Signer,
    Verifier,
    b64decode,
    b64encode,
    format_key,
    key_id,
    open_note,
    parse_vkey,
    sign_note,
)

COSIGNATURE_V1 = 0x04
"""Signature type of timestamped Ed25519 checkpoint cosignatures."""

_MAX_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head: origin, size and RFC 6962 root hash, plus others' extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.origin, str) or not self.origin:
            raise MalformedCheckpoint("the origin must be non-empty")
        for line in (self.origin, *self.extensions):
            if not line or any(c < " " for c in line):
                raise MalformedCheckpoint(
                    "checkpoint lines are non-empty, without control characters"
                )
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise MalformedCheckpoint("the tree size must be an integer")
        if not 0 <= self.size <= UINT64_MAX:
            raise MalformedCheckpoint("the tree size must fit in 64 bits")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_SIZE:
            raise MalformedCheckpoint("the root hash must be 32 bytes")

    def body(self) -> str:
        """The note text: three lines and any extension lines, each ending in a newline."""
        lines = [self.origin, str(self.size), b64encode(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Parse a checkpoint note text (the body, without signatures)."""
        if not isinstance(text, str) or not text.endswith("\n"):
            raise MalformedCheckpoint("a checkpoint text ends with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise MalformedCheckpoint("a checkpoint has at least three lines")
        origin, size_text, root_text, *extensions = lines
        size = parse_decimal(size_text, UINT64_MAX)
        if size is None:
            raise MalformedCheckpoint(
                "the tree size is a decimal without leading zeros, at most 2**64 - 1"
            )
        try:
            root = b64decode(root_text)
        except ValueError:
            raise MalformedCheckpoint("the root hash is not base64") from None
        if b64encode(root) != root_text:
            raise MalformedCheckpoint("the root hash is not canonical base64")
        return cls(origin, size, root, tuple(extensions))


def cosignature_message(body: str, timestamp: int) -> bytes:
    """The bytes a `cosignature/v1` signs: header, time line, then the checkpoint text."""
    return f"cosignature/v1\ntime {timestamp}\n{body}".encode()


@dataclass(frozen=True, slots=True)
class CosignatureVerifier:
    """A witness key (type 0x04): checks timestamped cosignatures of checkpoints."""

    name: str
    public_key: bytes

    @classmethod
    def from_vkey(cls, text: str) -> CosignatureVerifier:
        parts = parse_vkey(text)
        if parts.key_type != COSIGNATURE_V1:
            raise MalformedKey(f"not a cosignature/v1 key (type {parts.key_type:#04x})")
        if len(parts.key) != 32:
            raise MalformedKey("an Ed25519 public key is 32 bytes")
        try:
            ed25519.check_public_key(parts.key.hex())
        except InvalidPublicKey as exc:
            raise MalformedKey(exc.message) from None
        return cls(parts.name, parts.key)

    @property
    def key_id(self) -> int:
        return key_id(self.name, bytes([COSIGNATURE_V1]) + self.public_key)

    @property
    def vkey(self) -> str:
        typed = bytes([COSIGNATURE_V1]) + self.public_key
        return format_key(self.name, typed, self.public_key, secret=False)

    def verify(self, text: bytes, signature: bytes) -> bool:
        if len(signature) != 72:
            return False
        timestamp = int.from_bytes(signature[:8], "big")
        if timestamp > _MAX_TIMESTAMP:
            return False
        try:
            message = cosignature_message(text.decode("utf-8"), timestamp)
        except UnicodeDecodeError:
            return False
        return ed25519.verify(self.public_key.hex(), message, signature[8:].hex())


def cosignature_time(signature: Signature) -> int:
    """The timestamp of a cosignature/v1 signature (its first 8 bytes)."""
    return int.from_bytes(signature.signature[:8], "big")


class Cosigner(NamedSecretKey):
    """A witness signing key (type 0x04). The clock gives the timestamp of each cosignature."""

    __slots__ = ("_clock",)
    key_type = COSIGNATURE_V1

    def __init__(self, name: str, seed: bytes, clock: Clock | None = None) -> None:
        super().__init__(name, seed)
        self._clock: Clock = clock or SystemClock()

    @classmethod
    def generate(cls, name: str, clock: Clock | None = None) -> Cosigner:
        return cls(name, secrets.token_bytes(32), clock)

    @classmethod
    def from_skey(cls, text: str, clock: Clock | None = None) -> Cosigner:
        """Parse `PRIVATE+KEY+<name>+<id>+<base64(0x04 ‖ seed)>` (Go's layout, type 0x04)."""
        name, seed, expected = cls._parse_skey(text, COSIGNATURE_V1, "a cosignature/v1 key")
        cosigner = cls(name, seed, clock)
        cosigner._check_key_id(expected)
        return cosigner

    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self._name, self._public_key)

    def sign(self, text: bytes) -> bytes:
        """8-byte big-endian timestamp ‖ Ed25519 signature; only checkpoint texts are signed."""
        body = text.decode("utf-8")
        Checkpoint.parse(body)
        timestamp = int(self._clock.now().timestamp())
        if not 0 <= timestamp <= _MAX_TIMESTAMP:
            raise MalformedCheckpoint("the clock is outside the cosignature time range")
        signature = bytes.fromhex(self._key.sign(cosignature_message(body, timestamp)))
        return timestamp.to_bytes(8, "big") + signature

    def cosign(self, checkpoint: Checkpoint) -> Signature:
        """The signature line this witness adds to the checkpoint's note."""
        return Signature(self._name, self.key_id, self.sign(checkpoint.body().encode()))

    def __repr__(self) -> str:
        return f"Cosigner({self.verifier().vkey})"


def sign_checkpoint(checkpoint: Checkpoint, log_key: Signer) -> bytes:
    """The checkpoint note signed by the log key; Charter signs no extension lines."""
    if checkpoint.extensions:
        raise MalformedCheckpoint("Charter's checkpoints carry no extension lines")
    if log_key.name != checkpoint.origin:
        raise MalformedCheckpoint("the log key name must be the checkpoint origin")
    return sign_note(checkpoint.body(), [log_key])


@dataclass(frozen=True, slots=True)
class OpenedCheckpoint:
    """A checkpoint whose log signature verified, with the witnesses that cosigned it."""

    checkpoint: Checkpoint
    note: OpenedNote
    cosigned: Mapping[tuple[str, int], int]  # (key name, key ID) -> cosignature timestamp


def open_checkpoint(
    msg: bytes,
    logs: Sequence[Verifier],
    witnesses: Sequence[CosignatureVerifier] = (),
) -> OpenedCheckpoint:
    """Verify a checkpoint note: a signature by a log key named as its origin, and cosignatures.

    Raises `CheckpointUntrusted` when no log key named like the origin signed it; note
    errors (malformed, a known key's bad signature, nothing verified) propagate.
    """
    opened = open_note(msg, [*logs, *witnesses])
    checkpoint = Checkpoint.parse(opened.text)
    log_ids = {(v.name, v.key_id) for v in logs if v.name == checkpoint.origin}
    if not any((s.name, s.key_id) in log_ids for s in opened.verified):
        raise CheckpointUntrusted(f"no valid signature by the log {checkpoint.origin}")
    witness_ids = {(w.name, w.key_id) for w in witnesses}
    cosigned = {
        (s.name, s.key_id): cosignature_time(s)
        for s in opened.verified
        if (s.name, s.key_id) in witness_ids
    }
    return OpenedCheckpoint(checkpoint, opened, cosigned)
