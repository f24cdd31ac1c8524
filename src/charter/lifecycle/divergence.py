"""Would a process's recorded history be accepted, event by event, under a new definition?

Each event is decided again with the engine's pure `decide` under the new definition,
from the state the events before it produced there, with the actor context recorded for
it: the first event the rules refuse is where the history diverges.

Replaying every history is not needed. `decide` reads, of a definition, only the action
an event names (and its `dsl` version); so when every event of a history names an
action whose definition is byte-for-byte the same, after canonicalisation, in the
version that decided it and in the new one, each event decides as it did then and the
history is accepted. `Fingerprints` finds those (version, action) pairs, and only the
histories that hold another are replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from charter.core.canonical import canonical_bytes
from charter.core.envelope import Envelope
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonValue
from charter.dsl.model import MIGRATE_ACTION, Workflow
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rules import decide


def action_fingerprint(definition: JsonValue, action: str) -> bytes | None:
    """The canonical bytes `decide` depends on for `action` under `definition`; None
    when the definition has no such action."""
    if not isinstance(definition, dict):
        return None
    if action == MIGRATE_ACTION:
        # The built-in action is made of the migration block and the list of states.
        block = definition.get("migration")
        if block is None:
            return None
        relevant: JsonValue = {
            "m": block,
            "s": definition.get("states"),
            "d": definition.get("dsl"),
        }
        return canonical_bytes(relevant)
    actions = definition.get("actions")
    spec = actions.get(action) if isinstance(actions, dict) else None
    if spec is None:
        return None
    return canonical_bytes({"a": spec, "d": definition.get("dsl")})


@dataclass(frozen=True)
class Fingerprints:
    """Which (workflow version, action) pairs decide the same under the new definition."""

    new_definition: JsonValue
    old_definitions: Mapping[str, JsonValue]  # by version

    def changed(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """The pairs whose action may decide differently now (or is gone)."""
        found: set[tuple[str, str]] = set()
        for version, action in pairs:
            new = action_fingerprint(self.new_definition, action)
            old = self.old_definitions.get(version)
            if new is None or old is None or action_fingerprint(old, action) != new:
                found.add((version, action))
        return found


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
