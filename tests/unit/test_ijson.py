"""Strict I-JSON parsing: every rejection of docs/architecture.md, and properties over random
input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.core import ijson
from charter.core.canonical import canonical_bytes
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue

MAX = 2**53 - 1

# Values inside the I-JSON domain; doubles in [2**53, 1e21) are excluded (see ijson's docstring),
# and so is U+0000 (PostgreSQL cannot store it).
text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX, MAX)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not MAX < abs(f) < 1e21)
    | text
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=25,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"[NaN]", "NaN is not a JSON number"),
        (b'{"a": Infinity}', "Infinity is not a JSON number"),
        (b"-Infinity", "-Infinity is not a JSON number"),
        (b"1e400", "number 1e400 overflows a double"),
        (b"[-1E+999]", "number -1E+999 overflows a double"),
        (b"9007199254740992", "integer 9007199254740992 is beyond"),
        (b"-9007199254740992", "integer -9007199254740992 is beyond"),
        (b"[123456789012345678901234567890]", "integer 123456789012345678901234567890 is beyond"),
        (b"1" * 5000, "(5000 digits) is beyond"),
        (b"1e20", "number 1e20 is an integer beyond"),
        (b"-9007199254740992.0", "number -9007199254740992.0 is an integer beyond"),
        (b'"\\ud800"', "lone surrogate in string at the top level"),
        (b'["ok", "\\ude02\\ud83d"]', "lone surrogate in string at /1"),
        (b'{"a": {"b": [1, {"c": "x\\udfffy"}]}}', "lone surrogate in string at /a/b/1/c"),
        (b'{"\\udc00": 1}', "lone surrogate in object key at /\\udc00"),
        (b'{"a/b~": ["\\ud800"]}', "at /a~1b~0/0"),
        (b'"\\u0000"', "NUL (U+0000) in string at the top level"),
        (b'{"name": "a\\u0000b"}', "NUL (U+0000) in string at /name"),
        (b'{"a": [true, false, null, "\\u0000"]}', "NUL (U+0000) in string at /a/3"),
        (b'{"k\\u0000": 1}', "NUL (U+0000) in object key at /k\\u0000"),
        ('{"x": "\\u0000"}', "NUL (U+0000) in string at /x"),
        ('"\ud800"', "lone surrogate in string at the top level"),
        (b'"\xed\xa0\x80"', "not UTF-8 at byte 1"),
        (b'{"a": "\xff"}', "not UTF-8 at byte 7"),
        (b'"caf\xe9"', "not UTF-8 at byte 4"),
        (b'{"a": 1, "a": 2}', "duplicate object key 'a'"),
        (b'{"x": {"k": 1, "j": 2, "k": 3}}', "duplicate object key 'k'"),
        (b'{"a": 1} x', "Extra data at line 1 column 10"),
        (b"[1]\n]", "Extra data at line 2 column 1"),
        (b"", "Expecting value at line 1 column 1"),
        (b"   ", "Expecting value"),
        (b"{", "Expecting property name"),
        (b"{'a': 1}", "Expecting property name"),
        (b"[1,]", "Expecting value"),
        (b'{"a" 1}', "Expecting ':' delimiter"),
        (b"tru", "Expecting value"),
        (b"01", "Extra data"),
        (b'"a\tb"', "Invalid control character"),
        (b"\xef\xbb\xbf{}", "Unexpected UTF-8 BOM"),
        (b"[" * 129 + b"]" * 129, "nesting deeper than 128 levels"),
        (b'{"a":' * 129 + b"1" + b"}" * 129, "nesting deeper than 128 levels"),
        (b"[" * 100_000, "nesting deeper than 128 levels"),
    ],
)
def test_loads_rejects(data: bytes | str, expected: str) -> None:
    with pytest.raises(Malformed) as caught:
        ijson.loads(data)
    assert expected in caught.value.message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"9007199254740991", MAX),
        (b"-9007199254740991", -MAX),
        (b"1e21", 1e21),
        (b"-0", 0),
        (b"-0.0", -0.0),
        (b"1e-400", 0.0),  # underflow rounds to zero: a finite double, accepted
        (b'"\\ud83d\\ude02"', "\U0001f602"),  # an escaped surrogate *pair* is one character
        ("\U0001f602".join('""').encode(), "\U0001f602"),
        (b' {"a": [true, false, null, "\\u0001"]} ', {"a": [True, False, None, "\x01"]}),
        (b'"\\\\u0000"', "\\u0000"),  # an escaped backslash, then text: no NUL
        (b"[" * 128 + b"]" * 128, None),
    ],
)
def test_loads_accepts(data: bytes, expected: JsonValue) -> None:
    value = ijson.loads(data)
    if expected is not None:
        assert value == expected
        assert type(value) is type(expected)
    else:
        assert isinstance(value, list)


@pytest.mark.parametrize("levels", [127, 128, 129, 300])
def test_a_wide_document_is_checked_for_depth_like_a_narrow_one(levels: int) -> None:
    # Hundreds of shallow siblings put the bracket count over the limit, so the depth-only
    # pass runs; it must refuse exactly where the full walk does, with its message.
    nested = "[" * (levels - 1) + "]" * (levels - 1)
    wide = '{"rows":[' + ",".join(['{"a":[1]}'] * 300) + "]," + '"deep":' + nested + "}"
    if levels <= ijson.MAX_DEPTH:
        assert ijson.check_value(ijson.loads(wide)) == json.loads(wide)
    else:
        with pytest.raises(Malformed) as caught:
            ijson.loads(wide)
        assert caught.value.message.startswith(
            "not I-JSON: nesting deeper than 128 levels at /deep/"
        )


def test_loads_takes_only_bytes_or_str() -> None:
    with pytest.raises(TypeError):
        ijson.loads(bytearray(b"{}"))  # type: ignore[arg-type]


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _cycle() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


class _Str(str):
    pass


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), "number nan is not finite"),
        ({"a": [float("inf")]}, "number inf is not finite at /a/0"),
        (-float("inf"), "not finite"),
        (2**53, "integer 9007199254740992 is beyond"),
        (-(2**53), "is beyond"),
        (1e20, "number 1e+20 is an integer beyond"),
        (-float(2**53), "is an integer beyond"),
        ("\ud800", "lone surrogate in string"),
        ({"\udfff": 1}, "lone surrogate in object key"),
        ("a\x00b", "NUL (U+0000) in string"),
        ({"x": ["\x00"]}, "NUL (U+0000) in string at /x/0"),
        ({"\x00": 1}, "NUL (U+0000) in object key"),
        ({1: "x"}, "object key 1 is not a string"),
        ({"a": {None: 1}}, "object key None is not a string at /a"),
        ((1, 2), "tuple is not a JSON type"),
        ({"s": {1}}, "set is not a JSON type at /s"),
        ([b"bytes"], "bytes is not a JSON type at /0"),
        (_Str("x"), "_Str is not a JSON type"),
        ([object()], "object is not a JSON type"),
        (_deep(129), "nesting deeper than 128 levels"),
        (_cycle(), "nesting deeper than 128 levels"),
    ],
)
def test_check_value_rejects(value: object, expected: str) -> None:
    with pytest.raises(Malformed) as caught:
        ijson.check_value(value)
    assert expected in caught.value.message


def test_check_value_accepts_and_returns_the_same_object() -> None:
    value = {
        "a": [1, 2.5, -0.0, 1e21, True, None, "\U0001f602"],
        "b": {},
        "c": _deep(127),
    }  # 128 levels in all
    assert ijson.check_value(value) is value


@settings(max_examples=300)
@given(json_values)
def test_canonical_round_trip(value: JsonValue) -> None:
    assert ijson.check_value(value) is value
    canonical = canonical_bytes(value)
    parsed = ijson.loads(canonical)
    assert parsed == value
    assert canonical_bytes(parsed) == canonical  # canonicalization is idempotent


def _only_malformed_or_ijson(data: bytes | str) -> None:
    # Any other exception (ValueError, RecursionError, ...) fails the test.
    try:
        value = ijson.loads(data)
    except Malformed:
        return
    ijson.check_value(value)  # whatever is accepted is I-JSON


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_malformed(data: bytes) -> None:
    _only_malformed_or_ijson(data)


@settings(max_examples=300)
@given(st.text(alphabet='[]{}",:0123456789eE.+-ntrufalsNIiy\\ud8', max_size=80))
def test_json_like_text_raises_only_malformed(text: str) -> None:
    _only_malformed_or_ijson(text)
    _only_malformed_or_ijson(text.encode("utf-8", "surrogatepass"))
