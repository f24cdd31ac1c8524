"""`mutate` and the other effects of an action: checked at deploy, applied purely.

`apply_action` turns an accepted event into MutateEffects (new document,
spawns, schedules, cancels) without touching a database, and never changes its inputs:
objects along each written path are copied first, untouched subtrees are shared with
the old document (treat both as read-only), rendered values are fresh copies.

Operators run in a fixed order: $set, $unset, $inc, $push, $merge. Field paths are
dotted (`address.city`); segments are object keys, never array indexes. A missing or
null field along a path counts as absent: $set, $inc, $push and $merge create the
objects they need, $unset does nothing. `$merge` merges an object shallowly into the
object at its path; the path "" names the document itself. `state` is the action's
`to` and no operator may change it.

While replaying over erased values (charter.dsl.erased), a value computed from an erased
one is erased: an `$inc` by one, a `$merge` of one, a write inside one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from charter.core.errors import InvalidInput, ReservedField
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.dsl.erased import as_value, earliest, is_erased
from charter.dsl.expressions import Scope
from charter.dsl.model import (
    NAME_PATTERN,
    ROOT,
    WORKFLOW_PATH_PATTERN,
    Action,
    FieldOp,
    ScheduleSpec,
    SpawnSpec,
    Workflow,
)
from charter.dsl.templates import Template

MAX_SAFE_INTEGER = 2**53 - 1


@dataclass(frozen=True)
class ResolvedSpawn:
    """A child process to create: `action` of `workflow` with `data` as its input."""

    workflow: str
    process: str
    action: str
    data: JsonObject


@dataclass(frozen=True)
class ResolvedSchedule:
    """A schedule with absolute times: first `run_at`, then every `every` (if set)."""

    id: str
    action: str
    data: JsonObject
    run_at: datetime
    every: timedelta | None = None
    until: datetime | None = None
    count: int | None = None


@dataclass(frozen=True)
class MutateEffects:
    """Everything an accepted action changes, for the engine to persist atomically."""

    new_document: JsonObject
    spawns: tuple[ResolvedSpawn, ...] = ()
    schedules: tuple[ResolvedSchedule, ...] = ()
    cancels: tuple[str, ...] = ()


def apply_action(
    workflow: Workflow, action: Action, document: Mapping[str, JsonValue], scope: Scope
) -> MutateEffects:
    """The effects of `action` on `document`; templates render against `scope`.

    `scope.document` is the document before the action (what templates read) and
    `scope.now` the commit time that relative schedules count from.
    """
    if workflow.actions.get(action.name) is not action:
        raise ValueError(f"action {action.name!r} does not belong to this workflow")
    state = action.to if action.to is not None else document.get("state")
    writer = _Writer(dict(document))
    mutate = action.mutate
    for op in mutate.set:
        writer.set(op, _fresh(_render(op, scope)))
    for op in mutate.unset:
        writer.unset(op)
    for op in mutate.inc:
        writer.inc(op, _render(op, scope))
    for op in mutate.push:
        writer.push(op, _fresh(_render(op, scope)))
    for op in mutate.merge:
        writer.merge(op, _fresh(_render(op, scope)), state)
    if state is not None:
        writer.root["state"] = state
    return MutateEffects(
        new_document=writer.root,
        spawns=tuple(_spawn(spec, scope) for spec in action.spawn),
        schedules=tuple(_schedule(spec, scope) for spec in action.schedule),
        cancels=action.cancel,
    )


def render_auto_data(action: Action, scope: Scope) -> JsonObject:
    """The queue-time input of an automatic action (`{}` for `auto: true`)."""
    if action.auto is None:
        raise ValueError(f"action {action.name!r} is not automatic")
    return _data(action.auto.data, scope, f"auto data of {action.name!r}")


def _render(op: FieldOp, scope: Scope) -> JsonValue:
    assert op.value is not None
    return op.value.render(scope)


class _Writer:
    """Copy-on-write edits of a JSON object: each object on a written path is copied once."""

    def __init__(self, root: JsonObject) -> None:
        self.root = root
        self._fresh = {id(root)}

    def _own(self, parent: JsonObject, key: str, child: JsonObject) -> JsonObject:
        if id(child) not in self._fresh:
            child = dict(child)
            parent[key] = child
            self._fresh.add(id(child))
        return child

    def _parent(self, op: FieldOp, verb: str, *, create: bool = True) -> JsonObject | None:
        """The object `op` writes into, created as needed; None when there is none to
        write into (`create` off and a missing or scalar field, or an erased value)."""
        node = self.root
        for depth, segment in enumerate(op.segments[:-1]):
            child = node.get(segment)
            if child is None:
                if not create:
                    return None
                child = {}
                node[segment] = child
                self._fresh.add(id(child))
            elif is_erased(child):
                return None  # a write inside an erased value leaves it erased
            elif not isinstance(child, dict):
                if not create:
                    return None
                where = ".".join(op.segments[: depth + 1])
                raise InvalidInput(
                    f"cannot {verb} {op.path!r}: {where!r} is {_kind(child)}, not an object",
                    path=op.path,
                )
            node = self._own(node, segment, child)
        return node

    def set(self, op: FieldOp, value: JsonValue) -> None:
        parent = self._parent(op, "set")
        if parent is not None:
            parent[op.segments[-1]] = value

    def unset(self, op: FieldOp) -> None:
        parent = self._parent(op, "unset", create=False)
        if parent is not None:
            parent.pop(op.segments[-1], None)

    def inc(self, op: FieldOp, amount: JsonValue) -> None:
        if not _is_number(amount) and not is_erased(amount):
            raise InvalidInput(
                f"cannot increment {op.path!r} by {_kind(amount)}: $inc needs a number",
                path=op.path,
            )
        parent = self._parent(op, "increment")
        if parent is None:
            return
        current = parent.get(op.segments[-1])
        if current is None:
            current = 0
        unknown = earliest(current, amount)
        if unknown is not None:
            parent[op.segments[-1]] = as_value(unknown)  # a sum with an erased term is erased
            return
        assert isinstance(amount, int | float)
        if not _is_number(current):
            raise InvalidInput(
                f"cannot increment {op.path!r}: it is {_kind(current)}, not a number",
                path=op.path,
            )
        assert isinstance(current, int | float)
        total = current + amount
        if (isinstance(total, int) and abs(total) > MAX_SAFE_INTEGER) or not math.isfinite(total):
            raise InvalidInput(f"incrementing {op.path!r} leaves the I-JSON range", path=op.path)
        parent[op.segments[-1]] = total

    def push(self, op: FieldOp, value: JsonValue) -> None:
        parent = self._parent(op, "push to")
        if parent is None:
            return
        current = parent.get(op.segments[-1])
        if current is None:
            current = []
        if is_erased(current):
            return  # an erased array stays erased
        if not isinstance(current, list):
            raise InvalidInput(
                f"cannot push to {op.path!r}: it is {_kind(current)}, not an array",
                path=op.path,
            )
        parent[op.segments[-1]] = [*current, value]

    def merge(self, op: FieldOp, value: JsonValue, state: JsonValue) -> None:
        if is_erased(value) and op.path != ROOT:
            parent = self._parent(op, "merge into")
            if parent is not None:
                key = op.segments[-1]
                marker = earliest(parent.get(key), value)
                assert marker is not None
                parent[key] = as_value(marker)  # which keys it set is unknown
            return
        if is_erased(value):
            raise InvalidInput(
                "cannot replay a $merge of an erased value into the document: which fields "
                "it set is unknown",
                path=op.path,
            )
        if not isinstance(value, dict):
            raise InvalidInput(
                f"cannot merge {_kind(value)} into {op.path or 'the document'!r}: "
                "$merge needs an object",
                path=op.path,
            )
        if op.path == ROOT:
            # Only a template can get here with `state` (deploy refuses a literal one).
            if "state" in value and value["state"] != state:
                raise InvalidInput("$merge cannot change 'state': it is set by 'to'", path="state")
            self.root.update(value)
            return
        parent = self._parent(op, "merge into")
        if parent is None:
            return
        key = op.segments[-1]
        current = parent.get(key)
        if current is None:
            current = {}
        if is_erased(current):
            return  # an erased object stays erased
        if not isinstance(current, dict):
            raise InvalidInput(
                f"cannot merge into {op.path!r}: it is {_kind(current)}, not an object",
                path=op.path,
            )
        parent[key] = {**current, **value}


def _spawn(spec: SpawnSpec, scope: Scope) -> ResolvedSpawn:
    workflow = _text(spec.workflow, scope, "spawn workflow")
    process = _text(spec.process, scope, "spawn process")
    action = _text(spec.action, scope, "spawn action")
    for value, pattern, what in (
        (workflow, WORKFLOW_PATH_PATTERN, "workflow path"),
        (process, NAME_PATTERN, "process id"),
        (action, NAME_PATTERN, "action name"),
    ):
        if not pattern.fullmatch(value):
            raise InvalidInput(f"spawn {what} {value!r} must match {pattern.pattern}")
    data = _data(spec.data, scope, f"spawn data of {process!r}")
    return ResolvedSpawn(workflow=workflow, process=process, action=action, data=data)


def _schedule(spec: ScheduleSpec, scope: Scope) -> ResolvedSchedule:
    what = f"schedule {spec.id!r}"
    # With `every` the first run is one interval after the event (docs/automation.md).
    if spec.delay is not None:
        run_at = scope.now + spec.delay
    elif spec.every is not None:
        run_at = scope.now + spec.every
    else:
        assert spec.at is not None
        run_at = _moment(spec.at, scope, f"{what} 'at'")
    until = None if spec.until is None else _moment(spec.until, scope, f"{what} 'until'")
    return ResolvedSchedule(
        id=spec.id,
        action=spec.action,
        data=_data(spec.data, scope, f"{what} data"),
        run_at=run_at,
        every=spec.every,
        until=until,
        count=spec.count,
    )


def _text(template: Template, scope: Scope, what: str) -> str:
    value = template.render(scope)
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {_kind(value)}")
    return value


def _moment(template: Template, scope: Scope, what: str) -> datetime:
    value = template.render(scope)
    if isinstance(value, str):
        try:
            return parse_rfc3339(value)
        except TimeFormatError:
            pass
    raise InvalidInput(f"{what} is not an RFC 3339 timestamp: {value!r}")


def _data(template: Template, scope: Scope, what: str) -> JsonObject:
    value = _fresh(template.render(scope))
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be an object, not {_kind(value)}")
    meta = value.get("meta")
    if isinstance(meta, dict) and "automation" in meta:
        raise ReservedField(f"{what} sets meta.automation, which is reserved")
    return value


def _is_number(value: JsonValue) -> bool:
    return type(value) in (int, float)


def _kind(value: JsonValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _fresh(value: JsonValue) -> JsonValue:
    """A deep copy of a rendered value, so the new document shares nothing with the scope."""
    if isinstance(value, dict):
        return {key: _fresh(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    return value
