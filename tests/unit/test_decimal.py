"""Decimals from outside, bounded before conversion."""

from __future__ import annotations

import pytest

from charter.core.decimal import UINT64_MAX, parse_decimal


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("7", 7), ("18446744073709551615", UINT64_MAX), ("100", 100)],
)
def test_canonical_decimals_within_the_bound(text: str, value: int) -> None:
    assert parse_decimal(text, UINT64_MAX) == value


@pytest.mark.parametrize(
    "text",
    ["", "01", "-1", "+1", " 1", "1 ", "1e3", "\u0661", "18446744073709551616", "9" * 5000],
)
def test_everything_else_is_none(text: str) -> None:
    assert parse_decimal(text, UINT64_MAX) is None


def test_the_bound_is_inclusive() -> None:
    assert parse_decimal("100", 100) == 100
    assert parse_decimal("101", 100) is None
