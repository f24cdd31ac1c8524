"""Pure hash chains for verifier tests: real keys and signatures, decided by `decide`.

A `Chain` does what the engine does for one process, without a database: it signs an
envelope, decides it against the workflow, and records the event and the new row, so
its Evidence verifies (and replays) exactly as an engine-written process would. The
automation actor fires work rows built from the events that caused them, with the
provenance the worker would copy (`fired_input`), or with whatever a test forges.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from charter.audit.evidence import ActorKey, EventRow, Evidence
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, genesis_envelope, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import parse_rfc3339
from charter.dsl.canonical import version_hash
from charter.dsl.mutate import ResolvedSpawn
from charter.dsl.validate import load_workflow
from charter.engine.records import AUTOMATION_ACTOR_ID, AUTOMATION_ROLE, ActorContext, ProcessView
from charter.engine.rules import Decision, decide
from charter.engine.work import QueueRow, ScheduledRow, WorkRow, fired_input

AT = "2026-06-18T10:00:00.000Z"
PARENT_PATH = "tests/parent"
CHILD_PATH = "tests/child"
GRANDCHILD_PATH = "tests/grandchild"
AUTOMATED_PATH = "tests/automated"
AUTOMATED_CHILD_PATH = "tests/automated-child"
WORKER = "worker-1"

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
# Work for the automation actor: schedules (one-shot and recurring) from `open`,
# automatic `tally` (stays in its state) and `screen` once `submit` makes them eligible,
# and a child whose genesis schedules and queues work of its own.
AUTOMATED: JsonObject = {
    "dsl": 2,
    "states": ["draft", "ready", "screened"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "draft",
            "schedule": [
                {"id": "reminder", "action": "remind", "in": "1h", "data": {"n": 1}},
                {"id": "review", "action": "review", "every": "1d", "data": {}},
            ],
        },
        "submit": {"type": "transition", "role": "clerk", "from": "draft", "to": "ready"},
        "screen": {
            "type": "transition",
            "role": "AUTOMATION",
            "auto": True,
            "from": "ready",
            "to": "screened",
        },
        "tally": {
            "type": "update",
            "role": "AUTOMATION",
            "auto": True,
            "from": "ready",
            "mutate": {"$inc": {"tallies": 1}},
        },
        "remind": {
            "type": "update",
            "role": "AUTOMATION",
            "from": "*",
            "mutate": {"$inc": {"reminders": 1}},
        },
        "review": {
            "type": "update",
            "role": "AUTOMATION",
            "from": "*",
            "mutate": {"$inc": {"reviews": 1}},
        },
        "split": {
            "type": "update",
            "role": "clerk",
            "from": "*",
            "spawn": [
                {
                    "workflow": AUTOMATED_CHILD_PATH,
                    "process": "{{ process.id }}-sub",
                    "action": "start",
                    "data": {},
                }
            ],
        },
    },
}
AUTOMATED_CHILD: JsonObject = {
    "dsl": 2,
    "states": ["new", "triaged"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "start": {
            "type": "create",
            "role": "clerk",
            "to": "new",
            "schedule": [{"id": "nudge", "action": "nudge", "in": "2h", "data": {}}],
        },
        "triage": {
            "type": "transition",
            "role": "AUTOMATION",
            "auto": True,
            "from": "new",
            "to": "triaged",
        },
        "nudge": {
            "type": "update",
            "role": "AUTOMATION",
            "from": "*",
            "mutate": {"$inc": {"nudges": 1}},
        },
    },
}
MIGRATED_PATH = "tests/migrated"
# A workflow whose `ops` may migrate its processes (the built-in `charter:migrate`).
MIGRATED: JsonObject = {
    "dsl": 2,
    "states": ["open", "shipped", "delivered"],
    "roles": ["clerk", "ops"],
    "migration": {"role": "ops"},
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open"},
        "ship": {"role": "clerk", "from": "open", "to": "shipped"},
        "deliver": {"role": "clerk", "from": "shipped", "to": "delivered"},
    },
}
DEFINITIONS: dict[str, JsonObject] = {
    PARENT_PATH: PARENT,
    CHILD_PATH: CHILD,
    GRANDCHILD_PATH: GRANDCHILD,
    AUTOMATED_PATH: AUTOMATED,
    AUTOMATED_CHILD_PATH: AUTOMATED_CHILD,
    MIGRATED_PATH: MIGRATED,
}


@dataclass(frozen=True)
class Signer:
    """A key and the actor the engine knows it as."""

    key: SecretKey
    actor_id: str
    roles: tuple[str, ...]

    @property
    def context(self) -> ActorContext:
        return ActorContext(self.actor_id, self.key.public_key_hex, self.roles)


AUTOMATION = Signer(SecretKey(bytes(range(64, 96))), AUTOMATION_ACTOR_ID, (AUTOMATION_ROLE,))
AUTOMATION_KEYS = (ActorKey(AUTOMATION.key.public_key_hex, AT, None),)


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

    def submit(
        self, action: str, input_: JsonObject | None = None, *, signer: Signer | None = None
    ) -> Decision:
        """Sign and decide `action` as this chain's actor, or as `signer`."""
        signer = signer or Signer(self.key, self.actor_id, self.roles)
        envelope = Envelope(
            v=1,
            process=self.process_id,
            workflow=self.path,
            action=action,
            input=input_ or {},
            prev=self.row.head if self.row else None,
            actor=signer.key.public_key_hex,
            at=AT,
        )
        signature = sign(envelope, signer.key).signature
        return self._append(envelope, signature, "action", signer.context)

    # --- automation ----------------------------------------------------------------------

    def scheduled_row(
        self, cause_seq: int, schedule_id: str, *, run_at: str | None = None
    ) -> ScheduledRow:
        """The work row the engine wrote for `schedule_id` of event `cause_seq`, claimed."""
        cause = self.events[cause_seq - 1]
        [spec] = [s for s in self.decisions[cause_seq - 1].schedules if s.id == schedule_id]
        return ScheduledRow(
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"{cause.hash}/{schedule_id}"),
            schedule_id=spec.id,
            process_id=self.process_id,
            workflow_path=self.path,
            action_name=spec.action,
            action_data=spec.data,
            run_at=parse_rfc3339(run_at) if run_at else spec.run_at,
            not_before=None,
            interval=None,
            until_ts=None,
            max_count=None,
            fire_count=0,
            status="claimed",
            created_event_hash=cause.hash,
            created_by_action=cause.action,
            created_by_actor=cause.actor,
            created_at=parse_rfc3339(AT),
            attempts=0,
            occurrence_attempts=0,
            claimed_by=WORKER,
            lease_expires_at=None,
            lease_token=None,
        )

    def queue_row(self, cause_seq: int, action: str) -> QueueRow:
        """The queue row the engine wrote when event `cause_seq` made `action` eligible."""
        cause = self.events[cause_seq - 1]
        [work] = [w for w in self.decisions[cause_seq - 1].auto if w.action == action]
        return QueueRow(
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"{cause.hash}/{action}"),
            process_id=self.process_id,
            workflow_path=self.path,
            action_name=work.action,
            action_data=work.data,
            status="claimed",
            reason="auto action became available",
            available_state=work.available_state,
            queued_by_event_hash=cause.hash,
            queued_by_action=cause.action,
            queued_by_actor=cause.actor,
            queued_at=parse_rfc3339(AT),
            attempts=0,
            claimed_by=WORKER,
            lease_expires_at=None,
            lease_token=None,
            cascade_depth=0,
            cascade_origin_event_hash=None,
        )

    def fire(
        self,
        row: WorkRow,
        *,
        forge: Callable[[dict[str, Any]], None] | None = None,
        action: str | None = None,
        signer: Signer = AUTOMATION,
    ) -> Decision:
        """Fire `row` as the worker would; `forge` edits the provenance before signing."""
        input_ = fired_input(row)
        provenance: dict[str, Any] = dict(row.provenance())
        if forge is not None:
            forge(provenance)
        meta = input_["meta"]
        assert isinstance(meta, dict)
        input_["meta"] = {**meta, "automation": provenance}
        return self.submit(action or row.action_name, input_, signer=signer)

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
        child._append(genesis, None, "spawn", self.actor)
        return child

    def _append(
        self, envelope: Envelope, signature: str | None, kind: str, actor: ActorContext
    ) -> Decision:
        workflow = load_workflow(self.definition)
        decision = decide(
            self.row,
            workflow,
            envelope,
            actor,
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
                actor_id=actor.id,
                actor_roles=actor.roles,
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
        return Evidence(self.row, tuple(self.events), workflows, cause_events, AUTOMATION_KEYS)


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


def automated(key: SecretKey, process_id: str = "case-a") -> tuple[Chain, Chain]:
    """A process whose automated events fire every kind of work, and its spawned child.

    Parent: 1 open (schedules `reminder` and recurring `review`), 2 submit (queues `tally`
    and `screen`), 3 tally, 4 screen, 5 reminder, 6 and 7 two occurrences of review,
    8 split (spawns the child). Child: 1 genesis (schedules `nudge`, queues `triage`),
    2 triage, 3 nudge.
    """
    parent = Chain(key, process_id, AUTOMATED_PATH)
    parent.submit("open")
    parent.submit("submit")
    parent.fire(parent.queue_row(2, "tally"))
    parent.fire(parent.queue_row(2, "screen"))
    parent.fire(parent.scheduled_row(1, "reminder"))
    parent.fire(parent.scheduled_row(1, "review"))
    parent.fire(parent.scheduled_row(1, "review", run_at="2026-06-20T10:00:00.000Z"))
    [spawn] = parent.submit("split").spawns
    child = parent.spawn(spawn, parent.envelopes[-1], parent.events[-1])
    child.fire(child.queue_row(1, "triage"))
    child.fire(child.scheduled_row(1, "nudge"))
    return parent, child
