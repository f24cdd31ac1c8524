"""Times for people: relative to now, with the absolute UTC time beside it."""

from __future__ import annotations

from datetime import UTC, datetime

from charter.core.timefmt import parse_rfc3339


def relative(moment: datetime, now: datetime) -> str:
    """`in 5m`, `3h ago`, `now`: the largest whole unit."""
    seconds = (moment - now).total_seconds()
    size = abs(seconds)
    if size < 1:
        return "now"
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if size >= length:
            amount = f"{int(size // length)}{unit}"
            break
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def human(text: object, now: datetime | None = None) -> str:
    """An RFC 3339 time from the API as `in 5m (2026-06-18 10:05:00Z)`; `-` for none."""
    if not isinstance(text, str) or not text:
        return "-"
    moment = parse_rfc3339(text)
    absolute = moment.strftime("%Y-%m-%d %H:%M:%SZ")
    return f"{relative(moment, now or datetime.now(UTC))} ({absolute})"
