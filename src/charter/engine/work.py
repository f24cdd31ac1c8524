"""Durable automation work rows and the provenance fired events carry (docs/automation.md).

The worker copies provenance from a work row into `input.meta.automation`; the engine
rebuilds the same provenance from the row at fire time and refuses any difference, so
provenance is never invented and an automated event always leads back to its cause.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.rows import RowRecord
from charter.core.timefmt import format_rfc3339
from charter.engine.records import AUTOMATION_ACTOR_ID

SCHEDULED_ACTION = "scheduled_action"
AUTO_ACTION = "auto_action"


@dataclass(frozen=True)
class ScheduledRow(RowRecord):
    """A row of scheduled_actions."""

    id: uuid.UUID
    schedule_id: str
    process_id: str
    workflow_path: str
    action_name: str
    action_data: JsonObject
    run_at: datetime
    not_before: datetime | None
    interval: str | None
    until_ts: datetime | None
    max_count: int | None
    fire_count: int
    status: str
    created_event_hash: str
    created_by_action: str
    created_by_actor: str
    created_at: datetime
    attempts: int
    occurrence_attempts: int  # attempts of the occurrence now due: the retry budget's count
    claimed_by: str | None
    lease_expires_at: datetime | None
    lease_token: uuid.UUID | None

    kind = SCHEDULED_ACTION

    @property
    def occurrence(self) -> datetime:
        return self.run_at

    def provenance(self, worker: str | None = None) -> JsonObject:
        return {
            "kind": SCHEDULED_ACTION,
            "schedule_id": self.schedule_id,
            "work_id": str(self.id),
            "scheduled_by_event_hash": self.created_event_hash,
            "scheduled_by_action": self.created_by_action,
            "scheduled_by_actor": self.created_by_actor,
            "scheduled_at": format_rfc3339(self.created_at),
            "run_at": format_rfc3339(self.run_at),
            "fired_by_actor": AUTOMATION_ACTOR_ID,
            "worker": worker if worker is not None else self.claimed_by,
        }


@dataclass(frozen=True)
class QueueRow(RowRecord):
    """A row of automation_queue."""

    id: uuid.UUID
    process_id: str
    workflow_path: str
    action_name: str
    action_data: JsonObject
    status: str
    reason: str
    available_state: str | None
    queued_by_event_hash: str
    queued_by_action: str
    queued_by_actor: str
    queued_at: datetime
    attempts: int
    claimed_by: str | None
    lease_expires_at: datetime | None
    lease_token: uuid.UUID | None
    cascade_depth: int  # automatic events in a row that led to this row
    cascade_origin_event_hash: str | None  # the event that began them (None: older rows)

    kind = AUTO_ACTION

    @property
    def occurrence(self) -> datetime:
        return self.queued_at

    @property
    def occurrence_attempts(self) -> int:
        return self.attempts  # a queue row is one occurrence

    def provenance(self, worker: str | None = None) -> JsonObject:
        return {
            "kind": AUTO_ACTION,
            "work_id": str(self.id),
            "queued_by_event_hash": self.queued_by_event_hash,
            "queued_by_action": self.queued_by_action,
            "queued_by_actor": self.queued_by_actor,
            "queued_at": format_rfc3339(self.queued_at),
            "available_state": self.available_state,
            "reason": self.reason,
            "fired_by_actor": AUTOMATION_ACTOR_ID,
            "worker": worker if worker is not None else self.claimed_by,
        }


WorkRow = ScheduledRow | QueueRow


def fired_input(row: WorkRow, worker: str | None = None) -> JsonObject:
    """The input of the event that fires `row`: its data plus meta.automation, naming
    `worker` (by default the worker the row is claimed by) as the one that fired it."""
    data = dict(row.action_data)
    meta = data.get("meta")
    provenance = row.provenance(worker)
    data["meta"] = {**(meta if isinstance(meta, dict) else {}), "automation": provenance}
    return data


def without_provenance(input_: JsonObject) -> JsonObject:
    """`input_` with meta.automation removed (and `meta` too if nothing else is in it)."""
    data = dict(input_)
    meta = data.get("meta")
    if isinstance(meta, dict) and "automation" in meta:
        rest: dict[str, JsonValue] = {k: v for k, v in meta.items() if k != "automation"}
        if rest:
            data["meta"] = rest
        else:
            del data["meta"]
    return data
