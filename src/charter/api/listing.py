"""The one answer of every list route: `{"items": [...], "next_cursor": ...}`.

`next_cursor` is the `cursor` of the next page, null on the last page and always null
on a list that is not paged. Lists answered under keys of their own before this envelope
(`processes`, `scheduled`, `queue`, `events`, `workflows`, `actors`, `machines`) carry
the same list under that key too, for one release: deprecated, documented as such in
/openapi.json, and removed in the release after.

A response model of a list route declares `items` and `next_cursor` with the fields
below, and its old key with `alias_field()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from charter.core.jsontypes import JsonObject, JsonValue

NEXT_CURSOR_DESCRIPTION = "Pass as `cursor` for the next page; null on the last page."
UNPAGED_DESCRIPTION = "Always null: this list is not paged."


def listing(
    items: Sequence[JsonValue],
    next_cursor: str | None = None,
    *,
    deprecated_key: str | None = None,
    **extra: JsonValue,
) -> JsonObject:
    """The envelope of `items`; `deprecated_key` repeats them under the list's old key,
    `extra` adds a list's other keys (the machines list's `can_change`)."""
    body: JsonObject = {"items": list(items), "next_cursor": next_cursor, **extra}
    if deprecated_key is not None:
        body[deprecated_key] = body["items"]
    return body


def cursor_field(*, paged: bool = True) -> Any:
    """The `next_cursor` field of a list's response model (required, maybe null)."""
    return Field(description=NEXT_CURSOR_DESCRIPTION if paged else UNPAGED_DESCRIPTION)


def alias_field() -> Any:
    """The field of a list's old key in its response model: optional and deprecated."""
    return Field(
        default_factory=list,
        deprecated=True,
        description="Deprecated: the same list as `items`, under the key this list had "
        "before the envelope; removed in the next release. Read `items`.",
    )
