"""The fire-time check of `input.meta.automation` (docs/wire-format.md and docs/automation.md).

Only the automation actor may fire, only for a durable work row the engine itself
wrote, only while that row is held by this transaction (a batch locked it) or claimed
by the worker named in the provenance (a lease), only once
its occurrence is due by the engine's clock, and only with provenance identical to what
the row says. A second event for the same work occurrence is refused by a unique key
(`duplicate`), so racing workers or an expired lease never yield two events.

The row is read with the event's other inputs (`Store.decision_inputs`, one round trip):
`work_ref` says which row an event names, `work_row_for` judges it once it is read.
"""

from __future__ import annotations

import uuid

from charter.core.envelope import Envelope
from charter.core.errors import Duplicate, NotDue, ReservedField, WrongState
from charter.core.jsontypes import JsonValue
from charter.core.timefmt import format_rfc3339
from charter.engine.records import ActorContext
from charter.engine.rules import has_automation_meta
from charter.engine.store import FiringWork, WorkRef
from charter.engine.work import AUTO_ACTION, SCHEDULED_ACTION, WorkRow, without_provenance


def work_ref(envelope: Envelope) -> WorkRef | None:
    """The (kind, work id) an event's provenance names, when it is well-formed enough to
    look up; anything else is judged (and refused) by `work_row_for`."""
    meta = _meta(envelope)
    if not isinstance(meta, dict):
        return None
    kind, work_id = meta.get("kind"), meta.get("work_id")
    if kind not in (SCHEDULED_ACTION, AUTO_ACTION):
        return None
    if not isinstance(work_id, str) or not _is_uuid(work_id):
        return None
    return str(kind), work_id


def work_row_for(
    loaded: FiringWork | None, envelope: Envelope, actor: ActorContext
) -> FiringWork | None:
    """The claimed work row this event fires, or None for an ordinary event.

    `loaded` is the row `work_ref(envelope)` named, as read with the event's inputs.
    Raises ReservedField for forged or mismatched provenance, WrongState for a row that
    is no longer claimed by the firing worker (cancelled, reclaimed, finished) and
    NotDue for an occurrence the engine's clock has not reached.
    """
    if not has_automation_meta(envelope.input):
        if actor.is_automation:
            raise ReservedField(
                "the automation actor fires only durable work: input.meta.automation is required"
            )
        return None
    if not actor.is_automation:
        raise ReservedField("input.meta.automation is reserved for the automation actor")
    meta = _meta(envelope)
    if not isinstance(meta, dict):
        raise ReservedField("input.meta.automation must be an object")
    kind, work_id = meta.get("kind"), meta.get("work_id")
    if not isinstance(work_id, str) or not _is_uuid(work_id):
        raise ReservedField("input.meta.automation.work_id must name a work row")
    if kind not in (SCHEDULED_ACTION, AUTO_ACTION):
        raise ReservedField(
            f"input.meta.automation.kind must be {SCHEDULED_ACTION!r} or {AUTO_ACTION!r}"
        )
    if loaded is None:
        raise ReservedField(f"input.meta.automation names no {kind} {work_id}")
    row = loaded.row
    if row.process_id != envelope.process or row.action_name != envelope.action:
        raise ReservedField(
            f"work row {row.id} fires {row.action_name!r} on {row.process_id!r}, "
            f"not {envelope.action!r} on {envelope.process!r}"
        )
    if without_provenance(envelope.input) != row.action_data:
        raise ReservedField(f"the input does not match the data of work row {row.id}")
    if meta != row.provenance(worker=_worker(meta)):
        raise ReservedField(f"input.meta.automation does not match work row {row.id}")
    held_here = loaded.held and row.status in ("active", "pending")
    claimed_by_firer = row.status == "claimed" and row.claimed_by == meta.get("worker")
    if not (held_here or claimed_by_firer):
        raise WrongState(
            f"work row {row.id} is {row.status}"
            + (f" by {row.claimed_by}" if row.status == "claimed" else "")
            + "; it cannot fire now"
        )
    if not loaded.due:
        # The engine's clock decides, not the caller's: a claim made with an early `now`
        # must not fire an SLA escalation before its deadline.
        raise NotDue(
            f"work row {row.id} is due at {format_rfc3339(row.occurrence)}; it cannot fire before"
        )
    return loaded


def refuse_if_fired(work: FiringWork) -> None:
    """Duplicate, naming the earlier event, when this occurrence already fired.

    Checked before the rules: a fired transition would otherwise look like a wrong
    state, and the worker would record a skip for work that in fact happened.
    """
    if work.fired_event is not None:
        raise already_fired(work.row, work.fired_event)


def already_fired(row: WorkRow, event_hash: str | None) -> Duplicate:
    return Duplicate(
        f"work row {row.id} already fired for {row.occurrence.isoformat()}",
        event_hash=event_hash,
    )


def _meta(envelope: Envelope) -> JsonValue:
    holder = envelope.input.get("meta")
    return holder.get("automation") if isinstance(holder, dict) else None


def _worker(meta: dict[str, JsonValue]) -> str | None:
    worker = meta.get("worker")
    return worker if isinstance(worker, str) else None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
