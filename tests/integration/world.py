"""A small governed world for engine tests: a deployed workflow, actors with real keys,
an engine on a fake clock, and helpers that sign and submit like a client would."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from charter.automation.bookkeeping import Bookkeeping
from charter.automation.firing import Firer, FireResult
from charter.core.clock import FakeClock
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Accepted, Engine

ONBOARDING = "customer/retail/retail-customer"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "onboarding.json"


def onboarding_definition() -> JsonObject:
    value: JsonObject = json.loads(EXAMPLE.read_text())
    return value


@dataclass
class World:
    database: Database
    clock: FakeClock = field(
        default_factory=lambda: FakeClock(datetime(2026, 6, 18, 10, tzinfo=UTC))
    )
    keys: dict[str, SecretKey] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.engine = Engine(self.database, clock=self.clock)

    def firer(self, worker_id: str = "test-worker") -> Firer:
        return Firer(self.database, self.engine, self.keys["automation"], worker_id, self.clock)

    def fire_queued(
        self, process_id: str, action: str, worker_id: str = "test-worker"
    ) -> FireResult:
        """Claim the pending queue row of `action` on a process and fire it, as the worker does."""
        with self.database.connection(Role.WORKER) as conn, conn.transaction():
            work_id = conn.execute(
                "SELECT id FROM charter.automation_queue WHERE process_id = %s"
                " AND action_name = %s AND status = 'pending'",
                (process_id, action),
            ).fetchone()
            assert work_id is not None, f"no pending {action} for {process_id}"
            row = Bookkeeping(conn, worker_id).claim_queue_one(str(work_id[0]), lease_seconds=60)
        assert row is not None
        return self.firer(worker_id).fire(row)

    def deploy(self, path: str, definition: JsonValue) -> str:
        with self.database.connection(Role.ENGINE) as conn:
            deployment = self.engine.registry.deploy(conn, path, definition)
            conn.commit()
        return deployment.version

    def actor(self, actor_id: str, *roles: str) -> SecretKey:
        key = SecretKey.generate()
        with self.database.connection(Role.ENGINE) as conn:
            actors.add_actor(conn, actor_id, key.public_key_hex, list(roles))
            conn.commit()
        self.keys[actor_id] = key
        return key

    def envelope(
        self,
        who: str,
        action: str,
        process: str,
        prev: str | None,
        input_: JsonObject | None = None,
        workflow: str = ONBOARDING,
        at: datetime | None = None,
    ) -> Envelope:
        return Envelope(
            v=1,
            process=process,
            workflow=workflow,
            action=action,
            input=input_ or {},
            prev=prev,
            actor=self.keys[who].public_key_hex,
            at=format_rfc3339(at or self.clock.now()),
        )

    def signed(
        self, who: str, action: str, process: str, prev: str | None, **kw: Any
    ) -> Submission:
        return sign(self.envelope(who, action, process, prev, **kw), self.keys[who])

    def submit(self, who: str, action: str, process: str, prev: str | None, **kw: Any) -> Accepted:
        return self.engine.process_event(self.signed(who, action, process, prev, **kw))


def new_process_id() -> str:
    return f"p-{secrets.token_hex(5)}"


def table_snapshot(database: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the governed and work tables, as text, for before/after comparisons."""
    tables = [
        "processes",
        "events",
        "scheduled_actions",
        "automation_queue",
        "workflow_deployments",
        "workflow_definitions",
        "actors",
        "actor_keys",
    ]
    snapshot: dict[str, list[tuple[Any, ...]]] = {}
    with database.connection(Role.READER) as conn:
        for table in tables:
            rows = conn.execute(
                f"SELECT t::text FROM charter.{table} t ORDER BY t::text"
            ).fetchall()
            snapshot[table] = rows
    return snapshot
