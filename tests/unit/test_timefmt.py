from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.core.timefmt import TimeFormatError, format_rfc3339, parse_rfc3339


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-06-18T10:00:00Z", datetime(2026, 6, 18, 10, tzinfo=UTC)),
        ("2026-06-18T10:00:00.123Z", datetime(2026, 6, 18, 10, 0, 0, 123000, tzinfo=UTC)),
        ("2026-06-18t10:00:00.123456789z", datetime(2026, 6, 18, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-06-18T12:00:00+02:00", datetime(2026, 6, 18, 10, tzinfo=UTC)),
        ("2026-06-18T05:30:00-04:30", datetime(2026, 6, 18, 10, tzinfo=UTC)),
    ],
)
def test_parses_rfc3339_to_utc(text: str, expected: datetime) -> None:
    assert parse_rfc3339(text) == expected
    assert parse_rfc3339(text).tzinfo == UTC


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-18",
        "2026-06-18T10:00:00",
        "2026-06-18 10:00:00Z",
        "2026-W25-1T10:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-06-18T10:00:00+24:00",
        "2026-06-18T10:00:00+05:60",
        "2026-06-18T23:59:60Z",
        "0000-01-01T00:00:00Z",
        "2026-06-18T10:00:00.Z",
        " 2026-06-18T10:00:00Z",
        "",
    ],
)
def test_rejects_what_rfc3339_does_not_allow(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_rfc3339(text)


def test_utc_only() -> None:
    with pytest.raises(TimeFormatError, match="UTC"):
        parse_rfc3339("2026-06-18T12:00:00+02:00", utc_only=True)
    assert parse_rfc3339("2026-06-18T10:00:00Z", utc_only=True).hour == 10


def test_canonical_format() -> None:
    moment = datetime(2026, 6, 18, 12, 0, 0, 987654, tzinfo=timezone(timedelta(hours=2)))
    assert format_rfc3339(moment) == "2026-06-18T10:00:00.987Z"
    with pytest.raises(TimeFormatError):
        format_rfc3339(datetime(2026, 1, 1))


def test_years_before_1000_keep_four_digits() -> None:
    assert format_rfc3339(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC)) == "0999-01-02T03:04:05.000Z"


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
    )
)
def test_the_canonical_form_parses_back_to_the_millisecond(moment: datetime) -> None:
    text = format_rfc3339(moment)
    assert len(text) == 24
    assert text.endswith("Z")
    back = parse_rfc3339(text, utc_only=True)
    assert back == moment.replace(microsecond=moment.microsecond // 1000 * 1000)
