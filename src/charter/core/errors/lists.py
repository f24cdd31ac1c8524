"""Refusals of the paged lists: a cursor, a limit or a filter this API does not take."""

from __future__ import annotations

from charter.core.errors import Malformed


class InvalidCursor(Malformed):
    """The cursor is not one this API returned."""

    code = "invalid_cursor"


class InvalidLimit(Malformed):
    """limit must be between 1 and 500."""

    code = "invalid_limit"


class InvalidFilter(Malformed):
    """A filter parameter is invalid."""

    code = "invalid_filter"
