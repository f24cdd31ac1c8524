"""RFC 6901 JSON pointers, as the v2 envelope's `sd` and its disclosures use them.

Only non-empty pointers are accepted (the whole document is never a personal field), and
they are resolved through objects only: a personal field's parent is always an object,
so a pointer never names an array element, whatever its segments look like (an input
property may well be called "0").
"""

from __future__ import annotations

import re
from typing import TypeGuard

from charter.core.jsontypes import JsonObject

# One or more "/token", each token free of "~" except as the escapes ~0 ("~") and ~1 ("/").
_POINTER = re.compile(r"(?:/(?:[^~/]|~[01])*)+")


def is_pointer(value: object) -> TypeGuard[str]:
    """Whether `value` is a non-empty RFC 6901 pointer with only valid `~` escapes."""
    return isinstance(value, str) and _POINTER.fullmatch(value) is not None


def tokens(pointer: str) -> list[str]:
    """The unescaped reference tokens of a pointer `is_pointer` accepts."""
    # ~1 before ~0, as RFC 6901 says: "~01" is the token "~1", not "/".
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def to_pointer(path: list[str]) -> str:
    """The pointer of a path of object keys (the inverse of `tokens`)."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def parent_object(document: JsonObject, path: list[str]) -> JsonObject | None:
    """The object holding the last key of `path`, walking objects only; None when a key
    on the way is absent or not an object."""
    node: JsonObject = document
    for key in path[:-1]:
        child = node.get(key)
        if type(child) is not dict:
            return None
        node = child
    return node


def holds(document: JsonObject, pointer: str) -> bool:
    """Whether `document` has a member at `pointer` (one `is_pointer` accepts), whatever
    its value, null included."""
    path = tokens(pointer)
    parent = parent_object(document, path)
    return parent is not None and path[-1] in parent


def overlap(first: str, second: str) -> bool:
    """Whether the values at two pointers overlap: one is, holds or lies inside the other."""
    return (first + "/").startswith(second + "/") or (second + "/").startswith(first + "/")
