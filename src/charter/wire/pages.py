"""The one envelope of every list the API answers: `{"items": [...], "next_cursor": ...}`.

A list that is not paged answers it too, `next_cursor` always null. What one list adds
(its deprecated old key, the machines list's `can_change`) is the server's and the
document's (`charter.api.listing`); readers only rely on these two keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar, cast

from charter.wire.codec import Meta, Wire

T = TypeVar("T")
W = TypeVar("W", bound=Wire)

NEXT_CURSOR = "Pass as `cursor` for the next page; null on the last page."


@dataclass(frozen=True)
class Page(Wire, Generic[T]):
    """One page of a listing; `next_cursor` fetches the next (None: this is the last).
    Read as `Page[Run]` (a wire object given as its argument), its items are parsed too."""

    items: tuple[T, ...]
    next_cursor: Annotated[str | None, Meta(description=NEXT_CURSOR, required=True)] = None


def page_of(item: type[W]) -> type[Page[W]]:
    """`Page[item]`, for an item class a caller holds in a variable."""
    return cast(Any, Page)[item]  # type: ignore[no-any-return]
