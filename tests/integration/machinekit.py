"""A harness for machine tests: the API in-process on a FakeClock, automations with plans
admitted as runs, registered machines and DPoP-signed requests (sync and async)."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from psycopg.types.json import Jsonb

from charter.automations.dpop import make_proof, public_jwk
from charter.automations.ledger import RunRecord, StepRecord, admit_run, run_steps
from charter.core.clock import FakeClock
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Database, Role, connect
from charter.machine.client import MachineClient
from tests.integration.apikit import Harness, bearer, make_harness

ORIGIN = "http://testserver"


def fake(harness: Harness) -> FakeClock:
    """The harness's clock, which machine tests move by hand."""
    assert isinstance(harness.clock, FakeClock)
    return harness.clock


def machine_harness(database: Database) -> Harness:
    """An app whose public origin is the TestClient's, on a FakeClock."""
    return make_harness(database, settings=Settings(api_url=ORIGIN))


def plan(*steps: tuple[str, str] | tuple[str, str, JsonValue]) -> JsonObject:
    """A plan of (id, actionId[, input]) steps."""
    return {
        "version": 1,
        "steps": [
            {"id": s[0], "actionId": s[1], "input": s[2] if len(s) > 2 else {}} for s in steps
        ],
    }


THREE_STEPS = plan(
    ("one", "test.echo", {"n": 1}), ("two", "test.echo", {"n": 2}), ("three", "test.echo", {"n": 3})
)


def new_target() -> str:
    return f"t-{secrets.token_hex(4)}"


def create_automation(
    database: Database,
    *,
    target: str,
    principal: str = "alice",
    steps: JsonValue = None,
    allowlist: JsonValue = None,
    limits: JsonValue = None,
) -> uuid.UUID:
    """An automation with a plan, written as the owner (the control API is not under test)."""
    steps = steps if steps is not None else THREE_STEPS["steps"]
    with connect(database.url) as conn:
        row = conn.execute(
            "INSERT INTO charter.automations (principal, target, name) VALUES (%s, %s, 'test') "
            "RETURNING id",
            (principal, target),
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO charter.plans (automation_id, version, steps, allowlist, limits)"
            " VALUES (%s, 1, %s, %s, %s)",
            (row[0], Jsonb(steps), Jsonb(allowlist), Jsonb(limits)),
        )
        conn.commit()
    automation_id = row[0]
    assert isinstance(automation_id, uuid.UUID)
    return automation_id


def admit(
    database: Database,
    automation_id: uuid.UUID,
    harness: Harness | None = None,
    input: JsonValue = None,
) -> RunRecord:
    now = harness.clock.now_or_none() if harness else None
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        run = admit_run(
            conn, automation_id=automation_id, trigger_kind="manual", input=input, now=now
        )
    assert run is not None
    return run


def run_row(database: Database, run_id: uuid.UUID | str) -> dict[str, Any]:
    with connect(database.url) as conn:
        row = conn.execute(
            "SELECT to_jsonb(r) FROM charter.runs r WHERE id = %s", (str(run_id),)
        ).fetchone()
    assert row is not None
    value = row[0]
    assert isinstance(value, dict)
    return value


def journal(database: Database, run_id: uuid.UUID | str) -> dict[str, StepRecord]:
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        return {s.step_id: s for s in run_steps(conn, run_id)}


@dataclass
class Machine:
    """A registered machine and a sync DPoP-signing caller of the machine API."""

    harness: Harness
    id: str
    target: str
    key: SecretKey

    def client(
        self, http: httpx.AsyncClient, *, wait: float = 0.0, start: bool = True
    ) -> MachineClient:
        """A client of the in-process API; its claims answer at once unless `wait`, and
        journal the first step running unless not `start`."""
        return MachineClient(
            ORIGIN, self.key, now=self.harness.clock.now, http=http, wait=wait, start=start
        )

    def proof(self, method: str, path: str) -> str:
        return make_proof(self.key, method, ORIGIN + path, iat=self.harness.clock.now().timestamp())

    def post(
        self, path: str, body: JsonValue = None, *, proof: str | None = None
    ) -> httpx.Response:
        headers = {"DPoP": proof or self.proof("POST", path), "Content-Type": "application/json"}
        content = b"" if body is None else json.dumps(body).encode()
        response: httpx.Response = self.harness.http.post(path, content=content, headers=headers)
        return response

    def claim(self, **body: JsonValue) -> httpx.Response:
        return self.post("/v1/machine/runs/claim", body or None)

    def claimed(self) -> dict[str, Any]:
        response = self.claim()
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def step(self, run_id: str, step_id: str, verb: str, **body: JsonValue) -> httpx.Response:
        return self.post(f"/v1/machine/runs/{run_id}/steps/{step_id}/{verb}", body)

    def run(self, run_id: str, verb: str, **body: JsonValue) -> httpx.Response:
        return self.post(f"/v1/machine/runs/{run_id}/{verb}", body)


def register(
    harness: Harness,
    target: str,
    *,
    principal: str = "alice",
    machine_id: str | None = None,
    key: SecretKey | None = None,
) -> Machine:
    key = key or SecretKey.generate()
    token = harness.token("automations:write", principal=principal)
    chosen = machine_id or f"m-{secrets.token_hex(4)}"
    response = harness.http.post(
        "/v1/machines",
        json={"id": chosen, "target": target, "public_jwk": public_jwk(key)},
        headers=bearer(token),
    )
    assert response.status_code == 201, response.text
    return Machine(harness, chosen, target, key)


def asgi_client(harness: Harness) -> httpx.AsyncClient:
    """An async httpx client that calls the harness app in-process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=harness.http.app), base_url=ORIGIN)
