from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

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
