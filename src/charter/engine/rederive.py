"""Deciding a process's events again, in order, from nothing: what replay checks, and
how `charter:erase` derives the data it stores.

Each event is decided with the pure `decide`, on the workflow version it recorded and
the actor context the engine recorded for it, from the state the events before it
produced. Where a personal value is gone (erased, or withheld from an export) its input
holds an `Erased` marker, conditions are three-valued and what cannot be checked is
noted as unverifiable (charter.dsl.erased). After each `charter:erase` the values it
erased settle into `{"erased": true}`, as the engine stored them when it committed:
later events were decided on that, not on a marker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from charter.core.disclosures import join_disclosures
from charter.core.envelope import Envelope
from charter.core.jsontypes import JsonObject
from charter.dsl.erased import Erased, settle
from charter.dsl.model import HOLD_ACTION, Workflow
from charter.dsl.retention import HOLD_ACTIONS
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rules import Decision, decide


@dataclass(frozen=True)
class PastEvent:
    """One recorded event, with what deciding it again needs."""

    seq: int
    hash: str
    envelope: Envelope
    actor: ActorContext
    genesis: bool  # a spawned child's unsigned first event
    workflow: Workflow
    input: JsonObject  # the full input, with markers where values are gone


def past_input(
    envelope: Envelope, kept: Mapping[str, str], gone: Mapping[str, Erased]
) -> JsonObject:
    """The input an event was decided on: its envelope's `input` with the disclosures
    `kept` (pointer → text) joined in, and a marker at each pointer in `gone`.
    BadDisclosure when a kept text does not match, or a committed value is neither."""
    if envelope.sd is None:
        return envelope.input
    return join_disclosures(envelope.input, envelope.sd, list(kept.values()), gone)


@dataclass
class Rederivation:
    """The process as its events so far make it. `three_valued` is set when some value
    is gone; `unverifiable` collects (seq, why) for what could not be checked."""

    identity: ProcessView
    three_valued: bool = False
    current: ProcessView | None = None
    unverifiable: list[tuple[int, str]] = field(default_factory=list)
    held: bool = False  # under legal hold, as the events so far say

    def step(self, event: PastEvent) -> Decision:
        """Decide `event` again and move on; the CharterError that refuses it, if any."""
        unknowns: list[str] | None = [] if self.three_valued else None
        decision = decide(
            self.current,
            event.workflow,
            event.envelope,
            event.actor,
            event_hash=event.hash,
            genesis=event.genesis,
            full_input=event.input,
            unknowns=unknowns,
            held=self.held,
        )
        if event.envelope.action in HOLD_ACTIONS:
            self.held = event.envelope.action == HOLD_ACTION
        data = decision.data
        if decision.erasure is not None and self.three_valued:
            data = settle(data, event.seq)  # type: ignore[assignment]
        if unknowns:
            self.unverifiable.extend((event.seq, why) for why in dict.fromkeys(unknowns))
        identity = self.identity
        self.current = ProcessView(
            id=identity.id,
            workflow=identity.workflow,
            state=decision.state,
            data=data,
            head=event.hash,
            seq=event.seq,
            parent=identity.parent,
            parent_event=identity.parent_event,
        )
        return decision

    def data(self) -> JsonObject:
        """The derived data in JSON: every marker left in its stored form."""
        if self.current is None:
            return {}
        return settle(self.current.data)  # type: ignore[return-value]
