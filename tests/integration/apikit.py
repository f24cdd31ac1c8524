"""A harness for API tests: the app on a module's database, a fake clock, actors, tokens.

The app runs in-process (FastAPI's TestClient) against the real PostgreSQL of the test
module; time is a FakeClock injected into the engine, so envelopes' `at` stay in skew.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.auth.tokens import create_token
from charter.core.clock import Clock, FakeClock
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role, connect
from charter.engine import actors
from charter.engine.process_event import Engine
from charter.sdk import Client

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)
ERRANDS = "tests/errands"
OTHER = "tests/other"

# A small purpose-built workflow: a create with an input schema, a guarded transition,
# roles, and an update that runs from any state.
ERRANDS_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "approved", "closed"],
    "roles": ["clerk", "boss"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "input": {
                "type": "object",
                "required": ["amount"],
                "properties": {"amount": {"type": "integer"}},
            },
            "mutate": {"$set": {"amount": "{{ input.amount }}"}},
        },
        "approve": {"role": "boss", "from": "open", "to": "approved", "when": "amount < 100"},
        "close": {"role": "clerk", "from": "approved", "to": "closed"},
        "note": {"type": "update", "role": "clerk", "from": "*"},
    },
}
OTHER_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk"],
    "actions": {"create": {"type": "create", "role": "clerk", "to": "open"}},
}


def dumps(value: JsonValue) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Harness:
    database: Database
    clock: Clock
    engine: Engine
    http: TestClient
    admin: str
    keys: dict[str, SecretKey] = field(default_factory=dict)

    # --- setup ------------------------------------------------------------------------

    def token(self, *scopes: str, principal: str = "tester") -> str:
        with self.database.connection(Role.ENGINE) as conn, conn.transaction():
            return create_token(conn, scopes=scopes, name="test", principal=principal)

    def actor(self, actor_id: str, *roles: str) -> SecretKey:
        key = SecretKey.generate()
        with self.database.connection(Role.ENGINE) as conn, conn.transaction():
            actors.add_actor(conn, actor_id, key.public_key_hex, list(roles))
        self.keys[actor_id] = key
        return key

    def deploy(self, path: str, definition: JsonObject) -> None:
        with self.database.connection(Role.ENGINE) as conn, conn.transaction():
            self.engine.registry.deploy(conn, path, definition)

    def client(self, token: str | None = None) -> Client:
        return Client(str(self.http.base_url), token or self.admin, http=self.http)

    # --- events -----------------------------------------------------------------------

    def envelope(
        self,
        key: SecretKey,
        process: str,
        action: str,
        input_: JsonObject | None = None,
        *,
        prev: str | None = None,
        workflow: str = ERRANDS,
        at: datetime | None = None,
    ) -> Envelope:
        return Envelope(
            v=1,
            process=process,
            workflow=workflow,
            action=action,
            input=input_ or {},
            prev=prev,
            actor=key.public_key_hex,
            at=format_rfc3339(at or self.clock.now()),
        )

    def post(self, body: bytes | Submission, **kwargs: Any) -> httpx.Response:
        content = dumps(body.to_json()) if isinstance(body, Submission) else body
        response: httpx.Response = self.http.post("/v1/events", content=content, **kwargs)
        return response

    def accept(self, submission: Submission) -> JsonObject:
        response = self.post(submission)
        assert response.status_code == 201, response.text
        body: JsonObject = response.json()
        return body

    def open_process(self, amount: int = 5) -> tuple[str, str]:
        """A new errands process in state `open`: (id, head)."""
        process_id = new_id()
        clerk = self.keys["clerk"]
        body = self.accept(
            sign(self.envelope(clerk, process_id, "create", {"amount": amount}), clerk)
        )
        return process_id, str(body["hash"])

    # --- database state ---------------------------------------------------------------

    def governed_state(self) -> dict[str, list[str]]:
        """Every row of the governed tables as text: equal before and after means untouched."""
        tables = ("processes", "events", "scheduled_actions", "automation_queue")
        with connect(self.database.url) as conn:
            return {
                table: [
                    str(row[0])
                    for row in conn.execute(
                        f"SELECT to_jsonb(t)::text FROM charter.{table} t ORDER BY 1"
                    )
                ]
                for table in tables
            }

    def rejections(self, code: str) -> int:
        with connect(self.database.url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM charter.system_log WHERE kind = 'event.rejected' "
                "AND code = %s",
                (code,),
            ).fetchone()
        assert row is not None
        return int(str(row[0]))

    @contextmanager
    def only_logged(self, code: str) -> Iterator[None]:
        """The block must change no governed row and log exactly one rejection `code`."""
        before, logged = self.governed_state(), self.rejections(code)
        yield
        assert self.governed_state() == before
        assert self.rejections(code) == logged + 1


def new_id(prefix: str = "p") -> str:
    return f"{prefix}-{secrets.token_hex(5)}"


def make_harness(
    database: Database, *, settings: Settings | None = None, clock: Clock | None = None
) -> Harness:
    """An app on `database` (on a FakeClock unless given a clock), the errands workflows
    and two actors."""
    clock = clock or FakeClock(NOW)
    engine = Engine(database, clock=clock)
    app = create_app(database, engine=engine, settings=settings or Settings())
    http = TestClient(app)
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        admin = create_token(conn, scopes=["*"], name="admin", principal="admin")
    harness = Harness(database, clock, engine, http, admin)
    harness.deploy(ERRANDS, ERRANDS_DEFINITION)
    harness.deploy(OTHER, OTHER_DEFINITION)
    harness.actor("clerk", "clerk")
    harness.actor("boss", "boss")
    return harness
