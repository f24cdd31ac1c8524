"""The OpenAPI document is the contract: schemathesis fuzzes every operation of the real
app on a real migrated database, with a token of each scope, and fails on any server
error, any status the document does not list and any answer that does not match its
schema (every built-in check is on).

Bounded and reproducible: a fixed seed, derandomized generation and a few examples per
operation, so the whole module runs in about a minute on a quiet 2-core machine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.openapi.checks import AllowHeaderMismatch

from charter.api.app import create_app
from charter.automations.webhooks import sign as webhook_signature
from charter.core.config import Settings
from charter.core.envelope import sign
from charter.db.database import Database, Role, connect
from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.sequencer import Sequencer
from tests.integration.apikit import ERRANDS, ERRANDS_DEFINITION, Harness, bearer, new_id
from tests.integration.machinekit import machine_harness, register

SCOPES = (
    "*",
    "processes:read",
    "workflows:write",
    "actors:write",
    "automations:read",
    "automations:write",
    "runs:read",
    "runs:execute",
    "log:read",
)
MAX_EXAMPLES = 4
SIGNER = Ed25519Signer.generate("charter.test/contract")
SALT = bytes(32)
SEED = 20261201
# Schema-valid requests the rules still refuse: a definition that is not a workflow, a
# cursor this API never issued, an unknown id (404), a taken name (409).
ACCEPTED_REFUSALS = ["2xx", "400", "401", "403", "404", "409", "422"]
# Answers forever (the live stream): its status and media type are checked below.
STREAMS = ("/v1/stream",)


@pytest.fixture(scope="module")
def h(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """The app (its public origin the test client's, so DPoP proofs verify) with a process
    to read, and a transparency log holding it (so the /v1/log/ routes answer)."""
    home = tmp_path_factory.mktemp("contract-log")
    settings = LogSettings(home / "log", home / "log.skey", home / "log.salt")
    harness = machine_harness(database)
    harness.http.app.state.log_settings = settings  # type: ignore[attr-defined]
    clerk = harness.keys["clerk"]
    harness.accept(sign(harness.envelope(clerk, new_id(), "create", {"amount": 3}), clerk))
    sequencer = _sequencer(harness, settings)
    with connect(database.url, Role.SEQUENCER) as conn:
        sequencer.tick(conn)
    sequencer.close()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CHARTER_LOG_DIR", str(settings.directory))  # where wait=log looks
        yield harness
    harness.http.close()


def _sequencer(h: Harness, settings: LogSettings) -> Sequencer:
    return Sequencer(h.database.url, LogDirectory(settings.directory), SIGNER, SALT, batch_ms=10)


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
    try:
        case.call_and_validate(headers=bearer(token))
    except FailureGroup as group:
        # `/v1/workflows/plan` is also the path of a workflow named `plan`, which GET
        # shows: a 405 there rightly allows GET, which the plan's operation does not list.
        overlap = case.operation.path == "/v1/workflows/plan"
        if not (overlap and all(isinstance(f, AllowHeaderMismatch) for f in group.exceptions)):
            raise


class Seeded:
    """Calls of real things through the document's operations: each answer must be the
    success the document promises, in its schema (fuzzing mostly meets unknown ids)."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    def call(
        self,
        method: str,
        path: str,
        status: int = 200,
        *,
        headers: dict[str, str] | None = None,
        **parts: Any,
    ) -> Any:
        operation = contract[path][method]
        operation.app = operation.schema.app = self.h.http.app
        case = operation.Case(headers=headers or bearer(self.h.admin), **parts)
        response = case.call_and_validate()
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    def call_raw(self, route: str, query: dict[str, Any] | None = None, **parameters: str) -> bytes:
        """A GET answering text or bytes (the log routes), checked like the others."""
        operation = contract[route]["GET"]
        operation.app = operation.schema.app = self.h.http.app
        case = operation.Case(headers=bearer(self.h.admin), path_parameters=parameters, query=query)
        response = case.call_and_validate()
        assert response.status_code == 200, response.text
        return bytes(response.content)


def _logged(h: Harness, call: Callable[[], Any]) -> Any:
    """`call`, with the log's sequencer running meanwhile (for a wait=log receipt)."""
    sequencer = _sequencer(h, h.http.app.state.log_settings)  # type: ignore[attr-defined]
    stop = threading.Event()
    thread = threading.Thread(target=sequencer.run, args=(stop,))
    thread.start()
    try:
        return call()
    finally:
        stop.set()
        thread.join()


def test_success_answers_of_real_things_match_their_schemas(h: Harness) -> None:
    api = Seeded(h)
    process = new_id()
    clerk = h.keys["clerk"]
    submission = sign(h.envelope(clerk, process, "create", {"amount": 4}), clerk)
    accepted = _logged(h, lambda: api.call("POST", "/v1/events", 201, body=submission.to_json(),
                                           query={"wait": "log", "timeout": 20}))  # fmt: skip
    assert accepted["log"] is not None, "no receipt within the timeout"
    ids = {"process_id": process}
    for suffix in ("", "/verify", "/automation", "/export"):
        api.call("GET", "/v1/processes/{process_id}" + suffix, path_parameters=ids)
    _listed(api.call("GET", "/v1/processes/{process_id}/events", path_parameters=ids), "events")
    bundle = api.call("GET", "/v1/processes/{process_id}/export", path_parameters=ids)
    assert (bundle["format"], bundle["log"]["seq"]) == ("charter-export/2", 1)
    proof = api.call_raw("/v1/log/proof/{event_hash}", event_hash=accepted["hash"])
    assert proof.decode() == accepted["log"]["proof"]
    checkpoint = api.call_raw("/v1/log/checkpoint").decode()
    size = int(checkpoint.split("\n")[1])
    assert len(api.call_raw("/v1/log/tile/{path}", path=f"0/000.p/{size}")) == 32 * size
    assert api.call_raw("/v1/log/tile/{path}", path=f"entries/000.p/{size}")
    api.call_raw("/v1/log/consistency", query={"from": 1, "to": size})
    status = api.call("GET", "/v1/log/status")
    assert (status["size"], status["pending"]) == (size, 0)
    api.call("GET", "/v1/stats")
    for path, legacy in (("/v1/processes", "processes"), ("/v1/workflows", "workflows"),
                         ("/v1/actors", "actors")):  # fmt: skip
        _listed(api.call("GET", path), legacy)
    for path, legacy in (
        ("/v1/automation/scheduled", "scheduled"),
        ("/v1/automation/queue", "queue"),
    ):
        _listed(api.call("GET", path), legacy, filled=False)  # maybe empty: errands set no timers
    api.call("GET", "/v1/workflows/{path}", path_parameters={"path": ERRANDS})
    _listed(api.call("GET", "/v1/workflows/{path}/states", path_parameters={"path": ERRANDS}))
    deploy = {"path": ERRANDS, "definition": ERRANDS_DEFINITION}
    api.call("POST", "/v1/workflows", 200, body=deploy)  # unchanged
    api.call("GET", "/v1/actors/{actor_id}", path_parameters={"actor_id": "clerk"})
    api.call("POST", "/v1/actors/{actor_id}/roles", path_parameters={"actor_id": "boss"},
             body={"roles": ["boss"]})  # fmt: skip

    target = f"t-{process}"
    made = api.call("POST", "/v1/automations", 201, body={"name": target, "target": target})
    one = {"automation_id": made["id"]}
    plan = {"version": 1, "steps": [{"id": "s1", "actionId": "test.echo", "input": {}}]}
    api.call("PUT", "/v1/automations/{automation_id}/plan", path_parameters=one, body=plan)
    schedule = {"cron": "0 9 * * *", "timezone": "UTC"}
    api.call("POST", "/v1/automations/{automation_id}/schedules", 201, path_parameters=one,
             body=schedule)  # fmt: skip
    hook = api.call("POST", "/v1/automations/{automation_id}/webhooks", 201,
                    path_parameters=one, body={"source": "shop"})  # fmt: skip
    for path in ("", "/plan"):
        api.call("GET", "/v1/automations/{automation_id}" + path, path_parameters=one)
    for path in ("/schedules", "/webhooks"):
        _listed(api.call("GET", "/v1/automations/{automation_id}" + path, path_parameters=one))
    _listed(api.call("GET", "/v1/automations"))
    run = api.call("POST", "/v1/automations/{automation_id}/runs", 201, path_parameters=one,
                   body={"input": {"n": 1}})  # fmt: skip
    delivery = {"source": "shop", "type": "order.paid"}
    stamp = int(h.clock.now().timestamp())
    signature = webhook_signature(hook["secret"], "msg_1", stamp, json.dumps(delivery).encode())
    routed = {"X-Charter-Principal": "admin", "X-Charter-Target": target, "webhook-id": "msg_1",
              "webhook-timestamp": str(stamp), "webhook-signature": signature}  # fmt: skip
    admitted = api.call("POST", "/events", 202, headers=routed, body=delivery)
    assert len(admitted["runs"]) == 1
    _listed(api.call("GET", "/v1/runs"))
    api.call("GET", "/v1/runs/{run_id}", path_parameters={"run_id": run["id"]})

    machine = register(h, target, principal="admin")
    _listed(api.call("GET", "/v1/machines"), "machines")

    def dpop(path: str) -> dict[str, str]:
        return {"DPoP": machine.proof("POST", path)}

    claim_path = "/v1/machine/runs/claim"
    claimed = api.call("POST", claim_path, headers=dpop(claim_path), body={})
    lease, run_id = claimed["lease"]["token"], claimed["run"]["id"]
    step = {"run_id": run_id, "step_id": "s1"}
    for verb, body in (("start", {"token": lease}), ("complete", {"token": lease, "output": 1})):
        concrete = f"/v1/machine/runs/{run_id}/steps/s1/{verb}"
        api.call("POST", "/v1/machine/runs/{run_id}/steps/{step_id}/" + verb,
                 headers=dpop(concrete), path_parameters=step, body=body)  # fmt: skip
    done = f"/v1/machine/runs/{run_id}/complete"
    finish = {"token": lease, "output": {"ok": True}}
    api.call("POST", "/v1/machine/runs/{run_id}/complete", headers=dpop(done),
             path_parameters={"run_id": run_id}, body=finish)  # fmt: skip


def _listed(body: Any, legacy: str | None = None, *, filled: bool = True) -> None:
    """A list answer is the one envelope; a list that had a key of its own still has it,
    holding the same list, for one release."""
    assert isinstance(body["items"], list), body
    assert "next_cursor" in body, body
    if filled:
        assert body["items"], body  # the seeded calls above put something there
    if legacy is not None:
        assert body[legacy] == body["items"], body


def test_the_stream_is_server_sent_events(h: Harness) -> None:
    with h.http.stream("GET", "/v1/stream", headers=bearer(h.admin)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
    document = h.http.get("/openapi.json").json()
    assert (
        "text/event-stream" in document["paths"]["/v1/stream"]["get"]["responses"]["200"]["content"]
    )
