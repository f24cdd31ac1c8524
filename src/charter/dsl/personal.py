"""Personal input fields (`"x-personal": true`) and where their values may go (docs/dsl.md).

A personal value is committed to in the signed event by a salted digest and kept beside
it, so that it can be erased without breaking the chain. That holds only if the value
never reaches a place that cannot be erased: the work rows of schedules and automatic
actions, and the unsigned first event of a spawned process. `personal_pointers` finds an
action's personal fields in its input schema; `flows_out` follows each through the
`mutate` of every action (a document field set from a personal value is personal too)
and reports every template that would carry one out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from charter.core.jsontypes import JsonValue
from charter.dsl.checks import Path, Problems
from charter.dsl.model import Action, json_pointer
from charter.dsl.templates import Template

PERSONAL = "x-personal"

# Keywords whose value is one schema / a list of schemas / a map of name -> schema. A
# property reached through anything but `properties` has no fixed pointer in the input.
_ARRAY_SCHEMA = ("items", "contains", "additionalItems", "unevaluatedItems")
_ARRAY_SCHEMAS = ("prefixItems",)
_OTHER_SCHEMA = (
    "additionalProperties", "unevaluatedProperties", "propertyNames", "not", "if", "then",
    "else",
)  # fmt: skip
_OTHER_SCHEMAS = ("allOf", "anyOf", "oneOf")
_OTHER_SCHEMA_MAPS = ("$defs", "definitions", "patternProperties", "dependentSchemas")

# Where a template reads from: a reserved root, or else the process document, whose
# paths are kept under _DOCUMENT so that the whole document (a `$merge` at the root) is
# not the empty path every reference starts with.
_INPUT = "input"
_DOCUMENT = "\0document"
_OTHER_ROOTS = frozenset({"actor", "event", "process", "now"})

Dotted = tuple[str, ...]


def personal_pointers(out: Problems, schema: JsonValue, path: Path) -> tuple[str, ...]:
    """The RFC 6901 pointers of the input properties `schema` marks personal, in schema
    order; every misplaced or nested mark is recorded in `out` (`path` is the schema's)."""
    found: list[str] = []
    _visit(out, schema, path, (), inside=False, in_array=False, found=found)
    return tuple(found)


def _visit(
    out: Problems,
    schema: JsonValue,
    path: Path,
    segments: tuple[str, ...] | None,
    *,
    inside: bool,
    in_array: bool,
    found: list[str],
) -> None:
    """`segments`: the input property path this schema describes, None when the schema
    does not describe one fixed property (under allOf, patternProperties, ...)."""
    if not isinstance(schema, dict):
        return
    marked = _mark(out, schema, path, segments, inside=inside, in_array=in_array)
    if marked and segments:
        found.append(json_pointer(*segments))
    inside = inside or marked
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, child in properties.items():
            below = None if segments is None else (*segments, name)
            _visit(out, child, (*path, "properties", name), below,
                   inside=inside, in_array=in_array, found=found)  # fmt: skip
    for where, child in _subschemas(schema, path):
        is_array = where[-1] in _ARRAY_SCHEMA or (len(where) > 1 and where[-2] in _ARRAY_SCHEMAS)
        _visit(out, child, where, None,
               inside=inside, in_array=in_array or is_array, found=found)  # fmt: skip


def _mark(
    out: Problems,
    schema: dict[str, JsonValue],
    path: Path,
    segments: tuple[str, ...] | None,
    *,
    inside: bool,
    in_array: bool,
) -> bool:
    """Whether `schema` carries a usable personal mark; records why not when it cannot."""
    if PERSONAL not in schema:
        return False
    value, here = schema[PERSONAL], (*path, PERSONAL)
    if type(value) is not bool:
        out.add(here, f"{PERSONAL} must be true or false", "personal_invalid")
        return False
    if not value:
        return False
    if inside:
        out.add(
            here,
            "a property inside a personal one is personal already: remove this mark, or "
            "mark the properties instead of the object holding them",
            "personal_nested",
        )
        return False
    if in_array:
        out.add(
            here,
            "items of an array cannot be personal one by one: mark the property that holds "
            "the array",
            "personal_in_array",
        )
        return False
    if not segments:
        out.add(
            here,
            f"{PERSONAL} is read only on a property reached through `properties` from the "
            "input root (not on the root, nor under allOf, $defs, patternProperties, ...)",
            "personal_misplaced",
        )
        return False
    return True


def _subschemas(schema: dict[str, JsonValue], path: Path) -> Iterator[tuple[Path, JsonValue]]:
    for key in (*_ARRAY_SCHEMA, *_OTHER_SCHEMA):
        if key in schema:
            yield (*path, key), schema[key]
    for key in (*_ARRAY_SCHEMAS, *_OTHER_SCHEMAS):
        items = schema.get(key)
        if isinstance(items, list):
            for index, item in enumerate(items):
                yield (*path, key, index), item
    for key in _OTHER_SCHEMA_MAPS:
        entries = schema.get(key)
        if isinstance(entries, dict):
            for name, item in entries.items():
                yield (*path, key, name), item


@dataclass(frozen=True)
class _Source:
    """Why a dotted path holds a personal value, for the problem's message."""

    path: Dotted
    why: str


def flows_out(out: Problems, actions: Mapping[str, Action]) -> None:
    """Record `personal_flows_out` for each template of a spawn, a schedule or an
    automatic action's data that reads a personal value, directly from the input or
    through document fields that `mutate` derived from one (followed to a fixed point)."""
    derived = _derived_fields(actions)
    for name, action in actions.items():
        sources = [*_input_sources(action), *derived]
        for where, template in _outgoing(name, action):
            for reference in sorted(template.references()):
                source = _touched(_dotted(reference), sources)
                if source is not None:
                    out.add(
                        where,
                        f"reads {reference}, {source.why}: a personal value must not leave "
                        "its signed event (work rows and spawned first events cannot be "
                        "erased)",
                        "personal_flows_out",
                    )
                    break


def _derived_fields(actions: Mapping[str, Action]) -> list[_Source]:
    """Document fields set from a personal value by some action's `mutate`."""
    derived: dict[Dotted, _Source] = {}
    changed = True
    while changed:
        changed = False
        for name, action in actions.items():
            sources = [*_input_sources(action), *derived.values()]
            for op in _mutate_ops(action):
                target = op[0]
                if target in derived:
                    continue
                for reference in sorted(op[1].references()):
                    source = _touched(_dotted(reference), sources)
                    if source is not None:
                        derived[target] = _Source(
                            (_DOCUMENT, *target),
                            f"which {name!r} sets from {reference}, {source.why}",
                        )
                        changed = True
                        break
    return list(derived.values())


def _input_sources(action: Action) -> list[_Source]:
    return [
        _Source((_INPUT, *_dotted(_unescape(pointer))), f"a personal input of {action.name!r}")
        for pointer in action.personal
    ]


def _mutate_ops(action: Action) -> Iterator[tuple[Dotted, Template]]:
    mutate = action.mutate
    for op in (*mutate.set, *mutate.inc, *mutate.push, *mutate.merge):
        if op.value is not None:
            yield op.segments, op.value


def _outgoing(name: str, action: Action) -> Iterator[tuple[Path, Template]]:
    base: Path = ("actions", name)
    for index, spawn in enumerate(action.spawn):
        for template in (spawn.workflow, spawn.process, spawn.action, spawn.data):
            yield (*base, "spawn", index), template
    for index, schedule in enumerate(action.schedule):
        timed: tuple[Template | None, ...] = (schedule.data, schedule.at, schedule.until)
        for maybe in timed:
            if maybe is not None:
                yield (*base, "schedule", index), maybe
    if action.auto is not None:
        yield (*base, "auto"), action.auto.data


def _touched(reference: Dotted, sources: list[_Source]) -> _Source | None:
    """The source `reference` reads all or part of (reading a parent reads its children)."""
    if reference and reference[0] in _OTHER_ROOTS:
        return None
    if not reference or reference[0] != _INPUT:
        reference = (_DOCUMENT, *reference)
    for source in sources:
        path = source.path
        if path[: len(reference)] == reference or reference[: len(path)] == path:
            return source
    return None


def _dotted(text: str) -> Dotted:
    return tuple(text.split(".")) if text else ()


def _unescape(pointer: str) -> str:
    """A pointer's segments joined by dots, as a template would name them."""
    return ".".join(part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:])
