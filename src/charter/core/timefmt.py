"""RFC 3339 timestamps: strict parsing and one canonical output form.

`datetime.fromisoformat` accepts much that RFC 3339 does not (week dates, no offset,
space separators), so inputs are matched against the RFC's grammar first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<time>\d{2}:\d{2}:\d{2})(?P<fraction>\.\d{1,9})?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})"
)


class TimeFormatError(ValueError):
    """Not an RFC 3339 timestamp."""


def parse_rfc3339(text: str, *, utc_only: bool = False) -> datetime:
    """Parse an RFC 3339 date-time into an aware UTC datetime.

    With `utc_only`, the offset must be `Z` (the envelope's `at`, docs/wire-format.md).
    """
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise TimeFormatError(f"not an RFC 3339 timestamp: {text!r}")
    offset = match["offset"]
    if utc_only and offset not in ("Z", "z"):
        raise TimeFormatError(f"timestamp must be UTC with a 'Z' suffix: {text!r}")
    try:
        if offset not in ("z", "Z") and (int(offset[1:3]) > 23 or int(offset[4:6]) > 59):
            raise ValueError("offset out of range")
        # The grammar is the regex's; since Python 3.11 fromisoformat reads all of it
        # (upper-cased: RFC 3339 allows 't' and 'z'), checks the calendar and truncates
        # a fraction beyond microseconds, as RFC 3339 leaves to the reader.
        moment = datetime.fromisoformat(text.upper())
    except ValueError as exc:
        raise TimeFormatError(f"not an RFC 3339 timestamp: {text!r} ({exc})") from None
    return moment.astimezone(UTC)


def format_rfc3339(moment: datetime) -> str:
    """The canonical form: UTC, millisecond precision, `Z` (e.g. 2026-06-18T10:00:00.000Z)."""
    if moment.tzinfo is None:
        raise TimeFormatError("cannot format a naive datetime")
    # isoformat truncates to milliseconds (as `// 1000` would) and always writes four
    # year digits; "+00:00" becomes "Z". A third of strftime's cost.
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
