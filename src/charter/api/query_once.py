"""A query parameter that a route takes once, given twice, is 400 `malformed`.

FastAPI keeps the last of repeated values (`?workflow=a&workflow=b` filters by `b`), so a
request the document says is invalid would be answered as if it were another: refuse it
instead, for every route, as the contract test (schemathesis) demands.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from charter.core.errors import Malformed

_MANY = (list, tuple, set, frozenset)
_CACHE = "charter_single_valued_query"  # the names, kept on the route once computed


def _takes_many(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(_takes_many(arg) for arg in get_args(annotation))
    return origin in _MANY or annotation in _MANY


def _single_valued(route: APIRoute) -> tuple[str, ...]:
    """The names of the route's query parameters (its dependencies' too) that take one value."""
    names: set[str] = set()
    todo: list[Dependant] = [route.dependant]
    while todo:
        dependant = todo.pop()
        todo += dependant.dependencies
        names |= {
            f.alias for f in dependant.query_params if not _takes_many(f.field_info.annotation)
        }
    return tuple(sorted(names))


def query_once(request: Request) -> None:
    """An app-wide dependency: refuse a repeated single-valued query parameter."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    names: tuple[str, ...] | None = getattr(route, _CACHE, None)
    if names is None:
        names = _single_valued(route)
        setattr(route, _CACHE, names)
    for name in names:
        if len(request.query_params.getlist(name)) > 1:
            raise Malformed(f"the query parameter {name!r} is given more than once")
