"""Relative times in the operator's tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from charter.cli.when import human, relative

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)


def test_relative_uses_the_largest_whole_unit() -> None:
    assert relative(NOW + timedelta(minutes=90), NOW) == "in 1h"
    assert relative(NOW - timedelta(seconds=42), NOW) == "42s ago"
    assert relative(NOW + timedelta(days=3, hours=5), NOW) == "in 3d"
    assert relative(NOW, NOW) == "now"


def test_human_puts_the_absolute_time_beside_it() -> None:
    assert human("2026-06-18T10:05:00Z", NOW) == "in 5m (2026-06-18 10:05:00Z)"
    assert human(None, NOW) == "-"
