"""Whole numbers written in decimal by someone outside: bounded before they are converted.

Python's `int()` refuses strings of more than 4,300 digits with a ValueError, and spends
time quadratic in the length below that. Every decimal that comes from outside (a path,
a header, a wire text) goes through here, so a hostile one is refused as malformed by
its length alone, never reaches `int()` unbounded, and never becomes a 500.
"""

from __future__ import annotations

import re

UINT64_MAX = 2**64 - 1

_CANONICAL = re.compile(r"0|[1-9][0-9]*")


def parse_decimal(text: str, maximum: int) -> int | None:
    """The value of `text` when it is a canonical decimal (digits, no sign, no leading
    zero but for 0 itself) of at most `maximum`; None for anything else."""
    if len(text) > len(str(maximum)) or not _CANONICAL.fullmatch(text):
        return None
    value = int(text)
    return value if value <= maximum else None
