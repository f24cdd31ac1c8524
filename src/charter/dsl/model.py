"""The typed, frozen model of a workflow document (docs/dsl.md).

Instances come from `charter.dsl.validate.load_workflow`, which builds them only from
documents without problems, so the engine can trust every reference in them: states,
roles, schedule targets and cancel ids all exist, expressions and templates are parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from jsonschema import Draft202012Validator

from charter.core import identifiers, pointers
from charter.core.errors import InvalidInput, UnknownAction
from charter.core.jsontypes import JsonValue
from charter.dsl.expressions import Expression
from charter.dsl.templates import Template

DSL_VERSION = 2
AUTOMATION = "AUTOMATION"
"""The role held only by the automation actor."""
ANY_STATE = "*"
NAME_PATTERN = identifiers.NAME
"""Action, state, role and schedule names; also process ids (docs/wire-format.md)."""
WORKFLOW_PATH_PATTERN = identifiers.WORKFLOW_PATH

ActionType = Literal["create", "transition", "update"]
ACTION_TYPES: tuple[ActionType, ...] = ("create", "transition", "update")

ROOT = ""
"""The `$merge` path that names the whole document."""

RESERVED_PREFIX = "charter:"
"""Action names Charter keeps for its built-in actions; a workflow cannot define one."""
MIGRATE_ACTION = "charter:migrate"
"""The built-in action of a workflow with a `migration` block (docs/dsl.md)."""
ERASE_ACTION = "charter:erase"
"""The built-in action of a workflow with an `erasure` block (docs/dsl.md)."""
HOLD_ACTION = "charter:hold"
RELEASE_ACTION = "charter:release"
"""The built-in actions of a workflow with a `retention` block (docs/dsl.md)."""


@dataclass(frozen=True)
class RetentionSpec:
    """How long a finished process stays (`after` since its last event, in one of
    `states`), and who may hold it (the `retention` block)."""

    after: timedelta
    states: tuple[str, ...]
    hold_roles: tuple[str, ...]


@dataclass(frozen=True)
class ErasureSpec:
    """Who may erase a process's personal values, from which states, when, on which
    legal bases (the `erasure` block)."""

    roles: tuple[str, ...]
    from_states: tuple[str, ...] | None  # None: any state
    when: Expression | None
    bases: tuple[str, ...]


@dataclass(frozen=True)
class FieldOp:
    """One operator entry: a dotted field path and (except for `$unset`) its value."""

    path: str
    segments: tuple[str, ...]
    value: Template | None = None


@dataclass(frozen=True)
class Mutate:
    """The `mutate` operators, applied in this order: $set, $unset, $inc, $push, $merge."""

    set: tuple[FieldOp, ...] = ()
    unset: tuple[FieldOp, ...] = ()
    inc: tuple[FieldOp, ...] = ()
    push: tuple[FieldOp, ...] = ()
    merge: tuple[FieldOp, ...] = ()

    def is_empty(self) -> bool:
        return not (self.set or self.unset or self.inc or self.push or self.merge)


@dataclass(frozen=True)
class SpawnSpec:
    """A child process created in the same transaction; every field is a template."""

    workflow: Template
    process: Template
    action: Template
    data: Template


@dataclass(frozen=True)
class ScheduleSpec:
    """A scheduled action (docs/automation.md). `delay` is the document's `in`.

    Exactly one of `delay`, `every`, `at` is set; `until` and `count` only with `every`.
    `at` and `until` are templates because they may be computed (`{{ input.due }}`); a
    literal timestamp is a constant template.
    """

    id: str
    action: str
    data: Template
    delay: timedelta | None = None
    every: timedelta | None = None
    at: Template | None = None
    until: Template | None = None
    count: int | None = None


@dataclass(frozen=True)
class AutoSpec:
    """An automatic action's queue-time input (`{}` for `auto: true`)."""

    data: Template


@dataclass(frozen=True)
class Action:
    """One workflow action. `from_states` is None for `"*"` and for create actions."""

    name: str
    type: ActionType
    roles: tuple[str, ...]
    from_states: tuple[str, ...] | None
    to: str | None
    when: Expression | None = None
    input_schema: JsonValue = None
    input_validator: Draft202012Validator | None = field(default=None, compare=False, repr=False)
    mutate: Mutate = field(default_factory=Mutate)
    spawn: tuple[SpawnSpec, ...] = ()
    schedule: tuple[ScheduleSpec, ...] = ()
    cancel: tuple[str, ...] = ()
    auto: AutoSpec | None = None
    description: str | None = None
    # The RFC 6901 pointers of the input properties marked `"x-personal": true`.
    personal: tuple[str, ...] = ()

    @property
    def is_create(self) -> bool:
        return self.type == "create"

    def allows_role(self, roles: Iterable[str]) -> bool:
        """Whether an actor holding `roles` may perform this action (one role suffices)."""
        return any(role in self.roles for role in roles)

    def allows_state(self, state: str | None) -> bool:
        """Whether the action may run on a process in `state` (None: no process yet)."""
        if self.is_create:
            return state is None
        if state is None:
            return False
        return self.from_states is None or state in self.from_states

    def check_input(self, value: JsonValue) -> None:
        """Raise InvalidInput listing every way `value` breaks the action's `input` schema."""
        if self.input_validator is None:
            return
        errors = sorted(
            self.input_validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path))
        )
        if errors:
            problems = [
                {"pointer": pointer, "message": self._said(pointer, e.validator, e.message)}
                for e in errors
                for pointer in (json_pointer(*e.absolute_path),)
            ]
            # Every problem in the message too, for clients that show only the message.
            said = "; ".join(f"{p['pointer'] or '/'}: {p['message']}" for p in problems[:10])
            more = f"; and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise InvalidInput(f"input {said}{more}", problems=problems)

    def _said(self, pointer: str, keyword: object, message: str) -> str:
        """`message`, unless it may quote a personal value: a refusal is logged, and a
        personal value must reach no log. Messages of these keywords name keys only."""
        if keyword in _KEY_KEYWORDS or not any(
            pointers.overlap(pointer, personal) for personal in self.personal
        ):
            return message
        return f"does not satisfy the schema's {keyword!r} (a personal value is not quoted)"


# Input schema keywords whose messages name property names, never values.
_KEY_KEYWORDS = frozenset({"required", "additionalProperties", "dependentRequired"})


@dataclass(frozen=True)
class Workflow:
    """A whole workflow definition."""

    states: tuple[str, ...]
    roles: tuple[str, ...]
    actions: Mapping[str, Action]
    dsl: int = DSL_VERSION
    description: str | None = None
    # The built-in `charter:migrate`, present when the workflow has a `migration` block;
    # never one of `actions` (those are the workflow's own).
    migration: Action | None = None
    erasure: ErasureSpec | None = None
    # The built-in `charter:erase`, present with an `erasure` block (dsl/erasure.py).
    eraser: Action | None = None
    retention: RetentionSpec | None = None
    # The built-in `charter:hold` and `charter:release`, with a `retention` block.
    holds: Mapping[str, Action] = field(default_factory=dict)

    def action(self, name: str) -> Action:
        """The action called `name`; UnknownAction when the workflow has none."""
        if name == MIGRATE_ACTION:
            if self.migration is None:
                raise UnknownAction(f"the workflow has no `migration` block, so no action {name!r}")
            return self.migration
        if name == ERASE_ACTION:
            if self.eraser is None:
                raise UnknownAction(f"the workflow has no `erasure` block, so no action {name!r}")
            return self.eraser
        if name in (HOLD_ACTION, RELEASE_ACTION):
            if name not in self.holds:
                raise UnknownAction(f"the workflow has no `retention` block, so no action {name!r}")
            return self.holds[name]
        try:
            return self.actions[name]
        except KeyError:
            raise UnknownAction(f"the workflow defines no action {name!r}") from None

    def is_migration(self, action: Action) -> bool:
        """Whether `action` is this workflow's built-in `charter:migrate`."""
        return self.migration is not None and action is self.migration

    def is_erasure(self, action: Action) -> bool:
        """Whether `action` is this workflow's built-in `charter:erase`."""
        return self.eraser is not None and action is self.eraser

    def create_actions(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions.values() if a.is_create)

    def auto_actions(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions.values() if a.auto is not None)

    def personal(self) -> dict[str, list[str]]:
        """The personal pointers of each action that has any, by action name."""
        return {a.name: list(a.personal) for a in self.actions.values() if a.personal}

    def schedule_ids(self) -> frozenset[str]:
        """Every schedule id some action defines (what `cancel` may name)."""
        return frozenset(s.id for a in self.actions.values() for s in a.schedule)


def json_pointer(*parts: object) -> str:
    """An RFC 6901 JSON Pointer to `parts` ("" is the whole document)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
