"""The pure decision: may this event happen, and what does it change?

`decide` reads a process, a workflow and an envelope and returns the Decision the
engine's one transaction persists; it touches no database and no clock (templates and
schedules count from the envelope's signed `at`, so a replay decides the same way).
The checks run in docs/architecture.md's order: action, role, from, input, when, reserved fields.
The built-in `charter:migrate` (dsl/migration.py) is decided here too, from the workflow's
`migration` block: its effects are its input's state and cancellations, and a `Cleanup`.
"""

from __future__ import annotations

from dataclasses import dataclass

from charter.core import pointers
from charter.core.envelope import Envelope
from charter.core.errors import (
    CharterError,
    ConditionFailed,
    ForbiddenRole,
    InvalidInput,
    ReservedField,
    WrongState,
)
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.erased import marker_pointers
from charter.dsl.erasure import EraseInput
from charter.dsl.expressions import Scope
from charter.dsl.migration import MigrationInput, apply_migration
from charter.dsl.model import ERASE_ACTION, HOLD_ACTION, RELEASE_ACTION, Action, Workflow
from charter.dsl.mutate import (
    MutateEffects,
    ResolvedSchedule,
    ResolvedSpawn,
    apply_action,
    render_auto_data,
)
from charter.dsl.retention import HOLD_ACTIONS
from charter.engine.personal import check_personal
from charter.engine.records import AUTOMATION_ROLE, ActorContext, ProcessView

AUTOMATION_SCOPE_ACTOR: dict[str, JsonValue] = {"id": "automation", "roles": [AUTOMATION_ROLE]}


@dataclass(frozen=True)
class AutoWork:
    """An automatic action that became available after the event.

    `error` says why its data could not be rendered: the row is then recorded failed,
    and the event that reached the state is accepted all the same (docs/automation.md).
    """

    action: str
    data: JsonObject
    available_state: str
    error: str | None = None


@dataclass(frozen=True)
class Cleanup:
    """What a `charter:migrate` event cancels besides its listed schedules: every live
    work row of the process whose action is not one of `actions` (the current
    definition's), which only the database can find."""

    actions: tuple[str, ...]
    reason: str  # the migration's ticket reference


@dataclass(frozen=True)
class Decision:
    """Everything an accepted event changes."""

    action: Action
    state: str
    data: JsonObject  # the new document without `state`
    spawns: tuple[ResolvedSpawn, ...]
    schedules: tuple[ResolvedSchedule, ...]
    cancels: tuple[str, ...]
    auto: tuple[AutoWork, ...]
    cleanup: Cleanup | None = None  # set for a migration
    # Set for a `charter:erase`: the engine resolves it and derives the data again.
    erasure: EraseInput | None = None


def has_automation_meta(input_: JsonObject) -> bool:
    """Whether `input.meta.automation` is set at all (even to null: the key is reserved)."""
    meta = input_.get("meta")
    return isinstance(meta, dict) and "automation" in meta


def decide(
    process: ProcessView | None,
    workflow: Workflow,
    envelope: Envelope,
    actor: ActorContext,
    *,
    event_hash: str,
    genesis: bool = False,
    full_input: JsonObject | None = None,
    unknowns: list[str] | None = None,
    held: bool = False,
) -> Decision:
    """Check the event against the rules and compute its effects.

    `genesis` marks a spawned child's unsigned first event: the parent's action
    authorized it, so the child's role check is skipped; every other rule holds.
    `full_input` is a v2 envelope's input with its disclosures joined in: the rules
    decide on it (default: the envelope's `input`, all there is in a v1 envelope).
    `unknowns` is set when replaying over erased values (charter.dsl.erased): what cannot
    be checked without them is noted there instead of refused. `held`: the process is
    under legal hold (its chain's later hold or release event is a hold); the engine
    reads it only for the actions it matters to (`HOLD_SENSITIVE`).
    """
    input_ = envelope.input if full_input is None else full_input
    action = workflow.action(envelope.action)
    migrating = workflow.is_migration(action)
    erasing = workflow.is_erasure(action)
    if migrating and actor.is_automation:
        # A migration role is never AUTOMATION (checked at deploy); this holds on replay too.
        raise ForbiddenRole(f"the automation actor never signs {action.name!r}")
    if not genesis and not action.allows_role(actor.roles):
        raise ForbiddenRole(
            f"action {action.name!r} needs one of the roles {list(action.roles)}; "
            f"actor {actor.id!r} holds {list(actor.roles)}"
        )
    _check_state(action, process)
    if unknowns is None:
        action.check_input(input_)
    else:
        _check_replayed_input(action, input_, unknowns)
    check_personal(action, envelope)
    _check_hold(action, held)
    scope = _scope(process, envelope, actor, event_hash, input_, unknowns)
    if action.when is not None and not action.when.holds(scope):
        raise ConditionFailed(f"action {action.name!r}: `when` is false ({action.when.source})")
    if has_automation_meta(input_) and not actor.is_automation:
        # Checked again, against the work row, by the engine (engine/provenance.py).
        raise ReservedField("input.meta.automation is reserved for the automation actor")
    before = process.document if process is not None else {}
    cleanup = erasure = None
    if migrating:
        migration = MigrationInput.of(input_)
        effects = apply_migration(before, migration)
        cleanup = Cleanup(tuple(workflow.actions), migration.reason)
    elif erasing:
        # The data is derived again from the events by the engine (engine/erasing.py).
        erasure = EraseInput.of(input_)
        effects = MutateEffects(new_document=dict(before))
    elif action.name in HOLD_ACTIONS:
        effects = MutateEffects(new_document=dict(before))  # a hold changes no data
    else:
        effects = apply_action(workflow, action, before, scope)
    document = dict(effects.new_document)
    state = document.pop("state")
    if not isinstance(state, str):
        raise WrongState(f"action {action.name!r} leaves the process without a state")
    after = ProcessView(
        id=envelope.process,
        workflow=envelope.workflow,
        state=state,
        data=document,
        head=event_hash,
        seq=(process.seq if process else 0) + 1,
        parent=process.parent if process else None,
    )
    return Decision(
        action=action,
        state=state,
        data=document,
        spawns=effects.spawns,
        schedules=effects.schedules,
        cancels=effects.cancels,
        auto=available_auto_actions(workflow, after, envelope, actor, event_hash),
        cleanup=cleanup,
        erasure=erasure,
    )


def available_auto_actions(
    workflow: Workflow,
    process: ProcessView,
    envelope: Envelope,
    actor: ActorContext,
    event_hash: str,
) -> tuple[AutoWork, ...]:
    """Automatic actions eligible on the committed state (docs/automation.md).

    An automatic action is not queued again by its own firing: that would loop forever
    on actions that stay eligible (an `update` from "*").
    """
    found: list[AutoWork] = []
    for candidate in workflow.auto_actions():
        if actor.is_automation and candidate.name == envelope.action:
            continue
        if not candidate.allows_state(process.state):
            continue
        scope = Scope(
            document=process.document,
            now=envelope.at_datetime(),
            input={},
            actor=AUTOMATION_SCOPE_ACTOR,
            event={"hash": event_hash, "actor": envelope.actor, "at": envelope.at},
            process={"id": process.id, "workflow": process.workflow, "parent": process.parent},
        )
        try:
            data = render_auto_data(candidate, scope)
        except CharterError as exc:
            # Earlier actions know nothing of downstream automation: a broken template
            # fails its own queue row, never the event. When the data is missing, a
            # `when` that reads the input cannot be decided, so the row is recorded.
            reads_input = candidate.when is not None and any(
                name == "input" or name.startswith("input.") for name in candidate.when.references()
            )
            if candidate.when is None or reads_input or candidate.when.holds(scope):
                error = f"auto data of {candidate.name!r} does not render: {exc.message}"
                found.append(AutoWork(candidate.name, {}, process.state, error=error))
            continue
        scope = Scope(
            document=scope.document,
            now=scope.now,
            input=data,
            actor=scope.actor,
            event=scope.event,
            process=scope.process,
        )
        if candidate.when is not None and not candidate.when.holds(scope):
            continue
        found.append(AutoWork(candidate.name, data, process.state))
    return tuple(found)


def _check_state(action: Action, process: ProcessView | None) -> None:
    if action.is_create and process is not None:
        raise WrongState(f"action {action.name!r} creates a process; {process.id!r} exists")
    if process is None:
        if not action.is_create:
            raise WrongState(f"action {action.name!r} does not create a process")
        return
    if not action.allows_state(process.state):
        allowed = "any state" if action.from_states is None else list(action.from_states)
        raise WrongState(
            f"action {action.name!r} runs from {allowed}; the process is in {process.state!r}"
        )


def _scope(
    process: ProcessView | None,
    envelope: Envelope,
    actor: ActorContext,
    event_hash: str,
    input_: JsonObject,
    unknowns: list[str] | None = None,
) -> Scope:
    return Scope(
        document=process.document if process is not None else {},
        now=envelope.at_datetime(),
        input=input_,
        actor=actor.to_scope(),
        event={"hash": event_hash, "actor": envelope.actor, "at": envelope.at},
        process={
            "id": envelope.process,
            "workflow": envelope.workflow,
            "parent": process.parent if process is not None else None,
        },
        unknowns=unknowns,
    )


HOLD_SENSITIVE = frozenset({*HOLD_ACTIONS, ERASE_ACTION})
"""The actions whose decision depends on whether the process is under legal hold."""


def _check_hold(action: Action, held: bool) -> None:
    name = action.name
    if name == ERASE_ACTION and held:
        raise ConditionFailed(
            "the process is under legal hold: nothing is erased until charter:release"
        )
    if name == HOLD_ACTION and held:
        raise ConditionFailed("the process is under legal hold already")
    if name == RELEASE_ACTION and not held:
        raise ConditionFailed("the process is not under legal hold")


def _check_replayed_input(action: Action, input_: JsonObject, unknowns: list[str]) -> None:
    """The input schema, on replay: a value that is erased was checked when the event was
    decided, so what the schema says at, above or below it is noted, not refused."""
    markers = marker_pointers(input_)
    if not markers:
        action.check_input(input_)
        return
    try:
        action.check_input(input_)
    except InvalidInput as exc:
        problems = exc.context.get("problems") or [{"pointer": ""}]
        if not all(
            any(pointers.overlap(str(problem["pointer"]), marker) for marker in markers)
            for problem in problems
        ):
            raise
        unknowns.extend(f"the input schema at {marker} (erased)" for marker in markers)
