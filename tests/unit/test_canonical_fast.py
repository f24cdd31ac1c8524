"""The C-encoder path to RFC 8785 bytes agrees with the `rfc8785` package, by property.

Three promises are checked over random values and texts: `fast_canonical_bytes` never
answers differently from rfc8785 (and answers for the common values); `parse_canonical`
only vouches for texts that are canonical I-JSON, returning exactly what the strict
parser does; and an envelope parsed through the fast path has the same message, and is
accepted or refused exactly like one parsed strictly.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
import rfc8785
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from charter.core import ijson
from charter.core.canonical import canonical_bytes
from charter.core.canonical_fast import encodes_to, fast_canonical_bytes, parse_canonical
from charter.core.envelope import Envelope
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonValue

MAX = 2**53 - 1
# Characters where JCS and the C encoder could part: controls (escapes), quote and
# backslash, U+2028 and DEL (written raw by both), the top of the BMP (U+E000..U+FFFF sorts
# above a surrogate pair in UTF-16 but below it by code point) and characters above U+FFFF.
TRICKY = st.sampled_from(
    [
        "\x01",
        "\x1f",
        "\b",
        "\t",
        "\n",
        '"',
        "\\",
        "/",
        "\u2028",
        "\x7f",
        "é",
        "\ufb33",
        "\uffff",
        "\ue000",
        "\U0001f602",
        "\U00010000",
        "a",
        "b",
        "A",
        "0",
    ]
)
chars = st.characters(codec="utf-8", exclude_characters="\x00") | TRICKY
text = st.text(chars, max_size=8)
keys = st.text(chars, max_size=4)

# I-JSON scalars: the values a parsed envelope can hold.
ijson_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX, MAX)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not MAX < abs(f) < 1e21)
    | text
)
# Beyond I-JSON too: integers JCS refuses, non-finite floats, lone surrogates.
wide_scalars = (
    ijson_scalars
    | st.integers(-(2**64), 2**64)
    | st.sampled_from([float("nan"), float("inf"), -0.0, 1e21, 1e-7, 5e-324, 2.0**53])
    | st.sampled_from(["\ud800", "a\udfffb"])
)
# The common case: no floats at all.
common_scalars = st.none() | st.booleans() | st.integers(-MAX, MAX) | text


def _values(scalars: st.SearchStrategy[Any], key: st.SearchStrategy[str]) -> Any:
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(key, children, max_size=5)
        ),
        max_leaves=20,
    )


ijson_values = _values(ijson_scalars, keys)
wide_values = _values(wide_scalars, keys | st.sampled_from(["\ud800"]))
bmp_keys = st.text(chars.filter(lambda c: c <= "\uffff"), max_size=4)
common_values = _values(common_scalars, bmp_keys)


class Level(enum.IntEnum):
    LOW = 1


def _reference(value: object) -> bytes | None:
    try:
        return rfc8785.dumps(value)  # type: ignore[arg-type]
    except (rfc8785.CanonicalizationError, UnicodeEncodeError, RecursionError):
        return None


def _strictly_canonical(text: str) -> tuple[JsonValue] | None:
    """The value of `text` (in a 1-tuple: it may be null) if the strict parser accepts it
    and it is its own JCS form."""
    try:
        value = ijson.loads(text)
    except Malformed:
        return None
    return (value,) if _reference(value) == text.encode("utf-8") else None


# --- value → bytes --------------------------------------------------------------------------


@settings(max_examples=600)
@given(wide_values)
def test_fast_bytes_are_rfc8785_bytes_or_no_answer(value: object) -> None:
    reference = _reference(value)
    fast = fast_canonical_bytes(value)
    assert fast is None or fast == reference
    if reference is None:
        with pytest.raises(Malformed):
            canonical_bytes(value)  # type: ignore[arg-type]
    else:
        assert canonical_bytes(value) == reference  # type: ignore[arg-type]


@settings(max_examples=300)
@given(common_values)
def test_fast_bytes_answer_for_the_common_case(value: JsonValue) -> None:
    assert fast_canonical_bytes(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"\ufb33": 1, "\U0001f602": 2},  # UTF-16 order differs from code point order
        [1.0],
        [0.5],
        2**53,
        {1: "a"},  # the C encoder would write the key as "1"
        (1, 2),
        Level.LOW,  # a subclass may print differently
        "\ud800",
    ],
)
def test_fast_bytes_leave_the_hard_cases_to_rfc8785(value: object) -> None:
    assert fast_canonical_bytes(value) is None


def test_a_lone_surrogate_key_is_malformed_not_a_crash() -> None:
    with pytest.raises(Malformed, match="non-UTF-8"):
        canonical_bytes({"\ud800": 1})


# --- text → value -----------------------------------------------------------------------


def _variants(value: Any) -> list[str]:
    """Texts of `value` (and near misses) that a verifier could be handed."""
    texts = [
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True),
        json.dumps(value, separators=(",", ":"), ensure_ascii=False),
        json.dumps(value, sort_keys=True, ensure_ascii=False),
        json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False),
    ]
    reference = _reference(value)
    if reference is not None:
        canonical = reference.decode("utf-8")
        texts += [
            canonical,
            canonical + " ",
            canonical + "0",
            canonical.replace("/", "\\/"),
            canonical.replace("é", "\\u00e9"),
            canonical.replace("\\u001f", "\\u001F"),
            canonical.replace(":1", ":1.0"),
            canonical.replace(":0", ":-0"),
            canonical.replace("{", '{"":0,', 1),  # a duplicate key when "" is present
            canonical.replace('{"', '{"a":1,"', 1),
        ]
    return texts


@settings(max_examples=400)
@given(ijson_values)
def test_parse_canonical_vouches_only_for_canonical_i_json(value: Any) -> None:
    for candidate in _variants(value):
        answer = parse_canonical(candidate)
        if answer is not None:
            strict = _strictly_canonical(candidate)
            assert strict is not None, candidate
            assert repr(answer.value) == repr(strict[0])  # same types, same order
            assert answer.message == candidate.encode("utf-8")


@settings(max_examples=300)
@given(common_values)
def test_parse_canonical_answers_for_canonical_common_values(value: JsonValue) -> None:
    canonical = rfc8785.dumps(value).decode("utf-8")
    # The fast path leaves every text holding the six characters \u0000 to the strict
    # parser, even an escaped backslash followed by "u0000": "not decided here" is allowed.
    assume("\\u0000" not in canonical)
    answer = parse_canonical(canonical)
    assert answer is not None
    assert repr(answer.value) == repr(ijson.loads(canonical))


@settings(max_examples=400)
@given(st.text(alphabet='[]{}",:0123456789eE.+-ntrufalsNIiy\\ud8é\U0001f602', max_size=60))
def test_parse_canonical_is_sound_on_arbitrary_text(candidate: str) -> None:
    answer = parse_canonical(candidate)
    if answer is not None:
        assert repr((answer.value,)) == repr(_strictly_canonical(candidate))


@pytest.mark.parametrize(
    "candidate",
    [
        '{"a":1,"a":1}',  # duplicate key
        '{"a":1e400}',
        '{"a":NaN}',
        '{"a":9007199254740992}',  # beyond ±(2**53 - 1)
        '{"a":1.5}',  # floats are left to rfc8785
        '{"\\u0000":1}',
        '"\\ud800"',
        '"\ud800"',  # a lone surrogate in the text itself
        '{"\U0001f602":1}',  # not BMP
        "[" * 129 + "]" * 129,
        '{"a":1} ',
        ' {"a":1}',
        "",
    ],
)
def test_parse_canonical_leaves_these_to_the_strict_path(candidate: str) -> None:
    assert parse_canonical(candidate) is None


# --- a parsed value against a known message ---------------------------------------------


@settings(max_examples=400)
@given(ijson_values, ijson_values)
def test_encodes_to_is_never_wrong(value: JsonValue, other: JsonValue) -> None:
    message = rfc8785.dumps(value)
    for candidate in (value, other, _floats_for_ints(value)):
        checked = ijson.check_value(candidate)
        if encodes_to(checked, message):
            assert rfc8785.dumps(checked) == message


def _floats_for_ints(value: Any) -> Any:
    # JCS writes 1.0 as 1: the same message from a different Python value.
    if type(value) is int and abs(value) < 2**52:
        return float(value)
    if type(value) is list:
        return [_floats_for_ints(item) for item in value]
    if type(value) is dict:
        return {key: _floats_for_ints(item) for key, item in value.items()}
    return value


# --- envelopes ----------------------------------------------------------------------------

ACTOR = "a" * 64


def _envelope_json(input_: Any, at: str) -> dict[str, Any]:
    return {
        "v": 1,
        "process": "p-1",
        "workflow": "tests/fast",
        "action": "note",
        "input": input_,
        "prev": None,
        "actor": ACTOR,
        "at": at,
    }


def _outcome(parse: Any, candidate: str) -> tuple[str, bytes | str]:
    try:
        return "ok", parse(candidate).message()
    except Malformed as exc:
        return "malformed", exc.message


@settings(max_examples=300)
@given(
    st.dictionaries(keys, wide_values, max_size=4) | wide_values,
    st.sampled_from(["2026-06-18T10:00:00.000Z", "2026-06-18T10:00:00Z", "yesterday"]),
)
def test_an_envelope_parses_the_same_through_the_fast_path(input_: Any, at: str) -> None:
    def strict(candidate: str) -> Envelope:
        return Envelope.from_json(ijson.loads(candidate))

    for candidate in _variants(_envelope_json(input_, at)):
        fast = _outcome(Envelope.from_text, candidate)
        assert fast == _outcome(strict, candidate)
        # A verifier calls text canonical when the message is the text itself: never
        # more often than rfc8785 would.
        if fast[0] == "ok" and fast[1] == candidate.encode("utf-8"):
            assert _strictly_canonical(candidate) is not None
