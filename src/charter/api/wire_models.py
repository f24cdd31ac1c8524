"""The pydantic models /openapi.json needs, derived from the wire dataclasses.

Routes answer with JSONResponse built from `charter.wire.to_json`; these models only
describe those answers, so they are made from the same fields and their `Meta`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from charter.wire.codec import (
    Wire,
    is_json_object,
    is_json_value,
    is_wire,
    items_of,
    optional_of,
    slots,
)
from charter.wire.patterns import TIME

# Schema names that differ from the class's, as the document has always called them.
_NAMES: dict[str, str] = {"RunStep": "Step"}


_MODELS: dict[tuple[type, bool], type[BaseModel]] = {}


def model(cls: type[Wire], *, creating: bool = False) -> type[BaseModel]:
    """The model of `cls` (one per class: the document names it once); `creating`: as the
    answer that created one (its `on_create` fields required), named `New<name>`."""
    if (cls, creating) not in _MODELS:
        name = _NAMES.get(cls.__name__, cls.__name__)
        fields: dict[str, Any] = _definitions(cls, creating)
        _MODELS[cls, creating] = create_model("New" + name if creating else name, **fields)
    return _MODELS[cls, creating]


def _definitions(cls: type[Wire], creating: bool) -> dict[str, tuple[Any, Any]]:
    found: dict[str, tuple[Any, Any]] = {}
    for slot in slots(cls):
        meta = slot.meta
        if meta.flatten:
            found.update(_definitions(slot.hint, creating))
            continue
        if meta.on_create and not creating:
            continue
        required = slot.required or (meta.on_create and creating)
        hint = _annotation(optional_of(slot.hint) if meta.on_create else slot.hint, meta.choices)
        description = meta.description
        if description is None and _is_time(slot.hint):
            description = TIME
        keywords: dict[str, Any] = {
            key: value
            for key, value in (
                ("pattern", meta.pattern),
                ("description", description),
                ("ge", meta.ge),
                ("alias", meta.key),
            )
            if value is not None
        }
        if meta.examples:
            keywords["examples"] = list(meta.examples)
        if not required:
            keywords["default"] = slot.default
        found[slot.name] = (hint, Field(**keywords))
    return found


def _is_time(hint: Any) -> bool:
    return hint is datetime or optional_of(hint) is datetime


def _annotation(hint: Any, choices: tuple[Any, ...] = ()) -> Any:
    if is_json_value(hint):
        return Any
    inner = optional_of(hint)
    if inner is not None:
        return _annotation(inner, choices) | None
    if choices:
        return Literal[choices]
    if hint is datetime:
        return str
    if is_json_object(hint):
        return dict[str, Any]
    if is_wire(hint):
        return model(hint)
    element = items_of(hint)
    if element is not None:
        return list[_annotation(element)]  # type: ignore[misc]
    return hint
