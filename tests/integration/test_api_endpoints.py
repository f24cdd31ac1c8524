"""The engine endpoints of docs/api.md: shapes, workflows, actors, metrics, OpenAPI."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.auth.tokens import find_token
from charter.core.ed25519 import SecretKey, verify
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Database, Role, connect
from tests.integration.apikit import ERRANDS, Harness, bearer, dumps, make_harness, new_id

ROOT = Path(__file__).resolve().parents[2]
RFC3339_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ONBOARDING = "customer/retail/retail-customer"
SMALL_ORDER_KEY = "01" + "00" * 31  # the identity point: small order, refused

PARENT: JsonObject = {
    "dsl": 2,
    "states": ["open", "split"],
    "roles": ["clerk"],
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open"},
        "split": {
            "role": "clerk",
            "from": "open",
            "to": "split",
            "spawn": [
                {"workflow": "tests/child", "process": "{{ process.id }}.a", "action": "begin"},
                {"workflow": "tests/child", "process": "{{ process.id }}.b", "action": "begin"},
            ],
        },
    },
}
CHILD: JsonObject = {
    "dsl": 2,
    "states": ["new"],
    "roles": ["clerk"],
    "actions": {"begin": {"type": "create", "role": "clerk", "to": "new"}},
}
REMINDERS: JsonObject = {
    "dsl": 2,
    "states": ["open", "reminded"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "schedule": [{"id": "nudge", "action": "remind", "in": "1h", "data": {"n": 1}}],
        },
        "remind": {"role": "AUTOMATION", "from": "open", "to": "reminded"},
    },
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy("tests/parent", PARENT)
    harness.deploy("tests/child", CHILD)
    harness.deploy("tests/reminders", REMINDERS)
    harness.deploy(ONBOARDING, json.loads((ROOT / "examples" / "onboarding.json").read_text()))
    harness.actor("ada", "customer")
    yield harness
    harness.http.close()


def _get(h: Harness, path: str) -> dict[str, Any]:
    response = h.http.get(path, headers=bearer(h.admin))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- events and processes --------------------------------------------------------------


def test_post_event_answers_201_with_hash_seq_and_process(h: Harness) -> None:
    ada = h.keys["ada"]
    process_id = new_id("customer")
    opened = sign(h.envelope(ada, process_id, "open", {"name": "Ada"}, workflow=ONBOARDING), ada)
    response = h.post(opened)
    assert response.status_code == 201
    body = response.json()
    assert body["hash"] == opened.envelope.hash()
    assert body["seq"] == 1
    assert body["process"] == {
        "id": process_id,
        "workflow": ONBOARDING,
        "state": "draft",
        "data": {"name": "Ada"},
        "head": opened.envelope.hash(),
        "seq": 1,
        "parent": None,
        "created_at": "2026-06-18T10:00:00.000Z",
        "updated_at": "2026-06-18T10:00:00.000Z",
        "revision": 1,
    }
    assert _get(h, f"/v1/processes/{process_id}") == {**body["process"], "children": []}


def test_process_shows_its_children_and_children_their_parent(h: Harness) -> None:
    clerk = h.keys["clerk"]
    process_id = new_id()
    created = h.accept(
        sign(h.envelope(clerk, process_id, "create", workflow="tests/parent"), clerk)
    )
    h.accept(
        sign(
            h.envelope(
                clerk, process_id, "split", prev=str(created["hash"]), workflow="tests/parent"
            ),
            clerk,
        )
    )
    parent = _get(h, f"/v1/processes/{process_id}")
    assert parent["state"] == "split"
    assert parent["children"] == [f"{process_id}.a", f"{process_id}.b"]
    child = _get(h, f"/v1/processes/{process_id}.a")
    assert child["parent"] == process_id
    assert child["state"] == "new"
    genesis = _get(h, f"/v1/processes/{process_id}.a/events")["items"]
    assert isinstance(genesis, list)
    assert genesis[0]["kind"] == "spawn"
    assert genesis[0]["signature"] is None


def test_events_are_listed_in_seq_order_as_stored(h: Harness) -> None:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    note = sign(h.envelope(clerk, process_id, "note", {"text": "hello"}, prev=head), clerk)
    h.accept(note)
    events = _get(h, f"/v1/processes/{process_id}/events")["items"]
    assert isinstance(events, list)
    assert [e["seq"] for e in events] == [1, 2]
    second = events[1]
    assert set(second) >= {"seq", "hash", "envelope", "signature", "kind", "workflow_version"}
    assert second["envelope"] == note.envelope.to_json()
    assert second["signature"] == note.signature
    assert second["kind"] == "action"
    assert second["actor_id"] == "clerk"
    assert events[0]["hash"] == head
    assert second["envelope"]["prev"] == head


def test_automation_lists_scheduled_and_queued_work(h: Harness) -> None:
    clerk = h.keys["clerk"]
    process_id = new_id()
    h.accept(sign(h.envelope(clerk, process_id, "create", workflow="tests/reminders"), clerk))
    work = _get(h, f"/v1/processes/{process_id}/automation")
    assert work["queue"] == []
    scheduled = work["scheduled"]
    assert isinstance(scheduled, list)
    assert len(scheduled) == 1
    assert scheduled[0]["schedule_id"] == "nudge"
    assert scheduled[0]["action_name"] == "remind"
    assert scheduled[0]["status"] == "active"
    # Every timestamp in the one format of the API: RFC 3339, UTC, milliseconds.
    assert scheduled[0]["run_at"] == "2026-06-18T11:00:00.000Z"
    assert RFC3339_MS.fullmatch(str(scheduled[0]["created_at"]))

    ada = h.keys["ada"]
    customer = new_id("customer")
    opened = h.accept(
        sign(h.envelope(ada, customer, "open", {"name": "Ada"}, workflow=ONBOARDING), ada)
    )
    h.accept(
        sign(
            h.envelope(
                ada, customer, "submit_onboarding", prev=str(opened["hash"]), workflow=ONBOARDING
            ),
            ada,
        )
    )
    work = _get(h, f"/v1/processes/{customer}/automation")
    queue = work["queue"]
    assert isinstance(queue, list)
    assert [(row["action_name"], row["status"]) for row in queue] == [
        ("start_screening", "pending")
    ]
    assert RFC3339_MS.fullmatch(str(queue[0]["queued_at"]))
    for actor in _get(h, "/v1/actors")["items"]:
        assert RFC3339_MS.fullmatch(actor["created_at"])
    for workflow in _get(h, "/v1/workflows")["items"]:
        assert RFC3339_MS.fullmatch(workflow["deployed_at"])


@pytest.mark.parametrize("suffix", ["", "/events", "/automation", "/verify"])
def test_reads_of_an_unknown_process_are_404_unknown_process(h: Harness, suffix: str) -> None:
    response = h.http.get(f"/v1/processes/nobody-here{suffix}", headers=bearer(h.admin))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_process"


def test_verify_reports_an_intact_chain_and_a_tampered_head(h: Harness) -> None:
    process_id, head = h.open_process()
    clerk = h.keys["clerk"]
    h.accept(sign(h.envelope(clerk, process_id, "note", prev=head), clerk))
    for query in ("", "?replay=true", "?replay=false"):
        report = _get(h, f"/v1/processes/{process_id}/verify{query}")
        assert report == {"ok": True, "events": 2, "problems": []}
    with connect(h.database.url) as conn:
        # As a superuser with triggers off: exactly what verification exists to catch.
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            "UPDATE charter.processes SET head_hash = %s WHERE id = %s", (head, process_id)
        )
        conn.commit()
    report = _get(h, f"/v1/processes/{process_id}/verify")
    assert report["ok"] is False
    assert report["problems"]
    assert set(report["problems"][0]) == {"seq", "code", "message"}


def test_a_bad_query_parameter_is_400_malformed(h: Harness) -> None:
    process_id, _ = h.open_process()
    response = h.http.get(
        f"/v1/processes/{process_id}/verify?replay=maybe", headers=bearer(h.admin)
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "malformed"
    assert error["problems"][0]["location"] == "query/replay"


# --- workflows -------------------------------------------------------------------------


def test_deploy_list_and_show_workflows(h: Harness) -> None:
    token = h.token("workflows:write", "processes:read", principal="deployer")
    first = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/deployed", "definition": CHILD}),
        headers=bearer(token),
    )
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["path"] == "tests/deployed"
    assert body["revision"] == 1
    assert len(body["version"]) == 64
    assert body["deployed_by"] == "deployer"
    with h.database.connection(Role.ENGINE) as conn:
        deployer = find_token(conn, token)
    assert deployer is not None
    assert body["deployed_by_token"] == deployer.id
    changed: JsonObject = {
        **CHILD,
        "states": ["new", "old"],
        "actions": {
            "begin": {"type": "create", "role": "clerk", "to": "new"},
            "age": {"role": "clerk", "from": "new", "to": "old"},
        },
    }
    second = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/deployed", "definition": changed}),
        headers=bearer(token),
    ).json()
    assert second["revision"] == 2
    assert second["version"] != body["version"]
    assert second["unchanged"] is False

    # The same definition again changes nothing: the current revision, and 200.
    again = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/deployed", "definition": changed}),
        headers=bearer(h.token("workflows:write", principal="someone-else")),
    )
    assert again.status_code == 200, again.text
    assert again.json() | {"warnings": None} == second | {"unchanged": True, "warnings": None}
    # An older definition is a change: it deploys as the next revision.
    back = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/deployed", "definition": CHILD}),
        headers=bearer(token),
    )
    assert (back.status_code, back.json()["revision"]) == (201, 3)
    assert back.json()["version"] == body["version"]

    listed = h.http.get("/v1/workflows", headers=bearer(token)).json()["items"]
    current = {w["path"]: w for w in listed}
    assert current["tests/deployed"]["revision"] == 3
    assert current["tests/deployed"]["version"] == body["version"]
    assert ERRANDS in current

    shown = h.http.get("/v1/workflows/tests/deployed", headers=bearer(token)).json()
    assert shown["path"] == "tests/deployed"
    assert shown["version"] == body["version"]
    assert shown["definition"] == CHILD
    assert [r["revision"] for r in shown["revisions"]] == [3, 2, 1]
    assert shown["revisions"][1]["version"] == second["version"]


def test_an_invalid_workflow_is_422_with_every_problem(h: Harness) -> None:
    broken: JsonObject = {
        "dsl": 2,
        "states": ["a"],
        "roles": ["r"],
        "actions": {
            "make": {"type": "create", "role": "r", "to": "nowhere"},
            "go": {"role": "r", "from": "a", "to": "a", "when": "state = = 'a'"},
        },
    }
    response = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/broken", "definition": broken}),
        headers=bearer(h.admin),
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_workflow"
    assert error["message"]
    pointers = {p["pointer"] for p in error["problems"]}
    assert "/actions/make/to" in pointers
    assert "/actions/go/when" in pointers
    assert all(set(p) == {"pointer", "message"} for p in error["problems"])
    missing = h.http.get("/v1/workflows/tests/broken", headers=bearer(h.admin))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_workflow"


def test_deploy_answers_with_the_warnings_it_did_not_refuse(h: Harness) -> None:
    loop: JsonObject = {
        "dsl": 2,
        "states": ["a", "b"],
        "roles": ["clerk", "AUTOMATION"],
        "actions": {
            "begin": {"type": "create", "role": "clerk", "to": "a"},
            "flip": {"role": "AUTOMATION", "auto": True, "from": "a", "to": "b"},
            "flop": {"role": "AUTOMATION", "auto": True, "from": "b", "to": "a"},
        },
    }
    deployed = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/looping", "definition": loop}),
        headers=bearer(h.admin),
    )
    assert deployed.status_code == 201, deployed.text
    [warning] = deployed.json()["warnings"]
    assert warning["pointer"] == "/actions/flip/auto"
    assert "flip, flop" in warning["message"]
    quiet = h.http.post(
        "/v1/workflows",
        content=dumps({"path": "tests/quiet", "definition": CHILD}),
        headers=bearer(h.admin),
    )
    assert quiet.json()["warnings"] == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"path": "tests/x"}',
        b'{"path": "tests/x", "definition": {}, "extra": 1}',
        b'{"path": "tests/x", "path": "tests/y", "definition": {}}',
        b'{"path": 5, "definition": {}}',
        b'{"path": "../etc", "definition": {}}',
        b"not json",
    ],
)
def test_a_malformed_deploy_body_is_400(h: Harness, body: bytes) -> None:
    response = h.http.post("/v1/workflows", content=body, headers=bearer(h.admin))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "malformed"


# --- actors ----------------------------------------------------------------------------


def _add_actor(h: Harness, actor_id: str, public_key: str, roles: list[str]) -> dict[str, Any]:
    response = h.http.post(
        "/v1/actors",
        content=dumps({"id": actor_id, "public_key": public_key, "roles": list[JsonValue](roles)}),
        headers=bearer(h.admin),
    )
    body: dict[str, Any] = response.json()
    body["status"] = response.status_code
    return body


def test_register_and_list_actors(h: Harness) -> None:
    key = SecretKey.generate()
    added = _add_actor(h, "grace", key.public_key_hex, ["analyst", "manager"])
    assert added["status"] == 201
    assert added["id"] == "grace"
    assert added["roles"] == ["analyst", "manager"]
    assert added["public_key"] == key.public_key_hex
    listed = {a["id"]: a for a in _get(h, "/v1/actors")["items"]}
    assert listed["grace"]["public_key"] == key.public_key_hex
    again = _add_actor(h, "grace", SecretKey.generate().public_key_hex, ["analyst"])
    assert again["status"] == 409
    assert again["error"]["code"] == "duplicate"
    same_key = _add_actor(h, "grace2", key.public_key_hex, ["analyst"])
    assert same_key["status"] == 409


def test_only_the_automation_actor_may_hold_automation(h: Harness) -> None:
    refused = _add_actor(h, "mallory", SecretKey.generate().public_key_hex, ["AUTOMATION"])
    assert refused["status"] == 403
    assert refused["error"]["code"] == "forbidden"
    allowed = _add_actor(h, "automation", SecretKey.generate().public_key_hex, ["AUTOMATION"])
    assert allowed["status"] == 201


@pytest.mark.parametrize(
    "public_key", [SMALL_ORDER_KEY, "00" * 32, "ab" * 31, "AB" * 32, "not hex at all"]
)
def test_weak_or_malformed_keys_are_refused(h: Harness, public_key: str) -> None:
    refused = _add_actor(h, new_id("weak"), public_key, ["clerk"])
    assert refused["status"] == 422, refused
    assert refused["error"]["code"] == "invalid_public_key"


def test_rotation_retires_the_old_key_but_keeps_its_events_verifiable(h: Harness) -> None:
    old = SecretKey.generate()
    assert _add_actor(h, "rotor", old.public_key_hex, ["clerk"])["status"] == 201
    process_id = new_id()
    first = sign(h.envelope(old, process_id, "create", {"amount": 1}), old)
    h.accept(first)

    new = SecretKey.generate()
    rotated = h.http.post(
        "/v1/actors/rotor/keys",
        content=dumps({"public_key": new.public_key_hex}),
        headers=bearer(h.admin),
    )
    assert rotated.status_code == 200
    assert rotated.json()["public_key"] == new.public_key_hex
    assert rotated.json()["keys"] == 2

    late = h.post(sign(h.envelope(old, process_id, "note", prev=first.envelope.hash()), old))
    assert late.status_code == 403
    assert late.json()["error"]["code"] == "unknown_actor"
    h.accept(sign(h.envelope(new, process_id, "note", prev=first.envelope.hash()), new))

    events = _get(h, f"/v1/processes/{process_id}/events")["items"]
    assert isinstance(events, list)
    assert _get(h, f"/v1/processes/{process_id}/verify?replay=true") == {
        "ok": True,
        "events": 2,
        "problems": [],
    }
    signed_by_old = events[0]
    assert signed_by_old["envelope"]["actor"] == old.public_key_hex
    assert verify(old.public_key_hex, first.envelope.message(), signed_by_old["signature"])
    assert events[1]["envelope"]["actor"] == new.public_key_hex


def test_disable_and_enable_an_actor(h: Harness) -> None:
    key = SecretKey.generate()
    assert _add_actor(h, "pauser", key.public_key_hex, ["clerk"])["status"] == 201
    disabled = h.http.post("/v1/actors/pauser/disable", headers=bearer(h.admin))
    assert disabled.json()["disabled"] is True
    refused = h.post(sign(h.envelope(key, new_id(), "create", {"amount": 1}), key))
    assert refused.json()["error"]["code"] == "unknown_actor"
    enabled = h.http.post("/v1/actors/pauser/enable", headers=bearer(h.admin))
    assert enabled.json()["disabled"] is False
    h.accept(sign(h.envelope(key, new_id(), "create", {"amount": 1}), key))
    roles = h.http.post(
        "/v1/actors/pauser/roles", content=dumps({"roles": ["boss"]}), headers=bearer(h.admin)
    )
    assert roles.json()["roles"] == ["boss"]
    missing = h.http.post("/v1/actors/nobody/disable", headers=bearer(h.admin))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


# --- operations ------------------------------------------------------------------------


def test_metrics_count_accepted_and_rejected_events_and_requests(h: Harness) -> None:
    def sample(text: str, prefix: str) -> float:
        lines = [line for line in text.splitlines() if line.startswith(prefix + " ")]
        return float(lines[0].split()[-1]) if lines else 0.0

    before = h.http.get("/metrics").text
    process_id, _ = h.open_process()
    _get(h, f"/v1/processes/{process_id}")
    assert h.post(b"{").status_code == 400
    response = h.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    after = response.text
    accepted = "charter_events_accepted_total"
    rejected = 'charter_events_rejected_total{code="malformed"}'
    assert sample(after, accepted) == sample(before, accepted) + 1
    assert sample(after, rejected) == sample(before, rejected) + 1
    assert "charter_process_event_seconds_bucket" in after
    assert 'route="/v1/events"' in after
    # Requests are labelled by route template, never by the raw path with its ids.
    assert 'route="/v1/processes/{process_id}",status="200"' in after
    assert process_id not in after


def test_openapi_lists_the_engine_paths(h: Harness) -> None:
    spec = h.http.get("/openapi.json").json()
    paths = spec["paths"]
    for path, method in [
        ("/v1/events", "post"),
        ("/v1/processes/{process_id}", "get"),
        ("/v1/processes/{process_id}/events", "get"),
        ("/v1/processes/{process_id}/automation", "get"),
        ("/v1/processes/{process_id}/verify", "get"),
        ("/v1/workflows", "get"),
        ("/v1/workflows", "post"),
        ("/v1/workflows/{path}", "get"),
        ("/v1/actors", "get"),
        ("/v1/actors", "post"),
        ("/healthz", "get"),
        ("/metrics", "get"),
    ]:
        assert method in paths[path], path
    body = paths["/v1/events"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["envelope", "signature"]
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_unknown_routes_and_methods_answer_in_the_error_shape(h: Harness) -> None:
    missing = h.http.get("/v1/nothing")
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "not_found", "message": "no route GET /v1/nothing"}}
    wrong = h.http.delete("/v1/events")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"
    assert "POST" in wrong.headers["allow"]


def test_healthz_still_answers(h: Harness) -> None:
    body = h.http.get("/healthz").json()
    assert body["ok"] is True
    assert body["schema_version"] >= 6
