"""Would a process's recorded history be accepted, event by event, under a new definition?

Each event is decided again with the engine's pure `decide` under the new definition,
from the state the events before it produced there, with the actor context recorded for
it: the first event the rules refuse is where the history diverges.

Replaying every event of every history is not needed. Whether `decide` accepts an
event, and the state and data it leaves, depend of a definition only on the action the
event names (and the `dsl` version): its `type`, roles, `from`, `to`, `when`, `input` and
`mutate`, which must be the same after canonicalisation; its `schedule` and `spawn`
templates, which may refuse when they render, so the new ones must be the same or absent;
never its `description`, `cancel` or `auto` (other actions' `auto` data never refuses an
event). Where every event of a history names such an unchanged action, each decides as
it did then and the history is accepted. `Fingerprints` finds the (version, action)
pairs that changed. A history whose first changed event names an action the new
definition no longer has diverges right there (`unknown_action`, the first check
`decide` makes); only the others are replayed.

A replay can also stop early. Of an action's keys, only `type`, `to` and `mutate` shape
the state and data an accepted event leaves; the others (roles, `from`, `when`, `input`,
the templates) only accept or refuse. When no changed action of a history reshapes, every
event the new rules accept leaves what it left when it was recorded, so once the last
changed event is accepted the events after it decide as they did: they are not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from charter.core.canonical import canonical_bytes
from charter.core.envelope import Envelope
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.model import MIGRATE_ACTION, Workflow
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rules import decide

NEVER_REFUSE = ("description", "cancel", "auto")
"""Keys of an action that neither refuse an event nor change the state or data it leaves."""
MAY_REFUSE = ("schedule", "spawn")
"""Keys whose templates may refuse an event when they render: removing them cannot."""
SHAPING = ("type", "to", "mutate")
"""Keys that, with the state and data before an accepted event, make the ones it leaves."""


@dataclass(frozen=True)
class ActionCore:
    """What decides one action under one definition, as canonical bytes."""

    decides: bytes  # every key that accepts, refuses or shapes, templates apart
    shapes: bytes  # the keys that make the state and data an accepted event leaves
    templates: JsonObject  # its `schedule` and `spawn`, when it has them


def action_core(definition: JsonValue, action: str) -> ActionCore | None:
    """What decides `action` under `definition`; None when it has no such action."""
    if not isinstance(definition, dict):
        return None
    dsl = definition.get("dsl")
    if action == MIGRATE_ACTION:
        # The built-in action is made of the migration block and the list of states;
        # any change to either counts as reshaping (the cautious reading).
        block = definition.get("migration")
        if block is None:
            return None
        whole = canonical_bytes({"m": block, "s": definition.get("states"), "d": dsl})
        return ActionCore(whole, whole, {})
    actions = definition.get("actions")
    spec = actions.get(action) if isinstance(actions, dict) else None
    if not isinstance(spec, dict):
        return None
    core = {k: v for k, v in spec.items() if k not in NEVER_REFUSE and k not in MAY_REFUSE}
    shaping = {k: v for k, v in spec.items() if k in SHAPING}
    templates: JsonObject = {k: spec[k] for k in MAY_REFUSE if k in spec}
    return ActionCore(
        canonical_bytes({"a": core, "d": dsl}),
        canonical_bytes({"a": shaping, "d": dsl}),
        templates,
    )


@dataclass(frozen=True)
class Fingerprints:
    """Which (workflow version, action) pairs decide the same under the new definition."""

    new_definition: JsonValue
    old_definitions: Mapping[str, JsonValue]  # by version

    def changed(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """The pairs whose action may decide differently now (or is gone)."""
        return {(version, action) for version, action in pairs if not self._same(version, action)}

    def reshaping(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Of `pairs`, those whose accepted event may leave another state or data now
        (or whose action is gone, or whose version is not known)."""
        found: set[tuple[str, str]] = set()
        for version, action in pairs:
            new, old = self._cores(version, action)
            if new is None or old is None or new.shapes != old.shapes:
                found.add((version, action))
        return found

    def gone(self, action: str) -> bool:
        """Whether the new definition has no action `action` (nor a migration block)."""
        return action_core(self.new_definition, action) is None

    def _cores(self, version: str, action: str) -> tuple[ActionCore | None, ActionCore | None]:
        old_definition = self.old_definitions.get(version)
        old = None if old_definition is None else action_core(old_definition, action)
        return action_core(self.new_definition, action), old

    def _same(self, version: str, action: str) -> bool:
        new, old = self._cores(version, action)
        if new is None or old is None or new.decides != old.decides:
            return False
        # A schedule or spawn the new action has must be the one the old had; one it
        # dropped cannot refuse anything.
        return all(
            key in old.templates and canonical_bytes(value) == canonical_bytes(old.templates[key])
            for key, value in new.templates.items()
        )


@dataclass(frozen=True)
class RecordedEvent:
    """One stored event, as much of it as a replay needs."""

    seq: int
    kind: str  # "action" or "spawn" (a child's unsigned first event)
    hash: str
    envelope_text: str
    actor_id: str
    actor_key: str
    actor_roles: tuple[str, ...]


@dataclass(frozen=True)
class Divergence:
    seq: int
    code: str
    message: str


def first_divergence(
    process_id: str,
    parent: str | None,
    workflow: Workflow,
    events: Sequence[RecordedEvent],
) -> Divergence | None:
    """The first of `events` (one process's, in seq order) that `workflow` refuses;
    `parent` is the process's parent, which conditions may read."""
    current: ProcessView | None = None
    for event in events:
        try:
            envelope = Envelope.from_text(event.envelope_text)
            actor = ActorContext(event.actor_id, event.actor_key, event.actor_roles)
            decision = decide(
                current, workflow, envelope, actor,
                event_hash=event.hash, genesis=event.kind == "spawn",
            )  # fmt: skip
        except CharterError as exc:
            return Divergence(event.seq, exc.code, exc.message)
        current = ProcessView(
            id=process_id,
            workflow=envelope.workflow,
            state=decision.state,
            data=decision.data,
            head=event.hash,
            seq=event.seq,
            parent=parent,
        )
    return None
