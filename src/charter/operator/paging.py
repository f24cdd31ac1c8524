"""Keyset pages for the operator views: opaque cursors, page sizes and filter checks.

A cursor is the sort key of the last row of a page, `(time, id)`, base64url-encoded: the
next page starts strictly after it, so rows committed meanwhile never shift a page
(no OFFSET). Bad input gets its own code, so a client can tell which parameter to fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from charter.core import cursors, identifiers
from charter.core.cursors import encode_cursor as encode_cursor
from charter.core.decimal import parse_decimal
from charter.core.errors.lists import InvalidCursor, InvalidFilter, InvalidLimit
from charter.core.timefmt import parse_rfc3339

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# Process ids (charter.processes_id_check). `_` is one of their characters and a LIKE
# wildcard too, so a prefix is escaped before it becomes a pattern; `%` and `\` cannot
# be in an id, so a `q` holding them is refused.
_ID_PREFIX = identifiers.NAME
_LIKE_SPECIAL = re.compile(r"([\\%_])")


@dataclass(frozen=True)
class Position:
    """Where a page starts: after (or before) this sort key."""

    at: datetime
    id: str


def check_limit(text: str | None) -> int:
    """`limit` as the query string has it (DEFAULT_LIMIT when absent): a whole number from
    1 to MAX_LIMIT, written in plain decimal. Anything else (a word, a sign, thousands of
    digits) is InvalidLimit, which echoes the text only when it is short."""
    if text is None:
        return DEFAULT_LIMIT
    limit = parse_decimal(text, MAX_LIMIT)
    if limit is None or limit < 1:
        shown = f", got {text}" if len(text) <= 20 else ""
        raise InvalidLimit(f"limit must be between 1 and {MAX_LIMIT}{shown}")
    return limit


def decode_cursor(cursor: str | None) -> Position | None:
    if cursor is None:
        return None
    try:
        moment, row_id = cursors.decode_cursor(cursor)
    except ValueError:
        raise InvalidCursor() from None
    if moment.tzinfo is None or not row_id:
        raise InvalidCursor()
    return Position(moment, row_id)


def moment(name: str, value: str | None) -> datetime | None:
    """An RFC 3339 time from a query parameter."""
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        raise InvalidFilter(
            f"{name} must be an RFC 3339 time such as 2026-01-31T12:00:00Z", parameter=name
        ) from None


def id_prefix(value: str | None) -> str | None:
    """`q`: the start of a process id, as a LIKE pattern matching the ids that begin with
    exactly these characters (escaped with LIKE's default escape, the backslash, which
    the planner reads through to bound its scan of the id prefix index)."""
    if value is None:
        return None
    if not _ID_PREFIX.fullmatch(value):
        raise InvalidFilter("q must be the start of a process id", parameter="q")
    return _LIKE_SPECIAL.sub(r"\\\1", value) + "%"


def workflow_filter(value: str | None) -> tuple[str | None, str | None]:
    """(exact path, prefix): `path` is exact, `prefix*` a prefix (`*` alone: any)."""
    if value is None or value == "":
        return None, None
    if value.endswith("*"):
        prefix = value[:-1]
        if "*" in prefix:
            raise InvalidFilter("workflow takes one trailing '*' only", parameter="workflow")
        return None, prefix
    if "*" in value:
        raise InvalidFilter("workflow takes one trailing '*' only", parameter="workflow")
    return value, None


def choice(name: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise InvalidFilter(f"{name} must be one of {list(allowed)}", parameter=name)
    return value
