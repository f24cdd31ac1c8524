"""Disclosures of personal fields: the golden vector, JCS edge cases, strict parsing (every
`BadDisclosure`), and split/join round trips."""

from __future__ import annotations

import base64
import hashlib
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.core import pointers
from charter.core.disclosures import (
    Disclosure,
    digests,
    is_salt,
    join_disclosures,
    make_disclosure,
    new_salt,
    parse_disclosure,
    split_personal,
)
from charter.core.errors import BadDisclosure
from charter.core.ijson import MAX_SAFE_INTEGER
from charter.core.jsontypes import JsonObject

SALT = "2GLC42sKQveCfGfryNRN9w"
GOLDEN_TEXT = '["2GLC42sKQveCfGfryNRN9w","/name","Ada Lovelace"]'
GOLDEN_DIGEST = "ed7723ea6241cd3184601d640ce821b623a5642c2e885c3da6cff068def57051"
SECRET = "SECRET-VALUE-1234"  # must never show in an error message


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- The golden vector and JCS -----------------------------------------------------------


def test_golden_vector() -> None:
    disclosure = make_disclosure("/name", "Ada Lovelace", salt=SALT)
    assert disclosure == Disclosure(SALT, "/name", "Ada Lovelace", GOLDEN_TEXT, GOLDEN_DIGEST)
    assert parse_disclosure(GOLDEN_TEXT) == disclosure


@pytest.mark.parametrize(
    ("pointer", "value", "text"),
    [
        ("/name", "Zoë 日本 🙂", f'["{SALT}","/name","Zoë 日本 🙂"]'),
        ("/n", 1.0, f'["{SALT}","/n",1]'),
        ("/n", 1e21, f'["{SALT}","/n",1e+21]'),
        ("/n", -0.0, f'["{SALT}","/n",0]'),
        ("/n", 1e-7, f'["{SALT}","/n",1e-7]'),
        ("/n", 0.1, f'["{SALT}","/n",0.1]'),
        ("/n", -MAX_SAFE_INTEGER, f'["{SALT}","/n",-9007199254740991]'),
        ("/s", 'q"\\\n\x01', f'["{SALT}","/s","q\\"\\\\\\n\\u0001"]'),
        (
            "/address",
            {
                "street": "1 Rue",
                "city": {"zip": "75001", "name": "Paris"},
                "a": [3, {"y": 1, "x": 2}],
            },
            f'["{SALT}","/address",'
            '{"a":[3,{"x":2,"y":1}],"city":{"name":"Paris","zip":"75001"},"street":"1 Rue"}]',
        ),
        # JCS orders keys by UTF-16 code units: U+1F600 (a surrogate pair, D83D...) sorts
        # before U+E000, which code point order puts first.
        ("/k", {"\ue000": 1, "\U0001f600": 2}, f'["{SALT}","/k",{{"\U0001f600":2,"\ue000":1}}]'),
        ("/a~1b/~0c", None, f'["{SALT}","/a~1b/~0c",null]'),
    ],
)
def test_jcs_edge_cases(pointer: str, value: Any, text: str) -> None:
    disclosure = make_disclosure(pointer, value, salt=SALT)
    assert disclosure.text == text
    assert disclosure.digest == _sha256(text)
    parsed = parse_disclosure(text)
    assert (parsed.text, parsed.digest, parsed.pointer) == (text, disclosure.digest, pointer)
    assert parsed.value == value


def test_make_and_parse_round_trip_with_fresh_salts() -> None:
    first = make_disclosure("/email", "ada@example.org")
    second = make_disclosure("/email", "ada@example.org")
    assert first.salt != second.salt
    assert first.digest != second.digest
    for disclosure in (first, second):
        assert is_salt(disclosure.salt)
        assert parse_disclosure(disclosure.text) == disclosure


def test_new_salt_is_16_random_bytes() -> None:
    salt = new_salt()
    assert len(salt) == 22
    assert is_salt(salt)
    assert len(base64.urlsafe_b64decode(salt + "==")) == 16


@pytest.mark.parametrize("last", string.ascii_letters + string.digits + "-_")
def test_salt_last_character_is_one_that_16_bytes_can_end_with(last: str) -> None:
    # 22 characters hold 132 bits: the last one's 4 low bits must be zero for 16 bytes,
    # so exactly the salts that re-encode to themselves are accepted.
    salt = SALT[:21] + last
    encoded = base64.urlsafe_b64encode(base64.urlsafe_b64decode(salt + "==")).rstrip(b"=")
    assert is_salt(salt) == (encoded.decode() == salt)


# --- Strict parsing: every BadDisclosure -------------------------------------------------


def _secret_text(value: str) -> str:
    return f'["{SALT}","/name",{value}]'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b'["x"]', "must be a string"),
        ("[", "not strict I-JSON"),
        ("", "not strict I-JSON"),
        (f'["{SALT}","/name","{SECRET}"] x', "not strict I-JSON"),
        (_secret_text(f'{{"k":"{SECRET}","k":1}}'), "not strict I-JSON"),
        (_secret_text("NaN"), "not strict I-JSON"),
        (_secret_text("12345678901234567890"), "not strict I-JSON"),
        (_secret_text(f'"{SECRET}\\u0000"'), "not strict I-JSON"),
        (_secret_text(f'"{SECRET}\\ud800"'), "not strict I-JSON"),
        (f'{{"salt":"{SALT}","value":"{SECRET}"}}', "must be a JSON array"),
        (f'"{SECRET}"', "must be a JSON array"),
        (f'["{SALT}","/name"]', "must be a JSON array"),
        (f'["{SALT}","/name","{SECRET}",1]', "must be a JSON array"),
        (f'["{SALT[:21]}","/name","{SECRET}"]', "salt"),
        (f'["{SALT}A","/name","{SECRET}"]', "salt"),
        (f'["{SALT[:21]}x","/name","{SECRET}"]', "salt"),  # decodes to more than 16 bytes
        (f'["{SALT[:21]}=","/name","{SECRET}"]', "salt"),
        (f'["+{SALT[1:]}","/name","{SECRET}"]', "salt"),
        (f'[16,"/name","{SECRET}"]', "salt"),
        (f'["{SALT}","","{SECRET}"]', "pointer"),
        (f'["{SALT}","name","{SECRET}"]', "pointer"),
        (f'["{SALT}","/a~2","{SECRET}"]', "pointer"),
        (f'["{SALT}","/a~","{SECRET}"]', "pointer"),
        (f'["{SALT}",1,"{SECRET}"]', "pointer"),
        (f'[ "{SALT}","/name","{SECRET}"]', "canonical"),
        (f'["{SALT}", "/name","{SECRET}"]', "canonical"),
        (_secret_text("1.0"), "canonical"),
        (_secret_text("1E3"), "canonical"),
        (_secret_text('"\\u0041da"'), "canonical"),
        (_secret_text('"\\/"'), "canonical"),
        (_secret_text(f'{{"b":"{SECRET}","a":1}}'), "canonical"),
        (f'["{SALT}","/nam\\u0065","{SECRET}"]', "canonical"),
    ],
)
def test_parse_disclosure_rejects(text: Any, problem: str) -> None:
    with pytest.raises(BadDisclosure) as caught:
        parse_disclosure(text)
    assert problem in caught.value.message
    assert SECRET not in caught.value.message
    assert "1234567890" not in caught.value.message
    assert caught.value.code == "bad_disclosure"
    assert caught.value.http_status == 422


@pytest.mark.parametrize(
    ("pointer", "value", "salt", "problem"),
    [
        ("/n", SECRET, SALT[:21], "salt"),
        ("n", SECRET, SALT, "pointer"),
        ("", SECRET, SALT, "pointer"),
        ("/n", float("nan"), SALT, "not I-JSON"),
        ("/n", 2**60 + 1234567890, SALT, "not I-JSON"),
        ("/n", {"k": (SECRET,)}, SALT, "not I-JSON"),
        ("/n", f"{SECRET}\x00", SALT, "not I-JSON"),
    ],
)
def test_make_disclosure_rejects(pointer: str, value: Any, salt: str, problem: str) -> None:
    with pytest.raises(BadDisclosure) as caught:
        make_disclosure(pointer, value, salt=salt)
    assert problem in caught.value.message
    assert SECRET not in caught.value.message
    assert "1234567890" not in caught.value.message


# --- Split and join ----------------------------------------------------------------------

FULL: JsonObject = {
    "name": "Ada Lovelace",
    "address": {"street": "12 St James's Square", "city": "London"},
    "a/b": {"~c": 7},
    "0": "a digit key",
    "plan": "gold",
}
PERSONAL = ["/name", "/address/street", "/a~1b", "/0", "/phone", "/missing/below"]


def test_split_and_join_round_trip() -> None:
    clear, disclosed = split_personal(FULL, PERSONAL)
    assert clear == {"address": {"city": "London"}, "plan": "gold"}
    assert [d.pointer for d in disclosed] == ["/0", "/a~1b", "/address/street", "/name"]
    assert {d.pointer: d.value for d in disclosed}["/a~1b"] == {"~c": 7}
    assert FULL["address"] == {"street": "12 St James's Square", "city": "London"}  # unchanged
    sd = digests(disclosed)
    texts = [d.text for d in reversed(disclosed)]  # any order
    assert join_disclosures(clear, sd, texts) == FULL


def test_split_takes_an_ancestor_whole() -> None:
    clear, disclosed = split_personal(FULL, ["/address/street", "/address"])
    assert "address" not in clear
    assert [(d.pointer, d.value) for d in disclosed] == [("/address", FULL["address"])]


def test_split_with_nothing_personal_present() -> None:
    clear, disclosed = split_personal({"plan": "gold"}, ["/name", "/plan/x"])
    assert (clear, disclosed, digests(disclosed)) == ({"plan": "gold"}, (), {})
    assert join_disclosures(clear, {}, []) == clear


def test_split_refuses_a_bad_pointer() -> None:
    with pytest.raises(ValueError, match="pointer"):
        split_personal(FULL, ["name"])


def test_join_does_not_change_its_input() -> None:
    clear, disclosed = split_personal(FULL, ["/name"])
    before = dict(clear)
    join_disclosures(clear, digests(disclosed), [d.text for d in disclosed])
    assert clear == before


def _sd_and_texts() -> tuple[JsonObject, dict[str, str], list[str]]:
    clear, disclosed = split_personal(FULL, ["/name", "/address/street"])
    return clear, digests(disclosed), [d.text for d in disclosed]


def test_join_rejects_a_missing_disclosure() -> None:
    clear, sd, texts = _sd_and_texts()
    with pytest.raises(BadDisclosure, match="no disclosure for /name"):
        join_disclosures(clear, sd, texts[:1])


def test_join_rejects_an_extra_disclosure() -> None:
    clear, sd, texts = _sd_and_texts()
    extra = make_disclosure("/plan2", SECRET).text
    with pytest.raises(BadDisclosure, match="/plan2 matches no entry of sd") as caught:
        join_disclosures(clear, sd, [*texts, extra])
    assert SECRET not in caught.value.message


def test_join_rejects_a_duplicate_disclosure() -> None:
    clear, sd, texts = _sd_and_texts()
    with pytest.raises(BadDisclosure, match="more than one disclosure for /address/street"):
        join_disclosures(clear, sd, [texts[0], *texts])


def test_join_rejects_a_digest_mismatch() -> None:
    clear, sd, texts = _sd_and_texts()
    forged = make_disclosure("/name", SECRET).text
    with pytest.raises(BadDisclosure, match="/name does not match its digest") as caught:
        join_disclosures(clear, sd, [texts[0], forged])
    assert SECRET not in caught.value.message


def test_join_rejects_a_disclosure_that_is_not_strict() -> None:
    clear, sd, texts = _sd_and_texts()
    with pytest.raises(BadDisclosure, match="canonical"):
        join_disclosures(clear, sd, [texts[0], texts[1].replace(",", ", ", 1)])


def test_join_rejects_no_free_place() -> None:
    """The envelope's sd rules rule this out; a direct caller gets an answer too."""
    disclosure = make_disclosure("/name", SECRET)
    with pytest.raises(BadDisclosure, match="no free place") as caught:
        join_disclosures({"name": "x"}, digests([disclosure]), [disclosure.text])
    assert SECRET not in caught.value.message
    below = make_disclosure("/plan/x", SECRET)
    with pytest.raises(BadDisclosure, match="no free place"):
        join_disclosures({"plan": "gold"}, digests([below]), [below.text])


def test_join_refuses_one_string_for_the_texts() -> None:
    clear, sd, texts = _sd_and_texts()
    with pytest.raises(TypeError):
        join_disclosures(clear, sd, texts[0])


# --- Property: join undoes split -----------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not MAX_SAFE_INTEGER < abs(f) < 1e21
    )
    | _text
)
_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)
_inputs = st.dictionaries(_text | st.sampled_from(["a/b", "~", "~1", "0", ""]), _values)


@given(data=st.data())
def test_join_undoes_split(data: st.DataObject) -> None:
    full = data.draw(_inputs)
    keys = data.draw(st.sets(st.sampled_from(sorted(full))) if full else st.just(set[str]()))
    personal = [pointers.to_pointer([key]) for key in keys]
    clear, disclosed = split_personal(full, personal)
    assert set(clear) == set(full) - keys
    assert {d.pointer for d in disclosed} == set(personal)
    for disclosure in disclosed:
        assert parse_disclosure(disclosure.text) == disclosure
    assert join_disclosures(clear, digests(disclosed), [d.text for d in disclosed]) == full
