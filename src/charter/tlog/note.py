"""C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys (type 0x01).

A note is a text ending in a newline, a blank line, then lines
`— <key name> base64(key ID ‖ signature)`. Verifiers ignore signatures from unknown
keys, which is what makes witness cosigning and key rotation free. Key texts follow Go's
`golang.org/x/mod/sumdb/note`: the vkey `<name>+<8 hex id>+<base64(type ‖ pk)>` and the
secret key `PRIVATE+KEY+<name>+<8 hex id>+<base64(type ‖ seed)>`.

Ed25519 verification is `charter.core.ed25519.verify`: strict, as for actors' signatures.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from charter.core import ed25519
from charter.core.errors import InvalidPublicKey, InvalidSecretKey
from charter.core.errors.log import (
    AmbiguousKey,
    BadNoteSignature,
    MalformedKey,
    MalformedNote,
    TlogError,
)

ED25519 = 0x01
"""Signature type of plain Ed25519 note signatures (log keys)."""

MAX_SIGNATURES = 100
"""More signature lines than this make a note malformed (signed-note requires >= 16; Go 100)."""

_SIG_PREFIX = "— "


def key_id(name: str, typed_key: bytes) -> int:
    """SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4] as a big-endian uint32."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + typed_key).digest()
    return int.from_bytes(digest[:4], "big")


def valid_name(name: str) -> bool:
    """Key names are non-empty, without Unicode spaces, `+` or control characters."""
    return (
        isinstance(name, str)
        and name != ""
        and "+" not in name
        and not any(c.isspace() or c < " " for c in name)
    )


def b64decode(text: str) -> bytes:
    """Strict standard base64 (RFC 4648 §4): padding required, no stray characters."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise ValueError("not base64") from exc


def b64encode(data: bytes) -> str:
    """Standard base64 with padding."""
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class KeyText:
    """The parts of a vkey or secret key text."""

    name: str
    key_id: int
    key_type: int
    key: bytes  # public key (vkey) or seed (secret key), without the type byte


def parse_vkey(text: str) -> KeyText:
    """Split `<name>+<hex id>+<base64(type ‖ key)>` and check the key ID."""
    # The base64 key may itself contain "+": split only the first two.
    parts = text.split("+", 2) if isinstance(text, str) else []
    if len(parts) != 3:
        raise MalformedKey("a verifier key is <name>+<hex id>+<base64 key>")
    name, id_hex, key_b64 = parts
    typed = _typed_key(name, id_hex, key_b64)
    if key_id(name, typed) != int(id_hex, 16):
        raise MalformedKey("the verifier key ID does not match its name and key")
    return KeyText(name, int(id_hex, 16), typed[0], typed[1:])


def parse_skey(text: str) -> KeyText:
    """Split Go's `PRIVATE+KEY+<name>+<hex id>+<base64(type ‖ seed)>` (ID checked by caller)."""
    parts = text.split("+", 4) if isinstance(text, str) else []
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise MalformedKey("a secret key is PRIVATE+KEY+<name>+<hex id>+<base64 key>")
    typed = _typed_key(parts[2], parts[3], parts[4])
    return KeyText(parts[2], int(parts[3], 16), typed[0], typed[1:])


def _typed_key(name: str, id_hex: str, key_b64: str) -> bytes:
    if not valid_name(name):
        raise MalformedKey("invalid key name")
    if len(id_hex) != 8 or any(c not in "0123456789abcdef" for c in id_hex):
        raise MalformedKey("the key ID is not 8 lowercase hex digits")
    try:
        typed = b64decode(key_b64)
    except ValueError:
        raise MalformedKey("the key is not base64") from None
    if len(typed) < 2:
        raise MalformedKey("the key is empty")
    return typed


def format_key(name: str, typed_public_key: bytes, payload: bytes, *, secret: bool) -> str:
    """The vkey (payload = public key) or secret key text (payload = seed)."""
    if not valid_name(name):
        raise MalformedKey("invalid key name")
    kid = key_id(name, typed_public_key)
    body = f"{name}+{kid:08x}+{b64encode(typed_public_key[:1] + payload)}"
    return f"PRIVATE+KEY+{body}" if secret else body


class Verifier(Protocol):
    """A known key: its name, key ID and a check of one signature over the note text."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def verify(self, text: bytes, signature: bytes) -> bool: ...


class Signer(Protocol):
    """A key that signs note texts."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def sign(self, text: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Ed25519Verifier:
    """A type 0x01 verifier: Ed25519 over the note text."""

    name: str
    public_key: bytes

    @classmethod
    def from_vkey(cls, text: str) -> Ed25519Verifier:
        parts = parse_vkey(text)
        if parts.key_type != ED25519:
            raise MalformedKey(f"not an Ed25519 note key (type {parts.key_type:#04x})")
        return cls._checked(parts.name, parts.key)

    @classmethod
    def _checked(cls, name: str, public_key: bytes) -> Ed25519Verifier:
        if len(public_key) != 32:
            raise MalformedKey("an Ed25519 public key is 32 bytes")
        try:
            ed25519.check_public_key(public_key.hex())
        except InvalidPublicKey as exc:
            raise MalformedKey(exc.message) from None
        return cls(name, public_key)

    @property
    def key_id(self) -> int:
        return key_id(self.name, bytes([ED25519]) + self.public_key)

    @property
    def vkey(self) -> str:
        """The verifier key text."""
        return format_key(
            self.name, bytes([ED25519]) + self.public_key, self.public_key, secret=False
        )

    def verify(self, text: bytes, signature: bytes) -> bool:
        return ed25519.verify(self.public_key.hex(), text, signature.hex())


class NamedSecretKey:
    """An Ed25519 seed with its signed-note name and key type: what a log key (0x01) and
    a witness key (0x04) share. Its repr never shows the seed."""

    __slots__ = ("_key", "_name", "_public_key")
    key_type: ClassVar[int]

    def __init__(self, name: str, seed: bytes) -> None:
        if not valid_name(name):
            raise MalformedKey("invalid key name")
        try:
            self._key = ed25519.SecretKey(seed)
        except InvalidSecretKey as exc:
            raise MalformedKey(exc.message) from None
        self._name = name
        self._public_key = bytes.fromhex(self._key.public_key_hex)

    @staticmethod
    def _parse_skey(text: str, key_type: int, what: str) -> tuple[str, bytes, int]:
        """(name, seed, key id) of Go's `PRIVATE+KEY+…` text of a key of `key_type`."""
        parts = parse_skey(text)
        if parts.key_type != key_type:
            raise MalformedKey(f"not {what} (type {parts.key_type:#04x})")
        return parts.name, parts.key, parts.key_id

    def _check_key_id(self, expected: int) -> None:
        if self.key_id != expected:
            raise MalformedKey("the secret key ID does not match its name and key")

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> int:
        return key_id(self._name, bytes([self.key_type]) + self._public_key)

    @property
    def skey(self) -> str:
        """Go's `PRIVATE+KEY+…` text (secret: write it 0600)."""
        typed = bytes([self.key_type]) + self._public_key
        return format_key(self._name, typed, bytes.fromhex(self._key.hex()), secret=True)


class Ed25519Signer(NamedSecretKey):
    """A type 0x01 signing key (a log key)."""

    __slots__ = ()
    key_type = ED25519

    @classmethod
    def generate(cls, name: str) -> Ed25519Signer:
        return cls(name, secrets.token_bytes(32))

    @classmethod
    def from_skey(cls, text: str) -> Ed25519Signer:
        """Parse Go's secret key text; the key ID must match the derived public key."""
        name, seed, expected = cls._parse_skey(text, ED25519, "an Ed25519 note key")
        signer = cls(name, seed)
        signer._check_key_id(expected)
        return signer

    def verifier(self) -> Ed25519Verifier:
        return Ed25519Verifier(self._name, self._public_key)

    def sign(self, text: bytes) -> bytes:
        return bytes.fromhex(self._key.sign(text))

    def __repr__(self) -> str:
        return f"Ed25519Signer({self.verifier().vkey})"


@dataclass(frozen=True, slots=True)
class Signature:
    """One signature line: key name, key ID and the signature bytes after the ID."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        """`— <name> base64(key ID ‖ signature)` and a newline."""
        raw = self.key_id.to_bytes(4, "big") + self.signature
        return f"{_SIG_PREFIX}{self.name} {b64encode(raw)}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A parsed note: its text (with the final newline) and every signature line."""

    text: str
    signatures: tuple[Signature, ...]


class UnverifiedNote(TlogError):
    """The note has no valid signature from a known key."""

    code = "note_unverified"
    http_status = 403
    note: Note | None = None  # the parsed note, for callers that report its signers


@dataclass(frozen=True, slots=True)
class OpenedNote:
    """A note whose `verified` signatures all checked out against known keys."""

    text: str
    verified: tuple[Signature, ...]
    unverified: tuple[Signature, ...]


def _check_text(text: str) -> None:
    if any(c < " " and c != "\n" for c in text):
        raise MalformedNote("a note must not contain control characters other than newline")


def parse_note(msg: bytes) -> Note:
    """Split a signed note into its text and signature lines, checking only the syntax."""
    try:
        whole = msg.decode("utf-8")
    except (UnicodeDecodeError, AttributeError):
        raise MalformedNote("a note must be UTF-8") from None
    _check_text(whole)
    split = whole.rfind("\n\n")
    if split < 0:
        raise MalformedNote("a note needs a blank line before its signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    if not block.endswith("\n"):
        raise MalformedNote("a note must end with a signature line and a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"a note may carry at most {MAX_SIGNATURES} signatures")
    return Note(text, tuple(_parse_line(line) for line in lines))


def _parse_line(line: str) -> Signature:
    if not line.startswith(_SIG_PREFIX):
        raise MalformedNote("a signature line starts with an em dash and a space")
    name, _, encoded = line[len(_SIG_PREFIX) :].partition(" ")
    try:
        raw = b64decode(encoded)
    except ValueError:
        raise MalformedNote("a signature is not base64") from None
    if not valid_name(name) or len(raw) < 5:
        raise MalformedNote("malformed signature line")
    return Signature(name, int.from_bytes(raw[:4], "big"), raw[4:])


def open_note(msg: bytes, known: Iterable[Verifier]) -> OpenedNote:
    """Parse and verify a note against known keys, as signed-note requires.

    Unknown keys are ignored (kept as `unverified`); a known key's bad signature rejects
    the whole note (`BadNoteSignature`), on every line that names that key, repeats
    included (signed-note: a verifier must check each such line; a later bad copy must
    not hide behind an earlier good one); no verified signature at all raises
    `UnverifiedNote`, whose `note` attribute still holds the parsed note.
    """
    note = parse_note(msg)
    by_id: dict[tuple[str, int], list[Verifier]] = {}
    for v in known:
        by_id.setdefault((v.name, v.key_id), []).append(v)
    text = note.text.encode("utf-8")
    verified: list[Signature] = []
    unverified: list[Signature] = []
    seen: set[tuple[str, int]] = set()
    for sig in note.signatures:
        candidates = by_id.get((sig.name, sig.key_id))
        if candidates is None:
            if sig not in unverified:
                unverified.append(sig)
            continue
        if len(candidates) > 1:
            raise AmbiguousKey(f"ambiguous key {sig.name}+{sig.key_id:08x}")
        if not candidates[0].verify(text, sig.signature):
            raise BadNoteSignature(f"invalid signature for key {sig.name}+{sig.key_id:08x}")
        if (sig.name, sig.key_id) not in seen:  # a key counts once, however many lines
            seen.add((sig.name, sig.key_id))
            verified.append(sig)
    if not verified:
        error = UnverifiedNote()
        error.note = note
        raise error
    return OpenedNote(note.text, tuple(verified), tuple(unverified))


def sign_note(text: str, signers: Sequence[Signer], keep: Sequence[Signature] = ()) -> bytes:
    """A signed note: `text`, the `keep` signatures not replaced by a signer, then new ones."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise MalformedNote("a note text must end with a newline")
    _check_text(text)
    data = text.encode("utf-8")
    fresh: list[Signature] = []
    for signer in signers:
        if not valid_name(signer.name):
            raise MalformedKey("invalid signer name")
        fresh.append(Signature(signer.name, signer.key_id, signer.sign(data)))
    replaced = {(s.name, s.key_id) for s in fresh}
    kept = [s for s in keep if (s.name, s.key_id) not in replaced]
    for sig in kept:
        if not valid_name(sig.name):
            raise MalformedNote("invalid signature name")
    lines = [*kept, *fresh]
    if not lines:
        raise MalformedNote("a note needs at least one signature")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"a note may carry at most {MAX_SIGNATURES} signatures")
    return (text + "\n" + "".join(s.line() for s in lines)).encode("utf-8")


def add_signatures(msg: bytes, extra: Sequence[Signature]) -> bytes:
    """The note with `extra` signature lines appended (same key name and ID replaced)."""
    note = parse_note(msg)
    replaced = {(s.name, s.key_id) for s in extra}
    kept = [s for s in note.signatures if (s.name, s.key_id) not in replaced]
    lines = [*kept, *extra]
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"a note may carry at most {MAX_SIGNATURES} signatures")
    return (note.text + "\n" + "".join(s.line() for s in lines)).encode("utf-8")
