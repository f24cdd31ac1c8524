"""RFC 8785 canonical bytes: the reference vectors byte for byte, and errors as Malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.core import ijson
from charter.core.canonical import canonical_bytes, canonical_hash, sha256_hex
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue

JCS = Path(__file__).parents[1] / "vectors" / "jcs"
NAMES = sorted(path.name for path in (JCS / "input").glob("*.json"))


def test_all_reference_vectors_are_present() -> None:
    assert NAMES == [
        "arrays.json",
        "french.json",
        "structures.json",
        "unicode.json",
        "values.json",
        "weird.json",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_jcs_reference_vector(name: str) -> None:
    value = ijson.loads((JCS / "input" / name).read_bytes())
    assert canonical_bytes(value) == (JCS / "output" / name).read_bytes()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": 2}, b'{"a":2,"b":1}'),
        # UTF-16 order, not code point order: U+1F602 (D83D DE02) sorts before U+FB33.
        ({"\ufb33": 1, "\U0001f602": 2}, '{"\U0001f602":2,"\ufb33":1}'.encode()),
        ([-0.0, 1e21, 1e-7, 1e-6, 100.0, 0.1], b"[0,1e+21,1e-7,0.000001,100,0.1]"),
        ("\u2028\x7f\x1f", '"\u2028\x7f\\u001f"'.encode()),
        ({}, b"{}"),
    ],
)
def test_canonical_bytes(value: JsonValue, expected: bytes) -> None:
    assert canonical_bytes(value) == expected


def test_sort_keys_json_is_not_jcs() -> None:
    # The reason the library is used (docs/architecture.md): json.dumps gets order and numbers
    # wrong.
    value: JsonValue = {"\ufb33": 1, "\U0001f602": 2.0}
    naive = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_bytes(value) != naive.encode()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), "not representable"),
        ({"a": float("inf")}, "not representable"),
        (2**53, "exceeds safe integer domain"),
        (-(2**53), "exceeds safe integer domain"),
        ("\ud800", "non-UTF-8"),
        ({1: "a"}, "keys must be strings"),
        ({"a": {1, 2}}, "unsupported type"),
    ],
)
def test_canonical_bytes_errors_are_malformed(value: object, expected: str) -> None:
    with pytest.raises(Malformed) as caught:
        canonical_bytes(value)  # type: ignore[arg-type]
    assert expected in caught.value.message


def test_hostile_nesting_is_malformed() -> None:
    value: list[JsonValue] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(Malformed, match="nesting"):
        canonical_bytes(value)


def test_sha256_hex() -> None:
    assert sha256_hex(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_canonical_hash_is_sha256_of_canonical_bytes() -> None:
    assert canonical_hash({"b": [1.0], "a": None}) == sha256_hex(b'{"a":null,"b":[1]}')
