"""Durations of the workflow DSL (docs/dsl.md): `<integer><unit>`, e.g. `48h`, `1y`.

Units are `s m h d w y`, with `y` exactly 365 days (no calendar arithmetic). The number
is a positive decimal integer without sign, leading zeros, fraction or spaces, so every
duration has one spelling per unit and a typo never silently means something else.
"""

from __future__ import annotations

import re
from datetime import timedelta

from charter.core.errors.workflows import DurationError

_UNITS: dict[str, int] = {
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86_400,
    "w": 7 * 86_400,
    "y": 365 * 86_400,
}
# Largest unit first, so format_duration picks the largest exact one.
_BY_SIZE = sorted(_UNITS.items(), key=lambda item: item[1], reverse=True)
# 18 digits is far beyond any timedelta and keeps int() away from huge inputs.
_DURATION = re.compile(r"(?P<count>[1-9][0-9]{0,17})(?P<unit>[smhdwy])")
_RULE = "expected <integer><unit>: a positive whole number then one of s m h d w y, e.g. 48h"


def parse_duration(text: str) -> timedelta:
    """Parse `<integer><unit>` into a positive timedelta; DurationError otherwise."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise DurationError(f"not a duration: {text!r} ({_RULE})", text=text)
    seconds = int(match["count"]) * _UNITS[match["unit"]]
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise DurationError(f"duration too long: {text!r}", text=text) from None


def format_duration(delta: timedelta) -> str:
    """The shortest spelling of a positive whole-second duration: 172800s -> "2d"."""
    if delta <= timedelta(0) or delta.microseconds:
        raise DurationError(f"not a positive whole number of seconds: {delta!r}")
    seconds = delta // timedelta(seconds=1)
    unit, size = next((u, n) for u, n in _BY_SIZE if seconds % n == 0)
    return f"{seconds // size}{unit}"
