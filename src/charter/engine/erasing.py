"""What a `charter:erase` event does besides being recorded: which kept personal values
its scope takes, and the process data derived again without them (docs/dsl.md,
"Personal data").

Both are worked out under the process lock, in the event's transaction: the values its
scope names that no earlier erasure took, and a replay of every earlier event with a
marker in place of each value erased so far or now (charter.engine.rederive). The data
that replay gives, with `{"erased": true}` where an erased value was or what came from
it, is what the process row keeps from this event on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from charter.core.envelope import Envelope
from charter.core.errors import CharterError, IntegrityViolation, InvalidInput
from charter.core.jsontypes import JsonObject
from charter.dsl.erased import Erased
from charter.dsl.erasure import EraseInput
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rederive import PastEvent, Rederivation, past_input
from charter.engine.registry import Registry
from charter.engine.store import DisclosureRow, Store


@dataclass(frozen=True)
class Erasure:
    """An erase event's effect: the (event hash, pointer) values it takes, and the data."""

    targets: tuple[tuple[str, str], ...]
    data: JsonObject


def plan_erasure(
    store: Store, registry: Registry, process: ProcessView, erase: EraseInput, seq: int
) -> Erasure:
    """The values `erase` takes from `process` and the data without them, for the erase
    event that will be `seq`. InvalidInput when the scope names an event the process does
    not have, or takes nothing."""
    events = store.process_events(process.id)
    seq_of = {event.hash: event.seq for event in events}
    if erase.events is not None:
        foreign = sorted(erase.events - seq_of.keys())
        if foreign:
            raise InvalidInput(
                f"input /scope/events: {foreign[0]} is not an event of process {process.id!r}",
                problems=[{"pointer": "/scope/events", "message": "not an event of the process"}],
            )
    rows = store.disclosures(process.id)
    targets = tuple(
        (row.event_hash, row.pointer)
        for row in rows
        if row.text is not None and erase.covers(row.event_hash, row.pointer)
    )
    if not targets:
        raise InvalidInput(
            "nothing to erase: the scope takes no personal value that is still kept",
            problems=[{"pointer": "/scope", "message": "nothing to erase"}],
        )
    kept, gone = _split(rows, set(targets), seq_of, seq)
    derived = Rederivation(process, three_valued=True)
    for event in events:
        envelope = Envelope.from_text(event.envelope_text)
        try:
            derived.step(
                PastEvent(
                    seq=event.seq,
                    hash=event.hash,
                    envelope=envelope,
                    actor=ActorContext(event.actor_id, envelope.actor, event.actor_roles),
                    genesis=event.kind == "spawn",
                    workflow=registry.workflow(store, event.workflow_version),
                    input=past_input(envelope, kept[event.hash], gone[event.hash]),
                )
            )
        except CharterError as exc:
            # The events were accepted once; if they do not decide again, the data
            # cannot be derived without the values, and nothing is erased.
            raise IntegrityViolation(
                f"cannot erase: seq {event.seq} of {process.id!r} does not replay "
                f"({exc.code}: {exc.message})"
            ) from None
    return Erasure(targets=targets, data=derived.data())


def _split(
    rows: list[DisclosureRow], targets: set[tuple[str, str]], seq_of: dict[str, int], seq: int
) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, Erased]]]:
    """The texts still kept after this erasure, and a marker for each value gone: `by`
    the seq of the erase event that took it (this one's for the targets)."""
    kept: dict[str, dict[str, str]] = defaultdict(dict)
    gone: dict[str, dict[str, Erased]] = defaultdict(dict)
    for row in rows:
        key = (row.event_hash, row.pointer)
        if row.text is not None and key not in targets:
            kept[row.event_hash][row.pointer] = row.text
        else:
            by = seq if key in targets else seq_of.get(row.erased_by or "", seq)
            gone[row.event_hash][row.pointer] = Erased(by)
    return kept, gone
