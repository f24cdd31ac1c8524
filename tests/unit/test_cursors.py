"""The one keyset cursor codec of every paged list."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.core.cursors import decode_cursor, encode_cursor


@given(
    st.datetimes(timezones=st.just(UTC)),
    st.text(min_size=1, max_size=60).filter(lambda s: "\x00" not in s),
)
def test_a_cursor_gives_back_the_instant_and_id_it_was_made_of(at: datetime, row_id: str) -> None:
    cursor = encode_cursor(at, row_id)
    assert "=" not in cursor  # unpadded: it travels in a query string as it is
    assert decode_cursor(cursor) == (at, row_id)


@pytest.mark.parametrize(
    "cursor",
    [
        "",  # nothing
        "!!!",  # not base64
        base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00").decode(),  # no id part
        base64.urlsafe_b64encode(b"yesterday|abc").decode(),  # not an instant
        base64.urlsafe_b64encode(b"\xff\xfe|abc").decode(),  # not UTF-8
    ],
)
def test_anything_else_is_a_value_error(cursor: str) -> None:
    with pytest.raises(ValueError, match=r".+"):  # any reason, said in words
        decode_cursor(cursor)
