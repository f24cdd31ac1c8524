"""Field-level checks of a workflow action, used by `charter.dsl.validate`.

Each function checks one field, records its problems and returns the field's model
value (or a harmless default when the field is broken, so checking can go on).
The checks of `mutate` live beside its application, in `charter.dsl.mutate`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from jsonschema import Draft202012Validator, FormatChecker

from charter.core.errors.workflows import DslError, TemplateError
from charter.core.jsontypes import JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.dsl.durations import parse_duration
from charter.dsl.expressions import Expression, parse_condition
from charter.dsl.model import (
    ANY_STATE,
    NAME_PATTERN,
    WORKFLOW_PATH_PATTERN,
    ActionType,
    AutoSpec,
    ScheduleSpec,
    SpawnSpec,
    json_pointer,
)
from charter.dsl.templates import Template, compile_template

Path = tuple[str | int, ...]

SCHEDULE_KEYS = frozenset({"id", "action", "data", "in", "every", "at", "until", "count"})
SPAWN_KEYS = frozenset({"workflow", "process", "action", "data"})
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# `format` is asserted in input schemas. jsonschema checks `date-time` only when an
# optional package is installed; Charter's own strict RFC 3339 parser does it instead.
INPUT_FORMATS = FormatChecker()


@INPUT_FORMATS.checks("date-time", raises=TimeFormatError)
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or parse_rfc3339(value) is not None


# Built once: constructing a validator of the meta-schema costs more than using it.
_META_VALIDATOR = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=INPUT_FORMATS
)

# The fields each reserved root offers to conditions and templates (docs/dsl.md).
# `input` is the event's whole input and may be read at any depth; `now` is a time.
RESERVED_FIELDS: dict[str, frozenset[str]] = {
    "actor": frozenset({"id", "public_key", "roles"}),
    "event": frozenset({"hash", "actor", "at"}),
    "process": frozenset({"id", "workflow", "parent"}),
}


@dataclass
class Problems:
    """The (pointer, message) pairs found so far, and the code of those that have one
    (a stable name a client can act on, beside the message meant for people)."""

    items: list[tuple[str, str]] = field(default_factory=list)
    codes: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, path: Path, message: str, code: str | None = None) -> None:
        self.add_pointer(json_pointer(*path), message, code)

    def add_pointer(self, pointer: str, message: str, code: str | None = None) -> None:
        self.items.append((pointer, message))
        if code is not None:
            self.codes[(pointer, message)] = code

    def keys(
        self,
        obj: dict[str, JsonValue],
        path: Path,
        allowed: Collection[str],
        required: Iterable[str],
    ) -> None:
        for key in obj:
            if key not in allowed:
                self.add((*path, key), f"unknown field {key!r}")
        for key in required:
            if key not in obj:
                self.add(path, f"missing required field {key!r}")


@dataclass
class Context:
    """What one validation pass knows so far, shared by the checks of all actions."""

    out: Problems
    states: frozenset[str] | None
    roles: frozenset[str] | None
    schedule_targets: list[tuple[Path, str]] = field(default_factory=list)
    cancel_ids: list[tuple[Path, str]] = field(default_factory=list)
    schedule_ids: set[str] = field(default_factory=set)


def optional_string(out: Problems, obj: dict[str, JsonValue], key: str, path: Path) -> str | None:
    if key not in obj:
        return None
    value = obj[key]
    if isinstance(value, str):
        return value
    out.add((*path, key), "must be a string")
    return None


def names(
    out: Problems, doc: dict[str, JsonValue], key: str, kind: str, *, non_empty: bool
) -> tuple[str, ...] | None:
    """A list of unique names (states, roles); None when it is missing or not a list."""
    if key not in doc:
        return None
    value, path = doc[key], (key,)
    if not isinstance(value, list):
        out.add(path, f"must be a list of {kind} names")
        return None
    if non_empty and not value:
        out.add(path, f"must list at least one {kind}")
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        if not isinstance(item, str):
            out.add((*path, index), "must be a string")
        elif not NAME_PATTERN.fullmatch(item):
            out.add((*path, index), f"{kind} name {item!r} must match {NAME_PATTERN.pattern}")
        elif item in seen:
            out.add((*path, index), f"duplicate {kind} {item!r} (first at index {seen[item]})")
        else:
            seen[item] = index
    return tuple(seen)


def _string_or_list(
    out: Problems, value: JsonValue, path: Path, what: str
) -> list[tuple[Path, str]] | None:
    """A string or a non-empty list of strings, each with its own pointer."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, list) and value:
        items = [((*path, i), v) for i, v in enumerate(value) if isinstance(v, str)]
        for index, item in enumerate(value):
            if not isinstance(item, str):
                out.add((*path, index), "must be a string")
        return items if len(items) == len(value) else None
    out.add(path, f"must be {what} or a non-empty list of them")
    return None


def roles(
    ctx: Context, raw: dict[str, JsonValue], path: Path, key: str = "role"
) -> tuple[str, ...] | None:
    if key not in raw:
        return None
    items = _string_or_list(ctx.out, raw[key], (*path, key), "a role")
    if items is None:
        return None
    for item_path, role in items:
        if ctx.roles is not None and role not in ctx.roles:
            ctx.out.add(item_path, f"unknown role {role!r}")
    return tuple(dict.fromkeys(role for _, role in items))


def from_states(
    ctx: Context, raw: dict[str, JsonValue], path: Path, kind: ActionType | None
) -> tuple[tuple[str, ...] | None, bool]:
    """(`from` states or None for any, whether `from` is usable)."""
    out, here = ctx.out, (*path, "from")
    if kind == "create":
        if "from" in raw:
            out.add(here, "a create action has no 'from': it starts a process")
            return None, False
        return None, True
    if "from" not in raw:
        if kind is not None:
            out.add(path, "missing required field 'from' (\"*\" means any state)")
        return None, False
    value = raw["from"]
    if value == ANY_STATE:
        return None, True
    items = _string_or_list(out, value, here, "a state")
    if items is None:
        return None, False
    ok = True
    for item_path, state in items:
        if state == ANY_STATE:
            out.add(item_path, "'*' must stand alone, not in a list")
            ok = False
        elif ctx.states is not None and state not in ctx.states:
            out.add(item_path, f"unknown state {state!r}")
            ok = False
    return tuple(dict.fromkeys(state for _, state in items)), ok


def state_list(
    ctx: Context, raw: dict[str, JsonValue], path: Path, key: str
) -> tuple[str, ...] | None:
    """A state or a non-empty list of known states (no "*"); None when it is not one."""
    items = _string_or_list(ctx.out, raw.get(key), (*path, key), "a state")
    if items is None:
        return None
    unknown = [(where, state) for where, state in items
               if ctx.states is not None and state not in ctx.states]  # fmt: skip
    for where, state in unknown:
        ctx.out.add(where, f"unknown state {state!r}")
    return None if unknown else tuple(dict.fromkeys(state for _, state in items))


def target_state(
    ctx: Context, raw: dict[str, JsonValue], path: Path, kind: ActionType | None
) -> tuple[str | None, bool]:
    """(`to` or None, whether `to` is usable)."""
    out, here = ctx.out, (*path, "to")
    if "to" not in raw:
        if kind in ("create", "transition"):
            out.add(path, f"missing required field 'to' (a {kind} action needs a target state)")
            return None, False
        return None, True
    value = raw["to"]
    if kind == "update":
        out.add(here, "an update action stays in its state: it has no 'to'")
        return None, False
    if not isinstance(value, str):
        out.add(here, "must be a state name")
        return None, False
    if ctx.states is not None and value not in ctx.states:
        out.add(here, f"unknown state {value!r}")
        return None, False
    return value, True


def condition(ctx: Context, raw: dict[str, JsonValue], path: Path) -> Expression | None:
    if "when" not in raw:
        return None
    value, here = raw["when"], (*path, "when")
    if not isinstance(value, str):
        ctx.out.add(here, "must be a condition string")
        return None
    try:
        expression = parse_condition(value)
    except DslError as exc:
        ctx.out.add(here, exc.message)
        return None
    references(ctx.out, expression.references(), json_pointer(*here))
    return expression


def references(out: Problems, refs: Iterable[str], pointer: str) -> None:
    """Report reads of reserved fields that never have a value (`event.foo`).

    A bare root (`input`, `event`) reads the whole part and is fine; the parser itself
    refuses fields of `now`.
    """
    for ref in sorted(refs):
        root, _, rest = ref.partition(".")
        name = rest.split(".", 1)[0]
        offered = RESERVED_FIELDS.get(root)
        if offered is not None and rest and name not in offered:
            listing = ", ".join(f"{root}.{field}" for field in sorted(offered))
            out.add_pointer(pointer, f"unknown field '{root}.{name}': use one of {listing}")


def input_schema(
    out: Problems, raw: dict[str, JsonValue], path: Path
) -> tuple[JsonValue, Draft202012Validator | None]:
    if "input" not in raw:
        return None, None
    schema, here = raw["input"], (*path, "input")
    if not isinstance(schema, dict | bool):
        out.add(here, "must be a JSON Schema (an object or a boolean)")
        return None, None
    if isinstance(schema, dict) and schema.get("$schema", JSON_SCHEMA_DIALECT) not in (
        JSON_SCHEMA_DIALECT,
        JSON_SCHEMA_DIALECT + "#",
    ):
        out.add((*here, "$schema"), "input schemas use JSON Schema draft 2020-12 only")
        return None, None
    errors = list(_META_VALIDATOR.iter_errors(schema))
    for error in errors:
        out.add((*here, *error.absolute_path), f"invalid JSON Schema: {error.message}")
    if errors:
        return None, None
    return schema, Draft202012Validator(schema, format_checker=INPUT_FORMATS)


def template(out: Problems, value: JsonValue, path: Path) -> Template | None:
    """Compile `value` as a template, reporting bad `{{ }}` and misused reserved names."""
    pointer = json_pointer(*path)
    try:
        compiled = compile_template(value)
    except TemplateError as exc:
        for relative, message in exc.problems:
            out.add_pointer(pointer + relative, message)
        return None
    references(out, compiled.references(), pointer)
    return compiled


def is_whole_template(value: JsonValue) -> bool:
    return isinstance(value, str) and value.startswith("{{") and value.endswith("}}")


def data(out: Problems, value: JsonValue, path: Path) -> Template | None:
    """Action data: an object (values may be templates) or one `{{ expr }}` yielding one."""
    if isinstance(value, dict):
        meta = value.get("meta")
        if isinstance(meta, dict) and "automation" in meta:
            out.add(
                (*path, "meta", "automation"),
                "meta.automation is reserved for the automation worker's provenance",
            )
    elif not is_whole_template(value):
        out.add(path, "must be an object (or a '{{ expr }}' template that yields one)")
        return None
    return template(out, value, path)


def spawns(ctx: Context, raw: dict[str, JsonValue], path: Path) -> tuple[SpawnSpec, ...]:
    if "spawn" not in raw:
        return ()
    value, path = raw["spawn"], (*path, "spawn")
    if not isinstance(value, list):
        ctx.out.add(path, "must be a list of spawn entries")
        return ()
    specs = [_spawn(ctx.out, entry, (*path, i)) for i, entry in enumerate(value)]
    return tuple(s for s in specs if s is not None)


_SPAWN_PATTERNS = {
    "workflow": (WORKFLOW_PATH_PATTERN, "a workflow path"),
    "process": (NAME_PATTERN, "a process id"),
    "action": (NAME_PATTERN, "an action name"),
}


def _spawn(out: Problems, entry: JsonValue, path: Path) -> SpawnSpec | None:
    if not isinstance(entry, dict):
        out.add(path, "a spawn entry must be an object")
        return None
    out.keys(entry, path, SPAWN_KEYS, ("workflow", "process", "action"))
    parts: dict[str, Template | None] = {}
    for key, (pattern, what) in _SPAWN_PATTERNS.items():
        value = entry.get(key)
        if key not in entry:
            parts[key] = None
        elif not isinstance(value, str):
            out.add((*path, key), f"must be {what} or a template")
            parts[key] = None
        elif "{{" not in value and not pattern.fullmatch(value):
            out.add((*path, key), f"{value!r} is not {what}: must match {pattern.pattern}")
            parts[key] = None
        else:
            parts[key] = template(out, value, (*path, key))
    payload = data(out, entry.get("data", {}), (*path, "data"))
    workflow, process, action = parts["workflow"], parts["process"], parts["action"]
    if workflow is None or process is None or action is None or payload is None:
        return None
    return SpawnSpec(workflow=workflow, process=process, action=action, data=payload)


def schedules(ctx: Context, raw: dict[str, JsonValue], path: Path) -> tuple[ScheduleSpec, ...]:
    if "schedule" not in raw:
        return ()
    value, path = raw["schedule"], (*path, "schedule")
    if not isinstance(value, list):
        ctx.out.add(path, "must be a list of scheduled actions")
        return ()
    seen: dict[str, int] = {}
    specs: list[ScheduleSpec] = []
    for index, entry in enumerate(value):
        spec = _schedule(ctx, entry, (*path, index))
        schedule_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(schedule_id, str):
            if schedule_id in seen:
                ctx.out.add(
                    (*path, index, "id"),
                    f"duplicate schedule id {schedule_id!r} (first at index {seen[schedule_id]})",
                )
            seen.setdefault(schedule_id, index)
            ctx.schedule_ids.add(schedule_id)
        if spec is not None:
            specs.append(spec)
    return tuple(specs)


def _schedule(ctx: Context, entry: JsonValue, path: Path) -> ScheduleSpec | None:
    out = ctx.out
    if not isinstance(entry, dict):
        out.add(path, "a scheduled action must be an object")
        return None
    before = len(out.items)
    out.keys(entry, path, SCHEDULE_KEYS, ("id", "action", "data"))
    schedule_id, action = entry.get("id"), entry.get("action")
    if "id" in entry and not (isinstance(schedule_id, str) and NAME_PATTERN.fullmatch(schedule_id)):
        out.add((*path, "id"), f"must be a schedule id matching {NAME_PATTERN.pattern}")
    if isinstance(action, str):
        ctx.schedule_targets.append(((*path, "action"), action))
    elif "action" in entry:
        out.add((*path, "action"), "must be an action name")
    payload = data(out, entry["data"], (*path, "data")) if "data" in entry else None
    timing = [key for key in ("in", "every", "at") if key in entry]
    if len(timing) != 1:
        has = f" (it has {', '.join(map(repr, timing))})" if timing else ""
        out.add(path, f"needs exactly one of 'in', 'every', 'at'{has}")
    delay = _duration(out, entry, "in", path)
    every = _duration(out, entry, "every", path)
    at = _moment(out, entry, "at", path)
    until = _moment(out, entry, "until", path)
    count = entry.get("count")
    if "count" in entry and (type(count) is not int or count < 1):
        out.add((*path, "count"), "must be a positive integer")
    for key in ("until", "count"):
        if key in entry and "every" not in entry:
            out.add((*path, key), f"'{key}' bounds a recurring schedule: use it with 'every'")
    if len(out.items) != before or payload is None:
        return None
    assert isinstance(schedule_id, str)
    assert isinstance(action, str)
    return ScheduleSpec(
        id=schedule_id,
        action=action,
        data=payload,
        delay=delay,
        every=every,
        at=at,
        until=until,
        count=count if type(count) is int else None,
    )


def _duration(out: Problems, entry: dict[str, JsonValue], key: str, path: Path) -> timedelta | None:
    if key not in entry:
        return None
    value = entry[key]
    if not isinstance(value, str):
        out.add((*path, key), "must be a duration such as '48h'")
        return None
    try:
        return parse_duration(value)
    except DslError as exc:
        out.add((*path, key), exc.message)
        return None


def _moment(out: Problems, entry: dict[str, JsonValue], key: str, path: Path) -> Template | None:
    """`at`/`until`: an RFC 3339 timestamp, or a template resolved when the event commits."""
    if key not in entry:
        return None
    value = entry[key]
    if not isinstance(value, str):
        out.add((*path, key), "must be an RFC 3339 timestamp or a template")
        return None
    if "{{" not in value:
        try:
            parse_rfc3339(value)
        except TimeFormatError as exc:
            out.add((*path, key), str(exc))
            return None
    return template(out, value, (*path, key))


def cancels(ctx: Context, raw: dict[str, JsonValue], path: Path) -> tuple[str, ...]:
    if "cancel" not in raw:
        return ()
    value, path = raw["cancel"], (*path, "cancel")
    if not isinstance(value, list):
        ctx.out.add(path, "must be a list of schedule ids")
        return ()
    for index, item in enumerate(value):
        if isinstance(item, str):
            ctx.cancel_ids.append(((*path, index), item))
        else:
            ctx.out.add((*path, index), "must be a schedule id")
    return tuple(dict.fromkeys(item for item in value if isinstance(item, str)))


def auto(ctx: Context, value: JsonValue, path: Path) -> AutoSpec | None:
    """`true`, `{"data": ...}`, or `false` (the same as leaving `auto` out)."""
    if value is False:
        return None
    if value is True:
        return AutoSpec(data=compile_template({}))
    if not isinstance(value, dict) or "data" not in value:
        ctx.out.add(path, 'must be true, false or {"data": {...}}')
        return None
    ctx.out.keys(value, path, ("data",), ())
    payload = data(ctx.out, value["data"], (*path, "data"))
    return None if payload is None else AutoSpec(data=payload)
