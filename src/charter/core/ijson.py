"""Strict I-JSON (RFC 7493) parsing and validation.

Python's `json.loads` accepts NaN, Infinity, 1e400, lone surrogates, huge integers and
duplicate keys (docs/architecture.md); everything signed must be I-JSON first. Numbers follow the
domain of the `rfc8785` package: integers within ±(2**53 - 1), finite doubles. One more
rule keeps every accepted value closed under canonicalization: a double of magnitude in
[2**53, 1e21) is rejected too, because JCS would print it as an integer literal outside
that range (1e20 → "100000000000000000000") which this parser would then refuse.

U+0000 is refused too, in strings and keys: PostgreSQL can store it neither in `text`
nor in `jsonb`, so a value holding it could be signed but never stored. Refusing it here
makes it a `malformed` 400 at the door instead of a database error deep inside.
"""

from __future__ import annotations

import json
import math
import re
from typing import NoReturn, cast

from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue

MAX_DEPTH = 128
MAX_SAFE_INTEGER = 2**53 - 1
_JCS_EXPONENT_FROM = 1e21  # from here on JCS prints doubles with an exponent

# Lone surrogates (not UTF-8) and NUL (PostgreSQL cannot store it) are refused in text.
_REFUSED = re.compile(r"[\ud800-\udfff\x00]")


class _Invalid(Exception):
    """A rejection found while walking a value; `path` grows as it unwinds."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


def loads(data: bytes | str) -> JsonValue:
    """Parse I-JSON text; any violation is a `Malformed` naming the problem."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Malformed(f"invalid JSON: not UTF-8 at byte {exc.start}") from None
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"ijson.loads takes bytes or str, not {type(data).__name__}")
    try:
        value: JsonValue = json.loads(
            text,
            object_pairs_hook=_object,
            parse_constant=_constant,
            parse_float=_float,
            parse_int=_int,
        )
    except json.JSONDecodeError as exc:
        raise Malformed(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise Malformed(f"invalid JSON: nesting deeper than {MAX_DEPTH} levels") from None
    # The hooks checked numbers and keys; walk the value only when a refused character
    # or deep nesting is possible at all (C-speed scans rule them out for typical bodies;
    # a large document with many brackets gets the cheaper depth-only pass first).
    if _may_hold_refused(data, text) or (
        text.count("[") + text.count("{") > MAX_DEPTH and _too_deep(value)
    ):
        _check_or_raise(value)
    return value


def _too_deep(value: JsonValue) -> bool:
    """Whether a container sits MAX_DEPTH levels down (the walk refuses it), level by level."""
    level = [value]
    for _ in range(MAX_DEPTH):
        below: list[JsonValue] = []
        for item in level:
            if type(item) is dict:
                below.extend(item.values())
            elif type(item) is list:
                below.extend(item)
        level = [item for item in below if type(item) is dict or type(item) is list]
        if not level:
            return False
    return True


def _may_hold_refused(data: bytes | str, text: str) -> bool:
    # NUL can only come from an escape (json.loads refuses raw control characters in
    # strings). A surrogate comes from an escape (\ud800-\udfff, plain substring tests are
    # enough to rule it out) or, in str input only, a raw code point (strict UTF-8 cannot
    # decode one).
    if "\\u0000" in text or "\\ud" in text or "\\uD" in text:
        return True
    if isinstance(data, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def check_value(value: object) -> JsonValue:
    """Check that an in-memory value is I-JSON and return it, typed.

    Only the exact types dict (str keys), list, str, int, float, bool and None are
    accepted: no tuples, sets or subclasses (an IntEnum or StrEnum would canonicalize
    differently from what a reader parses back).
    """
    _check_or_raise(value)
    return cast(JsonValue, value)


def _check_or_raise(value: object) -> None:
    try:
        _walk(value, 0)
    except _Invalid as exc:
        where = "/" + "/".join(reversed(exc.path)) if exc.path else "the top level"
        if len(where) > 120:  # hostile nesting would otherwise make a huge message
            where = where[:117] + "…"
        raise Malformed(f"not I-JSON: {exc.reason} at {where}") from None


def _walk(value: object, depth: int) -> None:
    if type(value) is str:
        if found := _REFUSED.search(value):
            raise _Invalid(f"{_describe(found[0])} in string")
    elif type(value) is dict:
        if depth >= MAX_DEPTH:
            raise _Invalid(f"nesting deeper than {MAX_DEPTH} levels")
        for key, item in value.items():
            if type(key) is not str:
                raise _Invalid(f"object key {key!r} is not a string")
            try:
                if found := _REFUSED.search(key):
                    raise _Invalid(f"{_describe(found[0])} in object key")
                _walk(item, depth + 1)
            except _Invalid as exc:
                exc.path.append(_pointer_token(key))
                raise
    elif type(value) is list:
        if depth >= MAX_DEPTH:
            raise _Invalid(f"nesting deeper than {MAX_DEPTH} levels")
        for index, item in enumerate(value):
            try:
                _walk(item, depth + 1)
            except _Invalid as exc:
                exc.path.append(str(index))
                raise
    elif type(value) is int:
        _check_int(value)
    elif type(value) is float:
        _check_float(value)
    elif value is not None and type(value) is not bool:
        raise _Invalid(f"{type(value).__name__} is not a JSON type")


def _describe(character: str) -> str:
    return "NUL (U+0000)" if character == "\x00" else "lone surrogate"


def _pointer_token(key: str) -> str:
    # RFC 6901 escaping, with lone surrogates shown escaped so the message stays printable.
    token = key.replace("~", "~0").replace("/", "~1").replace("\x00", "\\u0000")
    return token.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_int(number: int) -> None:
    if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        raise _Invalid(f"integer {number} is beyond ±(2**53 - 1)")


def _check_float(number: float) -> None:
    if not math.isfinite(number):
        raise _Invalid(f"number {number} is not finite")
    if MAX_SAFE_INTEGER < abs(number) < _JCS_EXPONENT_FROM:
        raise _Invalid(f"number {number!r} is an integer beyond ±(2**53 - 1)")


# --- json.loads hooks: they raise Malformed directly (json gives them no position) -----


def _fail(message: str) -> NoReturn:
    raise Malformed(f"not I-JSON: {message}")


def _object(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                _fail(f"duplicate object key {_pointer_token(key)!r}")
            seen.add(key)
    return result


def _constant(name: str) -> NoReturn:
    _fail(f"{name} is not a JSON number")


def _float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        _fail(f"number {text} overflows a double")
    if MAX_SAFE_INTEGER < abs(number) < _JCS_EXPONENT_FROM:
        _fail(f"number {text} is an integer beyond ±(2**53 - 1)")
    return number


def _int(text: str) -> int:
    # At most 16 digits fit the range; checking length first also avoids int()'s
    # 4300-digit limit error on hostile input.
    number = int(text) if len(text.lstrip("-")) <= 16 else None
    if number is None or not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        shown = text if len(text) <= 40 else f"{text[:20]}…({len(text)} digits)"
        _fail(f"integer {shown} is beyond ±(2**53 - 1)")
    return number
