"""Request bodies, read raw and parsed as strict I-JSON (never FastAPI's lenient JSON)."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from fastapi import Request

from charter.core import ijson
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject, JsonValue


async def json_body(request: Request) -> JsonValue:
    """The body as strict I-JSON; anything else is `malformed` (a body over the limit
    never reaches a route: the BodyLimit middleware answers 413 first)."""
    return ijson.loads(await request.body())


def fields(
    body: JsonValue,
    required: Set[str],
    optional: Set[str] = frozenset(),
) -> JsonObject:
    """A JSON object body with exactly these keys (`optional` may be absent)."""
    if not isinstance(body, dict):
        raise Malformed("the body must be a JSON object")
    missing = sorted(required - body.keys())
    unknown = sorted(body.keys() - required - optional)
    if missing or unknown:
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [f"unknown key(s) {', '.join(k[:40] for k in unknown)}"] if unknown else []
        raise Malformed(f"the body has {' and '.join(problems)}")
    return body


def text(body: JsonObject, key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise Malformed(f"{key} must be a string", field=key)
    return value


def strings(body: JsonObject, key: str) -> list[str]:
    value: Any = body.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Malformed(f"{key} must be a list of strings", field=key)
    return list(value)
