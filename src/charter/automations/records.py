"""The control API's records: an automation, its schedule and webhook triggers and its
plan, as rows read them and as the API shows them. A webhook trigger never shows its
secret: no record holds it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.rows import RowRecord
from charter.core.timefmt import format_rfc3339


@dataclass(frozen=True)
class AutomationRecord(RowRecord):
    id: uuid.UUID
    principal: str
    target: str
    name: str
    enabled: bool
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> JsonObject:
        return {
            "id": str(self.id),
            "principal": self.principal,
            "name": self.name,
            "target": self.target,
            "enabled": self.enabled,
            "created_at": format_rfc3339(self.created_at),
            "updated_at": format_rfc3339(self.updated_at),
        }


@dataclass(frozen=True)
class ScheduleRecord(RowRecord):
    id: uuid.UUID
    automation_id: uuid.UUID
    cron: str
    timezone: str
    next_run_at: datetime
    remaining_occurrences: int | None
    enabled: bool
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> JsonObject:
        return {
            "id": str(self.id),
            "automation_id": str(self.automation_id),
            "cron": self.cron,
            "timezone": self.timezone,
            "next_run_at": format_rfc3339(self.next_run_at),
            "remaining_occurrences": self.remaining_occurrences,
            "enabled": self.enabled,
            "created_at": format_rfc3339(self.created_at),
            "updated_at": format_rfc3339(self.updated_at),
        }


@dataclass(frozen=True)
class WebhookRecord(RowRecord):
    """A webhook trigger as the API shows it: never with its secret."""

    id: uuid.UUID
    automation_id: uuid.UUID
    source: str
    event: str | None
    enabled: bool
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> JsonObject:
        return {
            "id": str(self.id),
            "automation_id": str(self.automation_id),
            "source": self.source,
            "event": self.event,
            "enabled": self.enabled,
            # The column is NOT NULL: every trigger has one, which no response reveals.
            "has_secret": True,
            "created_at": format_rfc3339(self.created_at),
            "updated_at": format_rfc3339(self.updated_at),
        }


@dataclass(frozen=True)
class PlanRecord(RowRecord):
    automation_id: uuid.UUID
    version: int
    steps: list[JsonValue]
    allowlist: JsonValue
    limits: JsonValue
    updated_at: datetime

    def to_json(self) -> JsonObject:
        return {
            "automation_id": str(self.automation_id),
            "version": self.version,
            "steps": self.steps,
            "allowlist": self.allowlist,
            "limits": self.limits,
            "updated_at": format_rfc3339(self.updated_at),
        }
