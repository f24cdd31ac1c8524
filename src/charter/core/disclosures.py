"""Disclosures: the personal fields of a v2 envelope, kept off the signed record.

A v2 envelope's `input` lacks the action's personal fields; its `sd` maps each one's
JSON pointer to the digest of a disclosure, and the disclosures travel beside the signed
bytes. A disclosure is the RFC 8785 (JCS) text of `[salt, pointer, value]`, and its
digest the lowercase hex SHA-256 of that text's UTF-8 bytes. The random salt keeps a
digest from revealing a guessable value; requiring the canonical text means one value
has exactly one disclosure per salt, so it has exactly one digest.

A client calls `split_personal` before signing; the server calls `join_disclosures` to
rebuild the full input. No error message here ever shows a disclosed value.
"""

from __future__ import annotations

import base64
import copy
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from charter.core import ijson, pointers
from charter.core.canonical import canonical_bytes, sha256_hex
from charter.core.errors import BadDisclosure, Malformed
from charter.core.jsontypes import JsonObject, JsonValue

SALT_BYTES = 16
# 16 bytes are 22 unpadded base64url characters; the last one carries only 2 bits, the
# other 4 being zero, so it is one of the four characters whose low 4 bits are zero.
_SALT = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")


@dataclass(frozen=True)
class Disclosure:
    """One disclosed personal field: `text` is the canonical `[salt, pointer, value]`."""

    salt: str
    pointer: str
    value: JsonValue
    text: str
    digest: str


def new_salt() -> str:
    """A fresh salt: 16 CSPRNG bytes as unpadded base64url."""
    return base64.urlsafe_b64encode(secrets.token_bytes(SALT_BYTES)).rstrip(b"=").decode()


def is_salt(value: object) -> TypeGuard[str]:
    """Whether `value` is the unpadded base64url text of exactly 16 bytes."""
    return isinstance(value, str) and _SALT.fullmatch(value) is not None


def make_disclosure(pointer: str, value: JsonValue, *, salt: str | None = None) -> Disclosure:
    """The disclosure of `value` at `pointer`, with a fresh salt unless one is given."""
    salt = new_salt() if salt is None else salt
    if not is_salt(salt):
        raise BadDisclosure("disclosure salt must be 22 base64url characters encoding 16 bytes")
    if not pointers.is_pointer(pointer):
        raise BadDisclosure("disclosure pointer must be a non-empty RFC 6901 JSON pointer")
    try:
        ijson.check_value(value)
        text_bytes = canonical_bytes([salt, pointer, value])
    except Malformed:
        # The reason would quote the value (a number, a key): name the field only.
        raise BadDisclosure(f"the value disclosed at {_shown(pointer)} is not I-JSON") from None
    return Disclosure(salt, pointer, value, text_bytes.decode("utf-8"), sha256_hex(text_bytes))


def parse_disclosure(text: str) -> Disclosure:
    """Parse a disclosure strictly: I-JSON, `[salt, pointer, value]`, and in canonical form."""
    if not isinstance(text, str):
        raise BadDisclosure("a disclosure must be a string")
    try:
        parsed = ijson.loads(text)
    except Malformed:
        raise BadDisclosure("a disclosure is not strict I-JSON") from None
    if type(parsed) is not list or len(parsed) != 3:
        raise BadDisclosure("a disclosure must be a JSON array [salt, pointer, value]")
    salt, pointer, value = parsed
    if not is_salt(salt):
        raise BadDisclosure("a disclosure's salt must be 22 base64url characters encoding 16 bytes")
    if not pointers.is_pointer(pointer):
        raise BadDisclosure("a disclosure's pointer must be a non-empty RFC 6901 JSON pointer")
    # A strictly parsed value always canonicalizes.
    text_bytes = canonical_bytes(parsed)
    if text.encode("utf-8") != text_bytes:
        raise BadDisclosure(
            f"the disclosure for {_shown(pointer)} is not in its canonical JCS form"
        )
    return Disclosure(salt, pointer, value, text, sha256_hex(text_bytes))


def digests(disclosures: Iterable[Disclosure]) -> dict[str, str]:
    """The `sd` member committing to `disclosures`: each pointer's digest."""
    return {disclosure.pointer: disclosure.digest for disclosure in disclosures}


def split_personal(
    input: JsonObject, personal: Iterable[str]
) -> tuple[JsonObject, tuple[Disclosure, ...]]:
    """For a client: `input` without its personal fields, and a disclosure for each.

    `personal` lists the action's personal pointers; one whose field is absent is
    skipped (an optional field left out commits to nothing). A pointer below another
    personal one travels inside that one's disclosure. `input` itself is not changed.
    """
    personal = tuple(personal)
    for pointer in personal:
        if not pointers.is_pointer(pointer):
            raise ValueError(f"not a non-empty RFC 6901 JSON pointer: {pointer!r}")
    clear = copy.deepcopy(input)
    disclosed: list[Disclosure] = []
    # Ancestors first (a path sorts before its extensions): once a field is taken out,
    # the pointers below it find it absent.
    for path in sorted({tuple(pointers.tokens(pointer)) for pointer in personal}):
        keys = list(path)
        parent = pointers.parent_object(clear, keys)
        if parent is None or keys[-1] not in parent:
            continue
        disclosed.append(make_disclosure(pointers.to_pointer(keys), parent.pop(keys[-1])))
    return clear, tuple(disclosed)


def join_disclosures(
    input: JsonObject,
    sd: Mapping[str, str],
    disclosure_texts: Sequence[str],
    absent: Mapping[str, object] | None = None,
) -> JsonObject:
    """For the server: the full input, `input` with each disclosed value put back.

    Each text must be a strict disclosure whose pointer is a key of `sd` with the same
    digest, and every `sd` entry must have exactly one; otherwise `BadDisclosure`. For
    replay, `absent` gives what stands at the pointers whose disclosure is gone (erased
    or withheld): those need none.
    """
    absent = absent or {}
    found = _match_disclosures(sd, disclosure_texts, absent)
    full = copy.deepcopy(input)
    placed = [(d.pointer, d.value) for d in found] + [
        (pointer, value) for pointer, value in absent.items() if pointer in sd
    ]
    for pointer, value in sorted(placed, key=lambda item: pointers.tokens(item[0])):
        path = pointers.tokens(pointer)
        parent = pointers.parent_object(full, path)
        # The envelope's rules make this a pure insert; checked again for direct callers.
        if parent is None or path[-1] in parent:
            raise BadDisclosure(
                f"the disclosure for {_shown(pointer)} has no free place in the input"
            )
        parent[path[-1]] = value  # type: ignore[assignment]
    return full


def _match_disclosures(
    sd: Mapping[str, str], texts: Sequence[str], absent: Mapping[str, object]
) -> list[Disclosure]:
    """Parse `texts` and pair them one to one with the entries of `sd` (but `absent`)."""
    if isinstance(texts, str):
        raise TypeError("disclosure_texts must be a sequence of strings, not one string")
    found: dict[str, Disclosure] = {}
    for text in texts:
        disclosure = parse_disclosure(text)
        pointer = disclosure.pointer
        if pointer not in sd:
            raise BadDisclosure(f"the disclosure for {_shown(pointer)} matches no entry of sd")
        if pointer in found:
            raise BadDisclosure(f"more than one disclosure for {_shown(pointer)}")
        if disclosure.digest != sd[pointer]:
            raise BadDisclosure(
                f"the disclosure for {_shown(pointer)} does not match its digest in sd"
            )
        found[pointer] = disclosure
    missing = [pointer for pointer in sd if pointer not in found and pointer not in absent]
    if missing:
        raise BadDisclosure(
            "no disclosure for " + ", ".join(_shown(pointer) for pointer in sorted(missing))
        )
    return list(found.values())


def _shown(pointer: str) -> str:
    # A pointer names a field, never its value, but one from a body can be of any length.
    return pointer if len(pointer) <= 80 else pointer[:79] + "…"
