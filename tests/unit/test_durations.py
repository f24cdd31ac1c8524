"""Durations: `<integer><unit>` with units s m h d w y (docs/automation.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.core.errors.workflows import DurationError
from charter.dsl.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1s", timedelta(seconds=1)),
        ("90s", timedelta(seconds=90)),
        ("1m", timedelta(minutes=1)),
        ("15m", timedelta(minutes=15)),
        ("1h", timedelta(hours=1)),
        ("48h", timedelta(hours=48)),
        ("1d", timedelta(days=1)),
        ("30d", timedelta(days=30)),
        ("1w", timedelta(weeks=1)),
        ("2w", timedelta(days=14)),
        ("1y", timedelta(days=365)),
        ("4y", timedelta(days=1460)),
        ("10y", timedelta(days=3650)),
    ],
)
def test_parse_every_unit(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0s",
        "0y",
        "-1h",
        "+1h",
        "1.5h",
        "1,5h",
        "1e3s",
        "048h",
        "h",
        "48",
        "48x",
        "48H",
        "48 h",
        " 48h",
        "48h ",
        "48hh",
        "1h30m",
        "\u0661h",  # ARABIC-INDIC DIGIT ONE: str.isdigit() would accept it
        "99999999999999999999y",
        "999999999999999999y",
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert repr(text) in caught.value.message


def test_rejection_names_the_rule() -> None:
    with pytest.raises(DurationError, match="s m h d w y"):
        parse_duration("2 days")


def test_parse_rejects_non_text() -> None:
    with pytest.raises(DurationError):
        parse_duration(48)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(seconds=1), "1s"),
        (timedelta(seconds=59), "59s"),
        (timedelta(seconds=61), "61s"),
        (timedelta(seconds=120), "2m"),
        (timedelta(hours=1), "1h"),
        (timedelta(hours=36), "36h"),
        (timedelta(seconds=172_800), "2d"),
        (timedelta(days=6), "6d"),
        (timedelta(days=7), "1w"),
        (timedelta(days=364), "52w"),
        (timedelta(days=365), "1y"),
        (timedelta(days=366), "366d"),
        (timedelta(days=730), "2y"),
        (timedelta(days=2555), "7y"),  # 2555 = 7 * 365 = 365 * 7: y wins over w
    ],
)
def test_format_picks_the_largest_exact_unit(delta: timedelta, expected: str) -> None:
    assert format_duration(delta) == expected


@pytest.mark.parametrize(
    "delta", [timedelta(0), timedelta(seconds=-60), timedelta(milliseconds=1500)]
)
def test_format_rejects_what_cannot_be_written(delta: timedelta) -> None:
    with pytest.raises(DurationError):
        format_duration(delta)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from("smhdwy"))
def test_format_then_parse_is_identity(count: int, unit: str) -> None:
    delta = parse_duration(f"{count}{unit}")
    assert parse_duration(format_duration(delta)) == delta
