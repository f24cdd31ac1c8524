"""A small governed world for engine tests: a deployed workflow, actors with real keys,
an engine on a fake clock, and helpers that sign and submit like a client would."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from charter.core.clock import FakeClock
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Accepted, Engine
from charter.engine.work import ScheduledRow, WorkRow, fired_input
from charter.firing.batch import Firer
from charter.firing.bookkeeping import Bookkeeping
from charter.firing.outcomes import FireResult
from tests.conftest import create_database, drop_database, unique_name

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

    def claim_schedule(
        self,
        process_id: str,
        schedule_id: str,
        worker_id: str = "test-worker",
        lease_seconds: int = 60,
    ) -> ScheduledRow:
        """Claim the live row of a schedule id on a process at the fake now or, if it is not
        due yet, at its due time (claims only ever take due rows)."""
        with self.database.connection(Role.WORKER) as conn, conn.transaction():
            work_id = conn.execute(
                "SELECT id, coalesce(not_before, run_at) FROM charter.scheduled_actions"
                " WHERE process_id = %s AND schedule_id = %s AND status = 'active'",
                (process_id, schedule_id),
            ).fetchone()
            assert work_id is not None, f"no active {schedule_id} on {process_id}"
            due = work_id[1]
            assert isinstance(due, datetime)
            books = Bookkeeping(conn, worker_id, now=max(self.clock.now(), due))
            row = books.claim_scheduled_one(str(work_id[0]), lease_seconds=lease_seconds)
        assert row is not None
        return row

    def fired_submission(
        self,
        row: WorkRow,
        *,
        input_: dict[str, Any] | None = None,
        action: str | None = None,
        process: str | None = None,
    ) -> Submission:
        """What a worker submits for `row` (automation-signed, on the current head);
        `input_`, `action` and `process` override the honest values, for forgeries."""
        process_id = process or row.process_id
        with self.database.connection(Role.READER) as conn:
            head = conn.execute(
                "SELECT head_hash FROM charter.processes WHERE id = %s", (process_id,)
            ).fetchone()
        envelope = Envelope(
            v=1,
            process=process_id,
            workflow=row.workflow_path,
            action=action or row.action_name,
            input=fired_input(row) if input_ is None else input_,
            prev=str(head[0]) if head and head[0] is not None else None,
            actor=self.keys["automation"].public_key_hex,
            at=format_rfc3339(self.clock.now()),
        )
        return sign(envelope, self.keys["automation"])

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


@contextmanager
def scratch_database(admin_url: str, template: str) -> Iterator[Database]:
    """A migrated database of one test's own, for tests that claim every due row."""
    name = unique_name("charter_t_scratch")
    url = create_database(admin_url, name, template=template)
    try:
        with Database(url, max_size=4) as db:
            yield db
    finally:
        drop_database(admin_url, name)
