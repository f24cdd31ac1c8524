"""Pure hash chains for verifier tests: real keys and signatures, decided by `decide`.

A `Chain` does what the engine does for one process, without a database: it signs an
envelope, decides it against the workflow, and records the event and the new row, so
its Evidence verifies (and replays) exactly as an engine-written process would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, genesis_envelope, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.canonical import version_hash
from charter.dsl.mutate import ResolvedSpawn
from charter.dsl.validate import load_workflow
from charter.engine.evidence import EventRow, Evidence
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rules import Decision, decide

AT = "2026-06-18T10:00:00.000Z"
PARENT_PATH = "tests/parent"
CHILD_PATH = "tests/child"
GRANDCHILD_PATH = "tests/grandchild"

PARENT: JsonObject = {
    "dsl": 2,
    "states": ["open", "spawned"],
    "roles": ["clerk"],
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "mutate": {"$set": {"name": "{{ input.name }}"}},
        },
        "note": {"type": "update", "role": "clerk", "from": "*", "mutate": {"$inc": {"notes": 1}}},
        "split": {
            "type": "transition",
            "role": "clerk",
            "from": "open",
            "to": "spawned",
            "spawn": [
                {
                    "workflow": CHILD_PATH,
                    "process": "{{ process.id }}-child",
                    "action": "start",
                    "data": {"reason": "{{ input.reason }}"},
                }
            ],
        },
    },
}
CHILD: JsonObject = {
    "dsl": 2,
    "states": ["started"],
    "roles": ["clerk"],
    "actions": {
        "start": {
            "type": "create",
            "role": "clerk",
            "to": "started",
            "mutate": {"$set": {"reason": "{{ input.reason }}"}},
            "spawn": [
                {
                    "workflow": GRANDCHILD_PATH,
                    "process": "{{ process.id }}-g",
                    "action": "begin",
                    "data": {},
                }
            ],
        },
        "note": {"type": "update", "role": "clerk", "from": "*", "mutate": {"$inc": {"notes": 1}}},
    },
}
GRANDCHILD: JsonObject = {
    "dsl": 2,
    "states": ["begun"],
    "roles": ["clerk"],
    "actions": {"begin": {"type": "create", "role": "clerk", "to": "begun"}},
}
DEFINITIONS: dict[str, JsonObject] = {
    PARENT_PATH: PARENT,
    CHILD_PATH: CHILD,
    GRANDCHILD_PATH: GRANDCHILD,
}


@dataclass
class Chain:
    """One process built event by event, as the engine would build it."""

    key: SecretKey
    process_id: str
    path: str
    actor_id: str = "ada"
    roles: tuple[str, ...] = ("clerk",)
    parent: str | None = None
    parent_event: str | None = None
    events: list[EventRow] = field(default_factory=list)
    row: ProcessView | None = None
    envelopes: list[Envelope] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    @property
    def definition(self) -> JsonObject:
        return DEFINITIONS[self.path]

    @property
    def version(self) -> str:
        return version_hash(self.definition)

    @property
    def actor(self) -> ActorContext:
        return ActorContext(self.actor_id, self.key.public_key_hex, self.roles)

    def submit(self, action: str, input_: JsonObject | None = None) -> Decision:
        envelope = Envelope(
            v=1,
            process=self.process_id,
            workflow=self.path,
            action=action,
            input=input_ or {},
            prev=self.row.head if self.row else None,
            actor=self.key.public_key_hex,
            at=AT,
        )
        signature = sign(envelope, self.key).signature
        return self._append(envelope, signature, "action")

    def spawn(self, spawn: ResolvedSpawn, cause: Envelope, cause_event: EventRow) -> Chain:
        """The child `spawn` of this chain's event `cause`, with its genesis recorded."""
        child = Chain(
            key=self.key,
            process_id=spawn.process,
            path=spawn.workflow,
            actor_id=self.actor_id,
            roles=self.roles,
            parent=cause.process,
            parent_event=cause_event.hash,
        )
        genesis = genesis_envelope(
            cause,
            process=spawn.process,
            workflow=spawn.workflow,
            action=spawn.action,
            input=spawn.data,
        )
        child._append(genesis, None, "spawn")
        return child

    def _append(self, envelope: Envelope, signature: str | None, kind: str) -> Decision:
        workflow = load_workflow(self.definition)
        decision = decide(
            self.row,
            workflow,
            envelope,
            self.actor,
            event_hash=envelope.hash(),
            genesis=kind == "spawn",
        )
        seq = len(self.events) + 1
        self.events.append(
            EventRow(
                process_id=self.process_id,
                seq=seq,
                hash=envelope.hash(),
                prev_hash=envelope.prev,
                kind=kind,
                envelope_text=envelope.message().decode("utf-8"),
                signature=signature,
                actor=envelope.actor,
                actor_id=self.actor_id,
                actor_roles=self.roles,
                action=envelope.action,
                workflow_path=self.path,
                workflow_version=self.version,
                cause_hash=envelope.cause,
                received_at=AT,
            )
        )
        self.envelopes.append(envelope)
        self.decisions.append(decision)
        self.row = ProcessView(
            id=self.process_id,
            workflow=self.path,
            state=decision.state,
            data=decision.data,
            head=envelope.hash(),
            seq=seq,
            parent=self.parent,
            parent_event=self.parent_event,
        )
        return decision

    def evidence(self, *causes: Chain) -> Evidence:
        """This chain's Evidence; `causes` are the chains whose events caused its genesis."""
        assert self.row is not None
        workflows: dict[str, JsonValue] = {self.version: self.definition}
        cause_events: dict[str, EventRow] = {}
        for chain in causes:
            workflows[chain.version] = chain.definition
            cause_events |= {event.hash: event for event in chain.events}
        return Evidence(self.row, tuple(self.events), workflows, cause_events)


def family(key: SecretKey, process_id: str = "case-1") -> tuple[Chain, Chain, Chain]:
    """A parent with three events whose `split` spawned a child, which spawned a grandchild."""
    parent = Chain(key, process_id, PARENT_PATH)
    parent.submit("open", {"name": "Ada"})
    parent.submit("note")
    decision = parent.submit("split", {"reason": "kyc"})
    [spawn] = decision.spawns
    child = parent.spawn(spawn, parent.envelopes[-1], parent.events[-1])
    [grand_spawn] = child.decisions[0].spawns  # the child's genesis spawns the grandchild
    grandchild = child.spawn(grand_spawn, child.envelopes[0], child.events[0])
    return parent, child, grandchild
