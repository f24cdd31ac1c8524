"""The machine API over HTTP: registration, DPoP, claims, leases and the step journal.

The rules of docs/machines.md each have a named test here (the executor's
side of them is in test_executor.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.automations.dpop import public_jwk
from charter.automations.journal import idempotency_key
from charter.automations.leases import MAX_RETRY_DELAY_SECONDS
from charter.core.clock import FakeClock
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonValue
from charter.core.timefmt import parse_rfc3339
from charter.db.database import Database, connect
from charter.engine.process_event import Engine
from charter.machine.client import MachineClient
from tests.integration.apikit import Harness, bearer
from tests.integration.machinekit import (
    ORIGIN,
    Machine,
    admit,
    create_automation,
    fake,
    journal,
    machine_harness,
    new_target,
    register,
    run_row,
)
from tests.integration.world import table_snapshot


@pytest.fixture(scope="module")
def harness(database: Database) -> Harness:
    return machine_harness(database)


def setup_run(harness: Harness, *, principal: str = "alice") -> tuple[Machine, str]:
    """A fresh target with one machine and one admitted three-step run."""
    target = new_target()
    machine = register(harness, target, principal=principal)
    run = admit(
        harness.database,
        create_automation(harness.database, target=target, principal=principal),
        harness,
    )
    return machine, str(run.id)


def lease_of(claim: Mapping[str, Any]) -> str:
    lease = claim["lease"]
    assert isinstance(lease, dict)
    return str(lease["token"])


def error_code(response: httpx.Response) -> str:
    code = response.json()["error"]["code"]
    assert isinstance(code, str)
    return code


# --- registration ----------------------------------------------------------------------


def test_registration_binds_the_key_to_the_token_principal(harness: Harness) -> None:
    key = SecretKey.generate()
    token = harness.token("automations:write", principal="bob")
    response = harness.http.post(
        "/v1/machines",
        json={"id": "bob-laptop", "target": "laptop", "public_jwk": public_jwk(key)},
        headers=bearer(token),
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["principal"] == "bob"
    assert body["target"] == "laptop"
    assert len(body["thumbprint"]) == 43
    # The same key or id twice is a conflict.
    again = harness.http.post(
        "/v1/machines",
        json={"target": "laptop", "public_jwk": public_jwk(key)},
        headers=bearer(token),
    )
    assert again.status_code == 409
    listed = harness.http.get(
        "/v1/machines", headers=bearer(harness.token("automations:read", principal="bob"))
    )
    assert [m["id"] for m in listed.json()["items"]] == ["bob-laptop"]


def test_registration_needs_the_scope_and_a_star_token_for_another_principal(
    harness: Harness,
) -> None:
    body = {"target": "x", "public_jwk": public_jwk(SecretKey.generate())}
    assert harness.http.post("/v1/machines", json=body).status_code == 401
    reader = harness.token("automations:read")
    assert harness.http.post("/v1/machines", json=body, headers=bearer(reader)).status_code == 403
    writer = harness.token("automations:write", principal="carol")
    other = {**body, "principal": "dave"}
    assert harness.http.post("/v1/machines", json=other, headers=bearer(writer)).status_code == 403
    admin = harness.http.post("/v1/machines", json=other, headers=bearer(harness.admin))
    assert admin.status_code == 201
    assert admin.json()["principal"] == "dave"


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "OKP", "crv": "Ed25519"},
        {"kty": "OKP", "crv": "Ed25519", "x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
        {"kty": "RSA", "n": "x", "e": "AQAB"},
        "not a jwk",
    ],
)
def test_registration_refuses_unusable_keys(harness: Harness, jwk: object) -> None:
    response = harness.http.post(
        "/v1/machines", json={"target": "x", "public_jwk": jwk}, headers=bearer(harness.admin)
    )
    assert response.status_code == 400
    assert error_code(response) == "malformed"


# --- DPoP over HTTP --------------------------------------------------------------------


def test_a_machine_request_without_dpop_is_refused(harness: Harness) -> None:
    response = harness.http.post("/v1/machine/runs/claim")
    assert response.status_code == 401
    assert error_code(response) == "invalid_dpop"


def test_two_dpop_headers_are_refused(harness: Harness) -> None:
    machine = register(harness, new_target())
    proof = machine.proof("POST", "/v1/machine/runs/claim")
    response = harness.http.post(
        "/v1/machine/runs/claim",
        headers=[("DPoP", proof), ("DPoP", machine.proof("POST", "/v1/machine/runs/claim"))],
    )
    assert response.status_code == 401
    assert error_code(response) == "invalid_dpop"


def test_a_replayed_proof_is_refused_and_its_jti_is_stored(harness: Harness) -> None:
    machine = register(harness, new_target())
    proof = machine.proof("POST", "/v1/machine/runs/claim")
    assert machine.claim().status_code == 204
    assert machine.post("/v1/machine/runs/claim", proof=proof).status_code == 204
    replay = machine.post("/v1/machine/runs/claim", proof=proof)
    assert replay.status_code == 401
    assert "replay" in replay.json()["error"]["message"]
    with connect(harness.database.url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM charter.dpop_proofs WHERE machine_id = %s", (machine.id,)
        ).fetchone()
    assert row is not None
    assert row[0] == 2


def test_a_proof_is_spent_even_when_its_request_fails(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    path = f"/v1/machine/runs/{run_id}/lease"
    proof = machine.proof("POST", path)
    body: dict[str, JsonValue] = {"token": "00000000-0000-4000-8000-000000000000"}
    refused = machine.post(path, body, proof=proof)
    assert refused.status_code == 409  # the work failed and rolled back...
    token = lease_of(machine.claimed())
    replay = machine.post(path, {"token": token}, proof=proof)
    assert replay.status_code == 401  # ...but the proof was spent all the same
    assert "replay" in replay.json()["error"]["message"]


def test_a_proof_for_another_origin_or_path_is_refused(harness: Harness) -> None:
    machine = register(harness, new_target())
    for_other_path = machine.proof("POST", "/v1/machine/runs/other")
    assert machine.post("/v1/machine/runs/claim", proof=for_other_path).status_code == 401
    # Behind a proxy the service compares htu with its public origin (CHARTER_API_URL),
    # not with the Host the proxy forwards.
    behind = TestClient(
        create_app(
            harness.database,
            engine=harness.engine,
            settings=Settings(api_url="https://automations.example"),
        )
    )
    direct = machine.proof("POST", "/v1/machine/runs/claim")
    response = behind.post("/v1/machine/runs/claim", headers={"DPoP": direct})
    assert response.status_code == 401
    assert "not this request's URL" in response.json()["error"]["message"]
    public = MachineClient("https://automations.example", machine.key, now=harness.clock.now)
    proof = public.proof("POST", "/v1/machine/runs/claim")
    assert behind.post("/v1/machine/runs/claim", headers={"DPoP": proof}).status_code == 204


def test_a_stale_proof_is_refused(harness: Harness) -> None:
    machine = register(harness, new_target())
    proof = machine.proof("POST", "/v1/machine/runs/claim")
    fake(harness).advance(61)
    response = machine.post("/v1/machine/runs/claim", proof=proof)
    assert response.status_code == 401
    assert "iat" in response.json()["error"]["message"]


def test_a_disabled_machine_is_refused_until_enabled(harness: Harness) -> None:
    machine = register(harness, new_target())
    token = harness.token("automations:write", principal="alice")
    disabled = harness.http.post(f"/v1/machines/{machine.id}/disable", headers=bearer(token))
    assert disabled.status_code == 200
    assert disabled.json()["disabled_at"] is not None
    assert machine.claim().status_code == 401
    harness.http.post(f"/v1/machines/{machine.id}/enable", headers=bearer(token))
    assert machine.claim().status_code == 204


def test_another_principals_machine_cannot_be_disabled(harness: Harness) -> None:
    machine = register(harness, new_target(), principal="erin")
    other = harness.token("automations:write", principal="frank")
    response = harness.http.post(f"/v1/machines/{machine.id}/disable", headers=bearer(other))
    assert response.status_code == 404


def test_the_list_says_when_each_machine_was_seen_and_what_it_runs(harness: Harness) -> None:
    """`last_seen_at` is the latest remembered proof, `runs_in_progress` the runs it holds
    a lease on; `can_change` tells a client whether to offer Disable and Enable."""
    principal = "grace"
    busy = register(harness, new_target(), principal=principal)
    idle = register(harness, new_target(), principal=principal)
    automation = create_automation(harness.database, target=busy.target, principal=principal)
    admit(harness.database, automation, harness)
    busy.claimed()

    def listed(token: str) -> dict[str, Any]:
        response = harness.http.get("/v1/machines", headers=bearer(token))
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    reader = listed(harness.token("automations:read", principal=principal))
    machines = {m["id"]: m for m in reader["items"]}
    assert parse_rfc3339(machines[busy.id]["last_seen_at"]) == harness.clock.now()
    assert machines[busy.id]["runs_in_progress"] == 1
    assert machines[idle.id]["last_seen_at"] is None
    assert machines[idle.id]["runs_in_progress"] == 0
    assert reader["can_change"] is False
    writer = harness.token("automations:read", "automations:write", principal=principal)
    assert listed(writer)["can_change"] is True


def test_expired_proofs_are_pruned(harness: Harness) -> None:
    machine = register(harness, new_target())
    past = harness.clock.now() - timedelta(days=1)
    with connect(harness.database.url) as conn:
        conn.execute(
            "INSERT INTO charter.dpop_proofs (jti, machine_id, expires_at) VALUES (%s, %s, %s)",
            ("expired-jti-0123456789", machine.id, past),
        )
        conn.commit()
    assert machine.claim().status_code == 204
    with connect(harness.database.url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM charter.dpop_proofs WHERE jti = 'expired-jti-0123456789'"
        ).fetchone()
    assert row is not None
    assert row[0] == 0


# --- claims ----------------------------------------------------------------------------


def test_claim_answers_204_when_there_is_no_run(harness: Harness) -> None:
    assert register(harness, new_target()).claim().status_code == 204


def test_claim_returns_the_snapshot_the_lease_and_the_journal(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    claim = machine.claimed()
    run = claim["run"]
    assert isinstance(run, dict)
    assert run["id"] == run_id
    assert run["status"] == "running"
    assert run["attempts"] == 1
    assert run["lease_owner"] == machine.id
    assert [s["id"] for s in run["plan"]["steps"]] == ["one", "two", "three"]
    lease = claim["lease"]
    assert isinstance(lease, dict)
    assert parse_rfc3339(str(lease["expires_at"])) == harness.clock.now() + timedelta(seconds=30)
    assert claim["journal"] == []
    assert machine.claim().status_code == 204  # claimed once


def test_claims_take_the_oldest_run_first(harness: Harness) -> None:
    target = new_target()
    machine = register(harness, target)
    automation = create_automation(harness.database, target=target)
    first = admit(harness.database, automation, harness)
    fake(harness).advance(1)
    second = admit(harness.database, automation, harness)
    assert machine.claimed()["run"]["id"] == str(first.id)
    assert machine.claimed()["run"]["id"] == str(second.id)


def test_racing_machines_claim_each_run_once(harness: Harness) -> None:
    target = new_target()
    machines = [register(harness, target) for _ in range(4)]
    automation = create_automation(harness.database, target=target)
    runs = {str(admit(harness.database, automation, harness).id) for _ in range(6)}
    claimed: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(machines))

    def work(machine: Machine) -> None:
        barrier.wait()
        while (response := machine.claim()).status_code == 200:
            with lock:
                claimed.append(response.json()["run"]["id"])

    threads = [threading.Thread(target=work, args=(m,)) for m in machines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == sorted(runs)


def test_an_expired_lease_is_taken_over_and_resumes_with_its_journal(harness: Harness) -> None:
    first, run_id = setup_run(harness)
    second = register(harness, first.target)
    token = lease_of(first.claimed())
    assert first.step(run_id, "one", "start", token=token).status_code == 200
    assert first.step(run_id, "one", "complete", token=token, output={"ok": 1}).status_code == 200
    assert second.claim().status_code == 204  # the lease still holds
    fake(harness).advance(31)
    taken = second.claimed()
    run = taken["run"]
    assert isinstance(run, dict)
    assert run["id"] == run_id
    assert run["attempts"] == 2
    assert run["lease_owner"] == second.id
    entries = taken["journal"]
    assert isinstance(entries, list)
    assert [(e["step_id"], e["status"], e["output"]) for e in entries] == [
        ("one", "completed", {"ok": 1})
    ]
    # The first machine's lease is gone: nothing it sends advances the run.
    response = first.step(run_id, "two", "start", token=token)
    assert response.status_code == 409
    assert error_code(response) == "lease_lost"


def test_a_claim_with_start_journals_the_first_step_running(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    claim = machine.claim(start=True)
    assert claim.status_code == 200, claim.text
    body = claim.json()
    started = body["started"]
    assert (started["step_id"], started["status"], started["attempts"]) == ("one", "running", 1)
    assert started["idempotency_key"] == idempotency_key(run_id, "one")
    assert body["journal"] == [started]  # the journal as the claim's transaction left it
    # What `steps/one/start` would have done: the machine goes straight to completing it.
    token = lease_of(body)
    done = machine.step(run_id, "one", "complete", token=token, output={"ok": 1}, next="two")
    assert done.status_code == 200, done.text
    assert done.json()["next"]["attempts"] == 1


def test_a_taken_over_claim_with_start_resumes_at_the_first_incomplete_step(
    harness: Harness,
) -> None:
    first, run_id = setup_run(harness)
    second = register(harness, first.target)
    token = lease_of(first.claimed())
    assert first.step(run_id, "one", "start", token=token).status_code == 200
    assert first.step(run_id, "one", "complete", token=token, output={}, next="two").is_success
    fake(harness).advance(31)  # the first machine died during step two
    taken = second.claim(start=True).json()
    started = taken["started"]
    assert (started["step_id"], started["status"], started["attempts"]) == ("two", "running", 2)
    assert [(e["step_id"], e["status"]) for e in taken["journal"]] == [
        ("one", "completed"),
        ("two", "running"),
    ]


def test_start_is_answered_null_without_it_and_must_be_a_boolean(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    refused = machine.claim(start="yes")
    assert refused.status_code == 400
    assert error_code(refused) == "malformed"
    assert journal(harness.database, run_id) == {}  # nothing claimed, nothing started
    assert machine.claimed()["started"] is None
    assert journal(harness.database, run_id) == {}


def test_a_completion_claims_the_next_run_with_its_first_step_started(harness: Harness) -> None:
    machine, first = setup_run(harness)
    automation = run_row(harness.database, first)["automation_id"]
    fake(harness).advance(0.001)  # the claim order is the admission order
    second = str(admit(harness.database, automation, harness).id)
    token = lease_of(machine.claim(start=True).json())
    for step, following in (("one", "two"), ("two", "three")):
        assert machine.step(
            first, step, "complete", token=token, output={}, next=following
        ).is_success
    finished = machine.run(
        first, "complete", token=token, output={}, step="three", claim={"start": True}
    )
    assert finished.status_code == 200, finished.text
    handed = finished.json()["claim"]
    assert handed["run"]["id"] == second
    assert handed["started"]["step_id"] == "one"
    assert journal(harness.database, second)["one"].status == "running"
    held = lease_of(handed)
    bad = machine.run(second, "complete", token=held, output={}, step="one", claim={"start": 1})
    assert bad.status_code == 400
    assert error_code(bad) == "malformed"
    assert "start must be true or false" in bad.json()["error"]["message"]
    assert journal(harness.database, second)["one"].status == "running"  # nothing changed


# --- leases ----------------------------------------------------------------------------


def test_renewal_extends_a_current_lease_and_fails_once_it_is_lost(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    fake(harness).advance(20)
    renewed = machine.run(run_id, "lease", token=token, lease_seconds=45)
    assert renewed.status_code == 200
    assert parse_rfc3339(renewed.json()["expires_at"]) == harness.clock.now() + timedelta(
        seconds=45
    )
    fake(harness).advance(46)
    expired = machine.run(run_id, "lease", token=token)
    assert expired.status_code == 409
    assert error_code(expired) == "lease_lost"


def test_renewal_with_a_wrong_token_or_by_another_machine_is_refused(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    other = register(harness, machine.target)
    assert (
        machine.run(run_id, "lease", token="00000000-0000-4000-8000-000000000000").status_code
        == 409
    )
    assert other.run(run_id, "lease", token=token).status_code == 409
    assert machine.run(run_id, "lease", token="not-a-token").status_code == 400
    assert machine.run(run_id, "lease", token=token, lease_seconds=100000).status_code == 400


# --- the rules ------------------------------------------------------------------------


def test_rule_1_a_run_keeps_the_plan_snapshot_it_was_admitted_with(harness: Harness) -> None:
    target = new_target()
    machine = register(harness, target)
    automation = create_automation(harness.database, target=target)
    run = admit(harness.database, automation, harness)
    with connect(harness.database.url) as conn:
        conn.execute(
            "UPDATE charter.plans SET steps = %s::jsonb WHERE automation_id = %s",
            ('[{"id": "new", "actionId": "test.echo", "input": {}}]', automation),
        )
        conn.commit()
        with pytest.raises(psycopg.Error, match="immutable"):
            conn.execute("UPDATE charter.runs SET plan = '{}'::jsonb WHERE id = %s", (run.id,))
        conn.rollback()
    claimed = machine.claimed()["run"]
    assert isinstance(claimed, dict)
    assert [s["id"] for s in claimed["plan"]["steps"]] == ["one", "two", "three"]
    # A step of the automation's current plan is not a step of this run.
    token = run_row(harness.database, run.id)["lease_token"]
    response = machine.step(str(run.id), "new", "start", token=token)
    assert response.status_code == 404
    assert error_code(response) == "unknown_step"


def test_rule_3_an_unclaimed_run_waits_in_the_ledger(harness: Harness) -> None:
    target = new_target()
    run = admit(harness.database, create_automation(harness.database, target=target), harness)
    fake(harness).advance(days=3)
    # No machine existed all that time: the run is still there, pending, never dropped.
    assert run_row(harness.database, run.id)["status"] == "pending"
    late = register(harness, target)
    assert late.claimed()["run"]["id"] == str(run.id)


def test_an_unclaimed_run_survives_a_restart_of_the_service(
    harness: Harness, database_url: str
) -> None:
    target = new_target()
    run = admit(harness.database, create_automation(harness.database, target=target), harness)
    machine = register(harness, target)
    # A new service: new database pools, a new engine and app, nothing shared.
    with Database(database_url, max_size=2) as restarted:
        clock = FakeClock(harness.clock.now())
        engine = Engine(restarted, clock=clock)
        app = create_app(restarted, engine=engine, settings=Settings(api_url=ORIGIN))
        fresh = Harness(restarted, clock, engine, TestClient(app), harness.admin)
        assert run_row(restarted, run.id)["status"] == "pending"
        claim = Machine(fresh, machine.id, machine.target, machine.key).claimed()
    assert claim["run"]["id"] == str(run.id)


def test_rule_4_completed_step_never_invoked_again(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    # In order: "two" cannot start before "one" is completed.
    early = machine.step(run_id, "two", "start", token=token)
    assert early.status_code == 409
    assert error_code(early) == "step_out_of_order"
    assert machine.step(run_id, "one", "start", token=token).status_code == 200
    assert machine.step(run_id, "two", "start", token=token).status_code == 409
    assert machine.step(run_id, "one", "complete", token=token, output={"v": 1}).status_code == 200
    again = machine.step(run_id, "one", "start", token=token)
    assert again.status_code == 409
    assert error_code(again) == "step_completed"
    # An uncertain acknowledgement may be repeated; another output may not.
    assert machine.step(run_id, "one", "complete", token=token, output={"v": 1}).status_code == 200
    assert machine.step(run_id, "one", "complete", token=token, output={"v": 2}).status_code == 409
    assert journal(harness.database, run_id)["one"].output == {"v": 1}
    # Not even a stray connection changes a completed step.
    with connect(harness.database.url) as conn, pytest.raises(psycopg.Error, match="never runs"):
        conn.execute(
            "UPDATE charter.run_steps SET status = 'running' WHERE run_id = %s AND step_id = 'one'",
            (run_id,),
        )
    # The run completes only once every step has.
    incomplete = machine.run(run_id, "complete", token=token, output=None)
    assert incomplete.status_code == 409
    assert error_code(incomplete) == "run_incomplete"
    for step in ("two", "three"):
        assert machine.step(run_id, step, "start", token=token).status_code == 200
        assert machine.step(run_id, step, "complete", token=token, output=step).status_code == 200
    done = machine.run(run_id, "complete", token=token, output="three")
    assert done.status_code == 200
    assert done.json()["run"]["status"] == "completed"
    assert done.json()["run"]["output"] == "three"


def test_rule_5_a_step_starts_only_under_a_confirmed_lease(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    fake(harness).advance(31)
    late = machine.step(run_id, "one", "start", token=token)
    assert late.status_code == 409
    assert error_code(late) == "lease_lost"
    assert journal(harness.database, run_id) == {}
    # Nor may output be journalled, nor the run finished, without the lease.
    assert machine.step(run_id, "one", "complete", token=token, output=1).status_code == 409
    assert machine.run(run_id, "fail", token=token, error="x").status_code == 409
    assert machine.run(run_id, "release", token=token, error="x").status_code == 409
    assert run_row(harness.database, run_id)["status"] == "running"


def test_rule_6_one_stable_idempotency_key_per_run_step(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    first = machine.step(run_id, "one", "start", token=token).json()["step"]
    assert first["idempotency_key"] == idempotency_key(run_id, "one")
    assert first["attempts"] == 1
    # A transient failure releases the run; the next claim starts the step again.
    machine.run(run_id, "release", token=token, error="connect timeout", retry_at=None)
    fake(harness).advance(10)
    token = lease_of(machine.claimed())
    second = machine.step(run_id, "one", "start", token=token).json()["step"]
    assert second["idempotency_key"] == first["idempotency_key"]
    assert second["attempts"] == 2
    other_step = machine.step(run_id, "one", "complete", token=token, output=1)
    assert other_step.status_code == 200
    two = machine.step(run_id, "two", "start", token=token).json()["step"]
    assert two["idempotency_key"] not in {first["idempotency_key"]}
    _, other_run = setup_run(harness)
    assert idempotency_key(other_run, "one") != first["idempotency_key"]


def test_rule_7_transient_release_keeps_outputs_with_a_bounded_retry(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    machine.step(run_id, "one", "start", token=token)
    machine.step(run_id, "one", "complete", token=token, output={"kept": True})
    machine.step(run_id, "two", "start", token=token)
    far = harness.clock.now() + timedelta(days=30)
    released = machine.run(
        run_id, "release", token=token, error="read timeout", retry_at=far.isoformat()
    )
    assert released.status_code == 200
    run = released.json()["run"]
    assert run["status"] == "pending"
    assert run["error"] == "read timeout"
    retry_at = parse_rfc3339(run["retry_at"])
    assert retry_at == harness.clock.now() + timedelta(seconds=MAX_RETRY_DELAY_SECONDS)
    entries = journal(harness.database, run_id)
    assert entries["one"].status == "completed"
    assert entries["one"].output == {"kept": True}
    assert entries["two"].status == "failed"
    # Not claimable before its retry time; claimable after, with the journal intact.
    assert machine.claim().status_code == 204
    fake(harness).set(retry_at)
    again = machine.claimed()
    assert again["run"]["attempts"] == 2
    assert [e["step_id"] for e in again["journal"] if e["status"] == "completed"] == ["one"]


def test_rule_7_a_retry_time_in_the_past_is_now(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    past = datetime(2000, 1, 1, tzinfo=UTC).isoformat()
    run = machine.run(run_id, "release", token=token, error="x", retry_at=past).json()["run"]
    assert parse_rfc3339(run["retry_at"]) == harness.clock.now()


def test_rule_7_deterministic_errors_are_terminal(harness: Harness) -> None:
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    machine.step(run_id, "one", "start", token=token)
    failed = machine.run(run_id, "fail", token=token, error="no action host for 'x.y'")
    assert failed.status_code == 200
    run = failed.json()["run"]
    assert run["status"] == "failed"
    assert run["finished_at"] is not None
    assert journal(harness.database, run_id)["one"].status == "failed"
    # Terminal: nothing claims, renews or releases it again.
    fake(harness).advance(days=1)
    assert machine.claim().status_code == 204
    assert machine.run(run_id, "release", token=token, error="x").status_code == 409


def test_rule_8_only_a_machine_of_the_selected_target_and_principal_claims(
    harness: Harness,
) -> None:
    target = new_target()
    run = admit(harness.database, create_automation(harness.database, target=target), harness)
    elsewhere = register(harness, new_target())
    impostor = register(harness, target, principal="mallory")
    assert elsewhere.claim().status_code == 204
    assert impostor.claim().status_code == 204
    selected = register(harness, target)
    claim = selected.claimed()
    assert claim["run"]["id"] == str(run.id)
    # The service holds no action hosts: it only answers the journal; every effect is the
    # machine's. Its routes under /v1/machine/ are the lease and journal protocol only.
    paths = harness.http.get("/openapi.json").json()["paths"]
    machine_routes = sorted(path for path in paths if path.startswith("/v1/machine/"))
    assert machine_routes == [
        "/v1/machine/runs/claim",
        "/v1/machine/runs/{run_id}/complete",
        "/v1/machine/runs/{run_id}/fail",
        "/v1/machine/runs/{run_id}/lease",
        "/v1/machine/runs/{run_id}/release",
        "/v1/machine/runs/{run_id}/steps/{step_id}/complete",
        "/v1/machine/runs/{run_id}/steps/{step_id}/start",
    ]
    assert str(harness.http.base_url) == ORIGIN


def test_rule_8_the_automations_service_owns_its_whole_path(harness: Harness) -> None:
    """Admission, claim, journal and completion touch only the automations tables: the
    governed engine owns none of that path (and it owns none of the engine's). The one
    bridge, the `charter.submit` action, goes through the public POST /v1/events."""
    before = table_snapshot(harness.database)
    machine, run_id = setup_run(harness)
    token = lease_of(machine.claimed())
    for step in ("one", "two", "three"):
        assert machine.step(run_id, step, "start", token=token).status_code == 200
        assert machine.step(run_id, step, "complete", token=token, output=step).status_code == 200
    assert machine.run(run_id, "complete", token=token, output="done").status_code == 200
    assert run_row(harness.database, run_id)["status"] == "completed"
    assert table_snapshot(harness.database) == before
