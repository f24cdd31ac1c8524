"""The pydantic models /openapi.json needs, derived from the wire dataclasses.

Routes answer with JSONResponse built from `charter.wire.to_json`; these models only
describe those answers, so they are made from the same fields and their `Meta`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from charter.core.jsontypes import JsonValue
from charter.wire.codec import (
    Wire,
    is_json_object,
    is_json_value,
    is_wire,
    items_of,
    optional_of,
    slots,
    values_of,
)
from charter.wire.pages import Page
from charter.wire.patterns import TIME


@dataclass(frozen=True)
class Schema:
    """How the document names and describes one model of a class."""

    name: str
    description: str | None = None
    examples: tuple[JsonValue, ...] = ()


_EXAMPLE_HASH = "3b7f0c2e9d4a6b8c1e5f7a9d2c4e6b8a0f1d3c5e7a9b2d4f6c8e0a1b3d5f7c9e"
_EXAMPLE_PROCESS: JsonValue = {
    "id": "p-4f2a9c",
    "workflow": "customer/retail/retail-customer",
    "state": "open",
    "data": {"amount": 5},
    "head": _EXAMPLE_HASH,
    "seq": 1,
    "parent": None,
    "created_at": "2026-06-18T10:00:00.000Z",
    "updated_at": "2026-06-18T10:00:00.000Z",
}
_BAD_SIGNATURE: JsonValue = {
    "seq": 2,
    "code": "bad_signature",
    "message": "the signature does not verify",
}

# Models the document names or describes otherwise than by their class's name, as it
# has always called them; keyed by class name and variant ("", "New", "Detail").
_SCHEMAS: dict[tuple[str, str], Schema] = {
    ("RunStep", ""): Schema("Step"),
    ("Process", ""): Schema("ProcessBody", "`<process>` of docs/wire-format.md"),
    ("Process", "Detail"): Schema("ProcessWithChildren"),
    ("Event", ""): Schema("StoredEvent"),
    ("Workflow", ""): Schema("WorkflowDetail"),
    ("WorkItem", ""): Schema(
        "WorkRow", "A scheduled action or an automatic-action queue row, small and readable."
    ),
    ("WorkTableRow", ""): Schema(
        "WorkTableRow",
        "A row of `scheduled_actions` or `automation_queue` (docs/automation.md), every column.",
    ),
    ("Accepted", ""): Schema(
        "Accepted", examples=({"hash": _EXAMPLE_HASH, "seq": 1, "process": _EXAMPLE_PROCESS},)
    ),
    ("Verification", ""): Schema(
        "Verification",
        examples=(
            {"ok": True, "events": 3, "problems": []},
            {"ok": False, "events": 3, "problems": [_BAD_SIGNATURE]},
        ),
    ),
}


_MODELS: dict[tuple[type, str, str | None], type[BaseModel]] = {}


def model(
    cls: type[Wire],
    *,
    creating: bool = False,
    detail: bool = False,
    name: str | None = None,
    description: str | None = None,
) -> type[BaseModel]:
    """The model of `cls` (one per class and variant: the document names it once).
    `creating`: as the answer that created one (its `on_create` fields required), named
    `New<name>`; `detail`: as the answers that show it in detail (its `detail` fields
    required). `name` and `description`: a model of its own under that name."""
    variant = "New" if creating else "Detail" if detail else ""
    key = (cls, variant, name)
    if key not in _MODELS:
        schema = _SCHEMAS.get((cls.__name__, variant))
        if schema is None:
            plain = _SCHEMAS.get((cls.__name__, ""), Schema(cls.__name__)).name
            schema = Schema(f"New{plain}" if creating else f"{plain}Detail" if detail else plain)
        if name is not None:
            schema = Schema(name, description)
        config = ConfigDict(json_schema_extra={"examples": list(schema.examples)})
        fields: dict[str, Any] = _definitions(cls, creating, detail)
        _MODELS[key] = create_model(
            schema.name,
            __doc__=schema.description,
            __config__=config if schema.examples else None,
            **fields,
        )
    return _MODELS[key]


UNPAGED = "Always null: this list is not paged."
_OLD_KEY = (
    "Deprecated: the same list as `items`, under the key this list had before the "
    "envelope; removed in the next release. Read `items`."
)


def page_model(
    items: type[BaseModel],
    name: str,
    *,
    paged: bool = True,
    old_key: str | None = None,
    description: str | None = None,
    items_description: str | None = None,
    extra: dict[str, tuple[Any, Any]] | None = None,
) -> type[BaseModel]:
    """The model of a list route's answer: the wire `Page` of `items` (the model of each
    item), named `name`. Not `paged`: `next_cursor` is always null. `old_key`: the key the
    list had before the envelope, deprecated (charter.api.listing). `extra`: a list's
    other keys."""
    fields: dict[str, Any] = _definitions(Page, creating=False, detail=False)
    fields["items"] = (list[items], Field(description=items_description))  # type: ignore[valid-type]
    if not paged:
        fields["next_cursor"] = (fields["next_cursor"][0], Field(description=UNPAGED))
    if old_key is not None:
        fields[old_key] = (
            list[items],  # type: ignore[valid-type]
            Field(default_factory=list, deprecated=True, description=_OLD_KEY),
        )
    fields.update(extra or {})
    return create_model(name, __doc__=description, **fields)


def _definitions(cls: type[Wire], creating: bool, detail: bool) -> dict[str, tuple[Any, Any]]:
    found: dict[str, tuple[Any, Any]] = {}
    for slot in slots(cls):
        meta = slot.meta
        if meta.flatten:
            found.update(_definitions(slot.hint, creating, detail))
            continue
        if (meta.on_create and not creating) or (meta.detail and not detail):
            continue
        required = (
            slot.required
            or meta.required
            or (meta.on_create and creating)
            or (meta.detail and detail)
        )
        hint = _annotation(
            optional_of(slot.hint) if meta.on_create else slot.hint,
            meta.choices,
            meta.document_as,
        )
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


def _annotation(
    hint: Any, choices: tuple[Any, ...] = (), document_as: type[Wire] | None = None
) -> Any:
    if document_as is not None:
        # The attribute keeps JSON; the document says what that JSON is.
        return list[model(document_as)] if items_of(hint) is not None else model(document_as)  # type: ignore[misc]
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
    element = values_of(hint)
    if element is not None:
        return dict[str, _annotation(element)]  # type: ignore[misc]
    return hint
