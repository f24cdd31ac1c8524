"""Keyset cursors: where the next page of a list starts, as one opaque token.

A cursor is the sort instant and the id of the last row shown, `<ISO 8601>|<id>`, in
unpadded URL-safe base64. Each list decides which errors its own bad cursors raise.
"""

from __future__ import annotations

import base64
from datetime import datetime


def encode_cursor(at: datetime, row_id: str) -> str:
    raw = f"{at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The instant and id a cursor holds; ValueError for anything this API did not issue."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except UnicodeDecodeError as exc:
        raise ValueError("not a cursor") from exc
    at, separator, row_id = raw.partition("|")
    if not separator:
        raise ValueError("not a cursor")
    return datetime.fromisoformat(at), row_id
