"""The control API's records: an automation, its schedule and webhook triggers and its
plan, as rows read them; the API shows them as `charter.wire.automations` describes. A
webhook trigger never shows its secret: no record holds it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from charter import wire
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.rows import RowRecord
from charter.wire.automations import Automation, Plan, Schedule, Webhook


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
        return wire.to_json(self, Automation)


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
        return wire.to_json(self, Schedule)


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

    # The column is NOT NULL: every trigger has one, which no response reveals.
    has_secret = True

    def to_json(self) -> JsonObject:
        return wire.to_json(self, Webhook)


@dataclass(frozen=True)
class PlanRecord(RowRecord):
    automation_id: uuid.UUID
    version: int
    steps: list[JsonValue]
    allowlist: JsonValue
    limits: JsonValue
    updated_at: datetime

    def to_json(self) -> JsonObject:
        return wire.to_json(self, Plan)
