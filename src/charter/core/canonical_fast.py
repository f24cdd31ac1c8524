"""A C-speed path to RFC 8785 (JCS) bytes for the values where it provably agrees.

`json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)` writes exactly
what JCS writes for `null`, booleans, strings (both escape `"`, `\\`, `\\b \\f \\n \\r \\t`
and other controls as lowercase `\\u00xx`, and nothing else), integers within
±(2**53 - 1), arrays and objects, except in two places:

- numbers: Python prints doubles with `repr` (`1.0`, `1e-07`), JCS with ECMAScript's
  rules (`1`, `1e-7`); integers beyond ±(2**53 - 1) JCS refuses;
- key order: Python sorts by code point, JCS by UTF-16 code unit. The two orders agree
  unless a key holds a character above U+FFFF (a surrogate pair in UTF-16 sorts below
  U+E000..U+FFFF), so an object whose keys are all in the BMP sorts the same.

So each function here answers only when neither difference can arise, and otherwise
says None: the caller then takes the `rfc8785` path, whose answer (or error) stands.
tests/unit/test_canonical_fast.py checks the agreement over random values.
"""

from __future__ import annotations

import _json
import json
import re
from typing import Any, NamedTuple, NoReturn, cast

from charter.core.ijson import MAX_DEPTH, MAX_SAFE_INTEGER
from charter.core.jsontypes import JsonValue


def _unsupported(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is not a JSON type")


# CPython's C encoder, built once: `JSONEncoder.encode` builds it anew on every call,
# which costs more than encoding an envelope. No cycle markers: the inputs are parsed
# values or values `_plain` walked, and its depth limit stops a cycle.
_chunks = _json.make_encoder(
    None, _unsupported, _json.encode_basestring, None, ":", ",", True, False, False
)


def _encode(value: object) -> str:
    return "".join(_chunks(value, 0))


# Characters above U+FFFF (their UTF-16 order differs) and surrogates (not UTF-8).
_NOT_BMP = re.compile("[\U00010000-\U0010ffff\ud800-\udfff]")
_BELOW_F0 = bytes(range(0xF0))


def fast_canonical_bytes(value: object) -> bytes | None:
    """The JCS bytes of `value` when the fast encoder provably writes them, else None.

    None for anything but the exact JSON types with string keys, for floats, integers
    beyond ±(2**53 - 1), keys above U+FFFF and text that is not UTF-8 (lone surrogates).
    """
    try:
        if not _plain(value, 0):
            return None
        return _encode(value).encode("utf-8")
    except (RecursionError, UnicodeEncodeError):
        return None


def _plain(value: object, depth: int) -> bool:
    # Exact types only: a subclass (IntEnum, a dict subclass) may print differently.
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER  # type: ignore[operator]
    if depth >= MAX_DEPTH:
        return False  # deep nesting: rfc8785 decides, as it always has
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or (not key.isascii() and _NOT_BMP.search(key)):
                return False
            if not _plain(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    return False  # float, tuple, anything else


class _NotFast(Exception):
    """The text holds something the fast check does not decide."""


def _no_float(text: str) -> NoReturn:
    raise _NotFast


def _safe_int(text: str) -> int:
    # ±(2**53 - 1) fits in 17 characters (a sign and 16 digits); checking the length
    # first keeps int() from parsing hostile digit strings.
    if len(text) > 17:
        raise _NotFast
    number = int(text)
    if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        raise _NotFast
    return number


# The C scanner called directly (json.loads with hooks builds a decoder per call); it
# raises StopIteration where json.loads would say JSONDecodeError. Sharing it between
# threads is as safe as json.loads sharing its default decoder.
_scan = _json.make_scanner(
    cast(
        Any, json.JSONDecoder(parse_float=_no_float, parse_int=_safe_int, parse_constant=_no_float)
    )
)


class Canonical(NamedTuple):
    """Text proven to be I-JSON in JCS form: its value and its UTF-8 bytes (the message)."""

    value: JsonValue
    message: bytes


def parse_canonical(text: str) -> Canonical | None:
    """The value and bytes of `text` when it is provably I-JSON in JCS form, else None.

    None does not mean "not canonical": it means "not decided here" (the caller parses
    strictly and canonicalizes with `rfc8785`). When an answer is returned, its value is
    exactly what `ijson.loads(text)` returns, and `rfc8785.dumps` of that value is the
    message: the text is UTF-8, its keys are all BMP, it holds no float literal nor
    out-of-range integer, no U+0000, at most MAX_DEPTH brackets, and re-encodes to itself
    (which also rules out duplicate keys, whitespace, escapes JCS does not use and code
    point order).
    """
    try:
        message = text.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate
    # In UTF-8 only characters above U+FFFF start with a byte from 0xF0 up.
    astral = not message.isascii() and bool(message.translate(None, _BELOW_F0))
    if b"\\u0000" in message or message.count(b"[") + message.count(b"{") > MAX_DEPTH:
        return None
    try:
        value: JsonValue = _scan(text, 0)[0]
        encoded = _encode(value)
    except (_NotFast, StopIteration, ValueError, RecursionError):
        return None
    # Equal text also proves nothing trails the value (the scanner stops after it).
    if encoded != text or (astral and not _bmp_keys(value)):
        return None
    return Canonical(value, message)


def _bmp_keys(value: JsonValue) -> bool:
    # Only keys are sorted, so characters above U+FFFF elsewhere change nothing.
    if type(value) is dict:
        return all(
            (key.isascii() or not _NOT_BMP.search(key)) and _bmp_keys(item)
            for key, item in value.items()
        )
    if type(value) is list:
        return all(_bmp_keys(item) for item in value)
    return True


def encodes_to(value: JsonValue, message: bytes) -> bool:
    """Whether JCS writes `value` as `message`, itself JCS output (an envelope's message);
    False means "not decided here".

    `value` must hold exact JSON types with string keys, as `ijson.check_value` ensures.
    Equal output proves it. Strings, integers and literals print alike in both; a float
    prints as `repr`, which round-trips, so it equals the message's token only if JCS
    writes that same double so too; and the message lists each object's keys in UTF-16
    order, so when the encoder's code point order gives the same list, JCS's does too.
    Unequal output decides nothing (JCS writes 1.0 as 1; the encoder does not).
    """
    try:
        return _encode(value).encode("utf-8") == message
    except (ValueError, UnicodeEncodeError, RecursionError):
        return False
