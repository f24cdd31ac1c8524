"""JSON payloads for the functions that take a whole batch of writes in one statement
(apply_writes_v1, record_results_v1): JSON values plus the timestamps and ids they carry."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any


def dumps_payload(value: Any) -> str:
    """Compact JSON text; datetimes as ISO 8601 with their offset, UUIDs as text."""
    return json.dumps(value, default=_default, separators=(",", ":"), ensure_ascii=False)


def _default(value: object) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise TypeError("cannot send a naive datetime: it would be read as local time")
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} as JSON")
