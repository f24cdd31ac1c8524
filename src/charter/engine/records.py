"""What the engine reads and returns: frozen views of processes, events and actors."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from charter import wire
from charter.core.jsontypes import JsonObject, JsonValue
from charter.wire import engine as shapes

AUTOMATION_ACTOR_ID = "automation"
AUTOMATION_ROLE = "AUTOMATION"


@dataclass(frozen=True)
class ActorContext:
    """The signing key's actor as the engine saw it when deciding."""

    id: str
    public_key: str
    roles: tuple[str, ...]

    @property
    def is_automation(self) -> bool:
        return self.id == AUTOMATION_ACTOR_ID

    def to_scope(self) -> dict[str, JsonValue]:
        return {"id": self.id, "public_key": self.public_key, "roles": list(self.roles)}


@dataclass(frozen=True)
class ProcessView:
    """A process row: its state, data and head."""

    id: str
    workflow: str
    state: str
    data: JsonObject
    head: str | None
    seq: int
    parent: str | None = None
    parent_event: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    revision: int | None = None  # of the workflow, under which its last event was decided

    @property
    def document(self) -> JsonObject:
        """The process document conditions read: the data plus `state`."""
        return {**self.data, "state": self.state}

    def to_json(self) -> JsonObject:
        """The `<process>` shape of docs/wire-format.md"""
        return wire.to_json(self, shapes.Process)


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored, exported and verified (docs/wire-format.md)."""

    process_id: str
    seq: int
    hash: str
    envelope_text: str  # the exact canonical bytes that were hashed and signed
    envelope: JsonObject
    signature: str | None
    kind: str  # "action" | "spawn"
    workflow_version: str
    received_at: datetime | None
    actor_id: str
    actor_roles: tuple[str, ...]
    workflow_revision: int | None = None  # None in a bundle exported before revisions

    def to_json(self) -> JsonObject:
        return wire.to_json(self, shapes.Event)
