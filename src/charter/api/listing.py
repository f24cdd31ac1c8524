"""The one answer of every list route: `{"items": [...], "next_cursor": ...}`.

`next_cursor` is the `cursor` of the next page, null on the last page and always null
on a list that is not paged. Lists answered under keys of their own before this envelope
(`processes`, `scheduled`, `queue`, `events`, `workflows`, `actors`, `machines`) carry
the same list under that key too, for one release: deprecated, documented as such in
/openapi.json, and removed in the release after.

The envelope is the wire `Page` (charter.wire.pages); the response model of a list
route is `wire_models.page_model`, which documents the old key as deprecated.
"""

from __future__ import annotations

from collections.abc import Sequence

from charter import wire
from charter.core.jsontypes import JsonObject, JsonValue
from charter.wire.pages import Page


def listing(
    items: Sequence[JsonValue],
    next_cursor: str | None = None,
    *,
    deprecated_key: str | None = None,
    **extra: JsonValue,
) -> JsonObject:
    """The envelope of `items`; `deprecated_key` repeats them under the list's old key,
    `extra` adds a list's other keys (the machines list's `can_change`)."""
    body: JsonObject = {**wire.to_json(Page(tuple(items), next_cursor)), **extra}
    if deprecated_key is not None:
        body[deprecated_key] = body["items"]
    return body
