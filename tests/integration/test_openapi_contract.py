"""The OpenAPI document is the contract: schemathesis fuzzes every operation of the real
app on a real migrated database, with a token of each scope, and fails on any server
error, any status the document does not list and any answer that does not match its
schema (every built-in check is on).

Bounded and reproducible: a fixed seed, derandomized generation and a few examples per
operation, so the whole module runs in about a minute on a quiet 2-core machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from charter.api.app import create_app
from charter.core.config import Settings
from charter.core.envelope import sign
from charter.db.database import Database
from tests.integration.apikit import Harness, bearer, make_harness, new_id

SCOPES = (
    "*",
    "processes:read",
    "workflows:write",
    "actors:write",
    "automations:read",
    "automations:write",
    "runs:read",
    "runs:execute",
)
MAX_EXAMPLES = 4
SEED = 20261201
# Schema-valid requests the rules still refuse: a definition that is not a workflow, a
# cursor this API never issued, an unknown id (404), a taken name (409).
ACCEPTED_REFUSALS = ["2xx", "400", "401", "403", "404", "409", "422"]
# Answers forever (the live stream): its status and media type are checked below.
STREAMS = ("/v1/stream",)


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    """The app with something to read: a process, an automation with a plan, a run."""
    harness = make_harness(database)
    clerk = harness.keys["clerk"]
    harness.accept(sign(harness.envelope(clerk, new_id(), "create", {"amount": 3}), clerk))
    http, token = harness.http, bearer(harness.admin)
    created = http.post("/v1/automations", json={"name": "nightly", "target": "t1"}, headers=token)
    automation = created.json()["id"]
    plan = {"version": 1, "steps": [{"id": "s1", "actionId": "http.request", "input": {}}]}
    http.put(f"/v1/automations/{automation}/plan", json=plan, headers=token)
    http.post(f"/v1/automations/{automation}/runs", json={}, headers=token)
    yield harness
    harness.http.close()


def _document() -> dict[str, Any]:
    """The app's document, made without a database (routes never run to describe them)."""
    app = create_app(Database("postgresql://unused.invalid/charter"), settings=Settings())
    return app.openapi()


CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": SEED,
        "base-url": "http://testserver",
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
        "phases": {"stateful": {"enabled": False}},
        "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_REFUSALS}},
    }
)
contract = schemathesis.openapi.from_dict(_document(), config=CONFIG).exclude(path=list(STREAMS))


@pytest.fixture(scope="module", params=SCOPES)
def token(request: pytest.FixtureRequest, h: Harness) -> str:
    return h.token(request.param)


@contract.parametrize()
def test_every_answer_is_one_the_document_promises(case: Any, h: Harness, token: str) -> None:
    # The document was loaded before the app on this module's database existed: bind it
    # now, so the checks that send requests of their own (ignored_auth, ...) reach it too.
    case.operation.schema.app = case.operation.app = h.http.app
    case.call_and_validate(headers=bearer(token))


def test_the_stream_is_server_sent_events(h: Harness) -> None:
    with h.http.stream("GET", "/v1/stream", headers=bearer(h.admin)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
    document = h.http.get("/openapi.json").json()
    assert (
        "text/event-stream" in document["paths"]["/v1/stream"]["get"]["responses"]["200"]["content"]
    )
