"""The generic half of the wire objects: what a field says about itself (`Meta`), and the
two directions, `to_json` and `parse`, both read from the dataclass's annotations.

Stdlib only: the SDK imports this, and must stay light.
"""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, Union

from charter.core.jsontypes import JsonObject, JsonScalar, JsonValue
from charter.core.timefmt import TimeFormatError, format_rfc3339, parse_rfc3339

W = TypeVar("W", bound="Wire")


@dataclass(frozen=True)
class Meta:
    """What the document says of a field beyond its type, and how its key is written.

    `choices` are the values the document lists (an enum, or a constant); a reader does
    not refuse others, so a newer server's value still parses. `flatten`: the nested
    object's keys are this object's own (a detail object extends its record).
    `on_create`: the key is only in the answer that created the object. `detail`: the key
    is only in the answers that show the object in detail (a process's children).
    `required`: the server always sends the key, though a reader takes its absence as the
    default. `document_as`: the wire object the document describes the value (each item,
    for a list) as, while the attribute keeps the JSON as it came."""

    pattern: str | None = None
    description: str | None = None
    examples: tuple[JsonValue, ...] = ()
    ge: int | None = None
    choices: tuple[JsonScalar, ...] = ()
    key: str | None = None
    flatten: bool = False
    on_create: bool = False
    detail: bool = False
    required: bool = False
    document_as: type[Wire] | None = None


NO_META = Meta()


@dataclass(frozen=True)
class Wire:
    """Base of every wire object: `raw` keeps the JSON object a value was parsed from
    (empty for one built in code); it is not a field of the wire."""

    raw: JsonObject = field(
        default_factory=dict, repr=False, compare=False, kw_only=True, metadata={"wire": False}
    )


@dataclass(frozen=True)
class Slot:
    """One field of a wire object, resolved once per class."""

    name: str
    key: str
    hint: Any
    meta: Meta
    required: bool
    default: Any


_SLOTS: dict[type, tuple[Slot, ...]] = {}


def slots(cls: type[Wire]) -> tuple[Slot, ...]:
    """The wire fields of `cls` in declaration order (that order is the JSON's). A generic
    wire object given its arguments (`Page[Run]`) has its type variables replaced."""
    if cls in _SLOTS:
        return _SLOTS[cls]
    origin = class_of(cls)
    bound = dict(zip(getattr(origin, "__parameters__", ()), typing.get_args(cls), strict=False))
    hints = typing.get_type_hints(origin, include_extras=True)
    found = []
    for f in dataclasses.fields(origin):
        if not f.metadata.get("wire", True):
            continue
        hint = hints[f.name]
        meta = NO_META
        if typing.get_origin(hint) is typing.Annotated:
            hint, *extras = typing.get_args(hint)
            meta = next((m for m in extras if isinstance(m, Meta)), NO_META)
        hint = _bind(hint, bound)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else None
        found.append(Slot(f.name, meta.key or f.name, hint, meta, required, default))
    _SLOTS[cls] = tuple(found)
    return _SLOTS[cls]


def class_of(cls: Any) -> type[Wire]:
    """The class of `cls`, which may be a generic wire object given its arguments."""
    return typing.cast(type[Wire], typing.get_origin(cls) or cls)


def _bind(hint: Any, bound: dict[Any, Any]) -> Any:
    """`hint` with the type variables of `bound` replaced by their arguments."""
    if isinstance(hint, TypeVar):
        return bound.get(hint, hint)
    parameters = [p for p in getattr(hint, "__parameters__", ()) if p in bound]
    return hint[tuple(bound[p] for p in parameters)] if parameters else hint


def optional_of(hint: Any) -> Any | None:
    """`X` when `hint` is `X | None`, else None."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0]
    return None


def items_of(hint: Any) -> Any | None:
    """`X` when `hint` is `tuple[X, ...]` or `list[X]`, else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    if typing.get_origin(hint) is list:
        return args[0]
    return None


def values_of(hint: Any) -> Any | None:
    """`X` when `hint` is `dict[str, X]` other than `JsonObject`, else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is dict and args[0] is str and not is_json_value(args[1]):
        return args[1]
    return None


def is_json_value(hint: Any) -> bool:
    """Whether `hint` is `JsonValue` (resolved, it is a union of every JSON type)."""
    args = (
        set(typing.get_args(hint)) if typing.get_origin(hint) in (Union, types.UnionType) else set()
    )
    return {bool, int, float, str, type(None)} <= args


def is_json_object(hint: Any) -> bool:
    """Whether `hint` is `JsonObject`."""
    args = typing.get_args(hint)
    return typing.get_origin(hint) is dict and args[0] is str and is_json_value(args[1])


def is_wire(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Wire)


# --- to JSON ---------------------------------------------------------------------------


def to_json(obj: Any, shape: type[Wire] | None = None) -> JsonObject:
    """The JSON object of `obj` as `shape` (default: its own class) describes it.

    `obj` may be a wire object, or any object or mapping holding the fields by name (a
    server record): ids that are UUIDs become strings, times RFC 3339. A field with a
    default is left out when `obj` does not have it, an `on_create` one when it is None."""
    cls = shape or type(obj)
    out: JsonObject = {}
    for slot in slots(cls):
        value = _get(obj, slot.name)
        if value is _ABSENT or (slot.meta.on_create and value is None):
            if slot.required:
                raise TypeError(f"{type(obj).__name__} has no {slot.name!r} for {cls.__name__}")
            continue
        if slot.meta.flatten:
            out.update(to_json(value, slot.hint))
        else:
            out[slot.key] = _value(value, slot.hint)
    return out


_ABSENT: Any = object()


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, _ABSENT)
    return getattr(obj, name, _ABSENT)


def _value(value: Any, hint: Any) -> JsonValue:
    if value is None or is_json_value(hint):
        return typing.cast(JsonValue, value)
    inner = optional_of(hint)
    if inner is not None:
        return _value(value, inner)
    if isinstance(value, datetime):
        return format_rfc3339(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if is_wire(hint) and not isinstance(value, dict):
        return to_json(value, hint)
    element = items_of(hint)
    if element is not None and isinstance(value, list | tuple):
        return [_value(v, element) for v in value]
    element = values_of(hint)
    if element is not None and isinstance(value, Mapping):
        return {str(k): _value(v, element) for k, v in value.items()}
    # Already JSON: a scalar, or an object or list the record keeps as it was stored.
    return typing.cast(JsonValue, value)


# --- from JSON -------------------------------------------------------------------------


def parse(cls: type[W], body: JsonObject, error: Callable[[str], Exception]) -> W:
    """The `cls` that `body` holds; a missing or mistyped field raises `error(message)`,
    never a half-filled value. Times become aware datetimes; `raw` is `body`."""
    values: dict[str, Any] = {}
    what = _what(cls)
    for slot in slots(cls):
        if slot.meta.flatten:
            values[slot.name] = parse(slot.hint, body, error)
        elif slot.key in body:
            values[slot.name] = _read(body[slot.key], slot.hint, error, what, slot.key)
        elif slot.required:
            raise error(f"the {what} in the response has no {slot.key!r}")
    return class_of(cls)(**values, raw=body)  # type: ignore[return-value]


def _read(
    value: JsonValue, hint: Any, error: Callable[[str], Exception], what: str, key: str
) -> Any:
    def wrong(expected: str) -> Exception:
        return error(f"the {what} in the response has no {expected} {key!r}")

    if is_json_value(hint):
        return value
    inner = optional_of(hint)
    if inner is not None:
        return None if value is None else _read(value, inner, error, what, key)
    if hint is str:
        if not isinstance(value, str):
            raise wrong("string")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise wrong("boolean")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("integer")
        return value
    if hint is datetime:
        if not isinstance(value, str):
            raise wrong("RFC 3339 time")
        try:
            return parse_rfc3339(value)
        except TimeFormatError:
            raise wrong("RFC 3339 time") from None
    if is_json_object(hint):
        if not isinstance(value, dict):
            raise wrong("object")
        return value
    if is_wire(hint):
        if not isinstance(value, dict):
            raise wrong("object")
        return parse(hint, value, error)
    element = items_of(hint)
    if element is not None:
        if not isinstance(value, list):
            raise wrong("list")
        return tuple(_read(item, element, error, what, key) for item in value)
    element = values_of(hint)
    if element is not None:
        if not isinstance(value, dict):
            raise wrong("object")
        return {k: _read(v, element, error, what, key) for k, v in value.items()}
    raise TypeError(f"no reader for {hint!r}")


def _what(cls: type) -> str:
    """`RunStep` → "run step": how messages name an object."""
    name = class_of(cls).__name__
    return "".join(f" {c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))
