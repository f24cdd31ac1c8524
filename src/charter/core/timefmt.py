"""RFC 3339 timestamps: strict parsing and one canonical output form.

`datetime.fromisoformat` accepts much that RFC 3339 does not (week dates, no offset,
space separators), so inputs are matched against the RFC's grammar first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<time>\d{2}:\d{2}:\d{2})(?P<fraction>\.\d{1,9})?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})"
)


class TimeFormatError(ValueError):
    """Not an RFC 3339 timestamp."""


def parse_rfc3339(text: str, *, utc_only: bool = False) -> datetime:
    """Parse an RFC 3339 date-time into an aware UTC datetime.

    With `utc_only`, the offset must be `Z` (the envelope's `at`, DESIGN §3).
    """
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise TimeFormatError(f"not an RFC 3339 timestamp: {text!r}")
    offset = match["offset"]
    if utc_only and offset not in ("Z", "z"):
        raise TimeFormatError(f"timestamp must be UTC with a 'Z' suffix: {text!r}")
    fraction = (match["fraction"] or "")[1:7].ljust(6, "0")
    try:
        naive = datetime.fromisoformat(f"{match['date']}T{match['time']}")
        tz = UTC if offset in ("Z", "z") else _offset(offset)
    except ValueError as exc:
        raise TimeFormatError(f"not an RFC 3339 timestamp: {text!r} ({exc})") from None
    return naive.replace(microsecond=int(fraction), tzinfo=tz).astimezone(UTC)


def _offset(text: str) -> timezone:
    sign = -1 if text[0] == "-" else 1
    hours, minutes = int(text[1:3]), int(text[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError("offset out of range")
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def format_rfc3339(moment: datetime) -> str:
    """The canonical form: UTC, millisecond precision, `Z` (e.g. 2026-06-18T10:00:00.000Z)."""
    if moment.tzinfo is None:
        raise TimeFormatError("cannot format a naive datetime")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
