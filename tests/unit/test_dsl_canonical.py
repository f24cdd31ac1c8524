"""Canonical form and version hash of workflow definitions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue
from charter.dsl.canonical import canonical_definition, version_hash

EXAMPLE = Path(__file__).parents[2] / "examples" / "onboarding.json"


def test_canonical_bytes_are_jcs() -> None:
    doc: JsonValue = {
        "states": ["b", "a"],
        "dsl": 2,
        "roles": ["é"],
        "actions": {"z": {}, "a": {"n": 1.0}},
    }
    assert canonical_definition(doc) == (
        '{"actions":{"a":{"n":1},"z":{}},"dsl":2,"roles":["é"],"states":["b","a"]}'.encode()
    )


def test_version_hash_is_sha256_of_the_canonical_bytes() -> None:
    doc: JsonValue = {"dsl": 2, "states": ["a"]}
    expected = hashlib.sha256(b'{"dsl":2,"states":["a"]}').hexdigest()
    assert version_hash(doc) == expected
    assert len(expected) == 64


def test_key_order_and_whitespace_do_not_change_the_version() -> None:
    text = EXAMPLE.read_text()
    doc = json.loads(text)
    reordered = json.loads(json.dumps(doc, sort_keys=True, indent=7))
    reversed_keys = dict(reversed(list(doc.items())))
    assert version_hash(doc) == version_hash(reordered) == version_hash(reversed_keys)


def test_any_change_of_meaning_changes_the_version() -> None:
    doc = json.loads(EXAMPLE.read_text())
    changed = json.loads(EXAMPLE.read_text())
    changed["actions"]["start_screening"]["schedule"][0]["in"] = "49h"
    reordered_states = json.loads(EXAMPLE.read_text())
    reordered_states["states"].reverse()
    assert len({version_hash(doc), version_hash(changed), version_hash(reordered_states)}) == 3


def test_a_value_outside_i_json_is_malformed() -> None:
    with pytest.raises(Malformed):
        canonical_definition({"dsl": 2, "n": float("nan")})
