"""Machines without polling: the long-poll claim, woken by the `runs_claimable` hint sent
after an admitting commit, and the batched step reports (one request per step).

No timing is asserted. A long poll here waits up to 30 s while its re-check interval is
an hour, so only a hint can wake it in time: a claim that returns the run admitted
while it waited proves the hint woke it (a broken hint path answers 204 at the end of
the wait and the test fails).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

from charter.api.state import Services
from charter.automations.admission import fire_due_crons
from charter.automations.wakeups import RunWakeups
from charter.automations.webhooks import sign
from charter.core.jsontypes import JsonValue
from charter.core.timefmt import parse_rfc3339
from charter.db.database import Database, Role, connect
from charter.machine.actions import ActionCall
from charter.machine.client import MachineClient
from charter.machine.executor import ExecutorOptions, Outcome, RunExecutor
from charter.machine.registry import ActionRegistry
from tests.integration.apikit import Harness, bearer
from tests.integration.machinekit import (
    ORIGIN,
    Machine,
    admit,
    asgi_client,
    create_automation,
    fake,
    journal,
    machine_harness,
    new_target,
    register,
    run_row,
)

pytestmark = pytest.mark.anyio
SECRET = "whsec_" + base64.b64encode(b"long-poll secret, 32 bytes long!").decode()
HOUR = 3600.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def harness(database: Database) -> Harness:
    return machine_harness(database)


def wakeups_of(harness: Harness) -> RunWakeups:
    services = harness.http.app.state.charter  # type: ignore[attr-defined]
    assert isinstance(services, Services)
    return services.wakeups


@pytest.fixture
async def http(harness: Harness) -> AsyncIterator[httpx.AsyncClient]:
    """The app in this test's event loop; waiting claims re-check only once an hour."""
    wakeups = wakeups_of(harness)
    wakeups.recheck, wakeups.draining = HOUR, False
    async with asgi_client(harness) as client:
        yield client
    await wakeups.aclose()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a condition (a bounded wait for an event, not a timed assertion)."""
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within 30 s: {what}")
        await asyncio.sleep(0.005)


async def parked(harness: Harness, machine: Machine, principal: str = "alice", n: int = 1) -> None:
    """Until `n` claims of the machine's target wait on a connected listener."""
    wakeups = wakeups_of(harness)
    await until(
        lambda: (
            wakeups.connected.is_set() and wakeups.waiting_count(principal, machine.target) == n
        ),
        f"{n} claim(s) waiting",
    )


def long_poll(machine: Machine, http: httpx.AsyncClient) -> MachineClient:
    return machine.client(http, wait=30)


async def post(
    http: httpx.AsyncClient, machine: Machine, path: str, body: Any, proof: str | None = None
) -> httpx.Response:
    headers = {"DPoP": proof or machine.proof("POST", path), "Content-Type": "application/json"}
    return await http.post(path, content=json.dumps(body).encode(), headers=headers)


def webhook_trigger(database: Database, automation_id: uuid.UUID) -> None:
    with connect(database.url) as conn:
        conn.execute(
            "INSERT INTO charter.webhook_triggers (automation_id, source, secret) "
            "VALUES (%s, 'shop', %s)",
            (automation_id, SECRET),
        )
        conn.commit()


async def deliver(http: httpx.AsyncClient, harness: Harness, target: str) -> str:
    """A signed webhook delivery to alice's automations on `target`: the run's id."""
    body = b'{"source": "shop", "type": "order.paid"}'
    message_id = f"msg_{uuid.uuid4().hex}"
    stamp = int(harness.clock.now().timestamp())
    headers = {
        "X-Charter-Principal": "alice",
        "X-Charter-Target": target,
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, message_id, stamp, body),
    }
    response = await http.post("/events", content=body, headers=headers)
    assert response.status_code == 202, response.text
    runs = response.json()["runs"]
    assert len(runs) == 1
    return str(runs[0])


async def trigger(http: httpx.AsyncClient, harness: Harness, automation_id: uuid.UUID) -> str:
    """A manual run through the control API: the run's id."""
    token = harness.token("runs:execute", principal="alice")
    response = await http.post(
        f"/v1/automations/{automation_id}/runs", json={}, headers=bearer(token)
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


# --- the long poll ---------------------------------------------------------------------


async def test_a_long_poll_returns_a_webhook_run_admitted_while_it_waits(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    webhook_trigger(harness.database, create_automation(harness.database, target=target))
    wakeups = wakeups_of(harness)
    waiting = asyncio.create_task(long_poll(machine, http).claim())
    await parked(harness, machine)
    hints, woken = wakeups.hints_received, wakeups.waiters_woken
    assert not waiting.done()  # nothing to claim yet: the request waits

    run_id = await deliver(http, harness, target)

    claimed = await waiting
    assert wakeups.waiters_woken == woken + 1  # the hint woke this waiter
    assert claimed is not None
    assert claimed.run_id == run_id
    assert wakeups.hints_received > hints  # woken by the hint (re-checks are an hour apart)
    assert wakeups.waiting_count("alice", target) == 0
    assert run_row(harness.database, run_id)["lease_owner"] == machine.id


async def test_a_long_poll_answers_204_when_its_wait_ends_with_nothing(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine = register(harness, new_target())
    wakeups_of(harness).recheck = 0.05  # several re-checks within the wait
    response = await post(http, machine, "/v1/machine/runs/claim", {"wait": 0.3})
    assert response.status_code == 204
    assert response.content == b""
    assert wakeups_of(harness).waiting_count("alice", machine.target) == 0


async def test_a_stopping_server_answers_its_waiting_claims_at_once(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    waiting = asyncio.create_task(long_poll(machine, http).claim())
    await parked(harness, machine)
    wakeups_of(harness).drain()  # what `charter serve` does as it shuts down
    run_id = await trigger(http, harness, automation_id)  # hinted, but too late
    assert await waiting is None  # answered 204 when drained: it did not take the run
    assert run_row(harness.database, run_id)["status"] == "pending"


async def test_a_long_poll_finds_a_run_admitted_without_a_hint_by_re_checking(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    wakeups_of(harness).recheck = 0.05
    waiting = asyncio.create_task(long_poll(machine, http).claim())
    await parked(harness, machine)
    hints = wakeups_of(harness).hints_received
    run = admit(harness.database, automation_id, harness)  # committed with no hint sent
    claimed = await waiting
    assert claimed is not None
    assert claimed.run_id == str(run.id)
    assert wakeups_of(harness).hints_received == hints


async def test_two_machines_long_polling_get_each_run_exactly_once(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    first, second = register(harness, target), register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    waiting = [
        asyncio.create_task(long_poll(first, http).claim()),
        asyncio.create_task(long_poll(second, http).claim()),
    ]
    await parked(harness, first, n=2)

    one = await trigger(http, harness, automation_id)
    done, pending = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1  # both woke; only one claimed the run, the other waits again
    winner = done.pop().result()
    assert winner is not None
    assert winner.run_id == one
    await parked(harness, first, n=1)

    two = await trigger(http, harness, automation_id)
    loser = await pending.pop()
    assert loser is not None
    assert loser.run_id == two
    rows = [run_row(harness.database, run_id) for run_id in (one, two)]
    assert [row["attempts"] for row in rows] == [1, 1]  # each claimed once
    assert {row["lease_owner"] for row in rows} == {first.id, second.id}


async def test_a_replayed_proof_is_refused_on_the_long_poll_too(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    path = "/v1/machine/runs/claim"
    proof = machine.proof("POST", path)
    waiting = asyncio.create_task(post(http, machine, path, {"wait": 30}, proof))
    await parked(harness, machine)

    # The proof was spent by the waiting request's first attempt, not at its answer.
    replayed = await post(http, machine, path, {"wait": 30}, proof)
    assert replayed.status_code == 401
    assert replayed.json()["error"]["code"] == "invalid_dpop"
    assert "replay" in replayed.json()["error"]["message"]

    run_id = await trigger(http, harness, automation_id)
    answered = await waiting
    assert answered.status_code == 200
    assert answered.json()["run"]["id"] == run_id
    again = await post(http, machine, path, {"wait": 0.1}, proof)
    assert again.status_code == 401  # and after it answered


async def test_a_machine_disabled_while_it_waits_gets_no_run(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    waiting = asyncio.create_task(post(http, machine, "/v1/machine/runs/claim", {"wait": 30}))
    await parked(harness, machine)
    token = harness.token("automations:write", principal="alice")
    disabled = await http.post(f"/v1/machines/{machine.id}/disable", headers=bearer(token))
    assert disabled.status_code == 200

    run_id = await trigger(http, harness, automation_id)
    answered = await waiting
    assert answered.status_code == 401
    assert answered.json()["error"]["code"] == "invalid_dpop"
    assert run_row(harness.database, run_id)["status"] == "pending"


@pytest.mark.parametrize("wait", [-1, 30.5, "5", True, None])
async def test_a_wait_out_of_bounds_is_refused(
    harness: Harness, http: httpx.AsyncClient, wait: JsonValue
) -> None:
    machine = register(harness, new_target())
    response = await post(http, machine, "/v1/machine/runs/claim", {"wait": wait})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed"
    assert response.json()["error"]["field"] == "wait"


async def test_a_release_due_now_wakes_a_waiting_machine(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    holder, waiter = register(harness, target), register(harness, target)
    run = admit(harness.database, create_automation(harness.database, target=target), harness)
    claimed = await holder.client(http).claim()
    assert claimed is not None
    waiting = asyncio.create_task(long_poll(waiter, http).claim())
    await parked(harness, waiter)

    await holder.client(http).release_run(
        claimed.run_id, claimed.token, "stopping", harness.clock.now()
    )
    taken = await waiting
    assert taken is not None
    assert taken.run_id == str(run.id)


# --- batched step reports ----------------------------------------------------------------


def lease(body: dict[str, Any]) -> str:
    return str(body["lease"]["token"])


async def claimed_run(harness: Harness, http: httpx.AsyncClient) -> tuple[Machine, dict[str, Any]]:
    target = new_target()
    machine = register(harness, target)
    admit(harness.database, create_automation(harness.database, target=target), harness)
    response = await post(http, machine, "/v1/machine/runs/claim", {})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return machine, body


async def test_completing_a_step_can_start_the_next_in_the_same_commit(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, body = await claimed_run(harness, http)
    run_id, token = str(body["run"]["id"]), lease(body)
    base = f"/v1/machine/runs/{run_id}/steps"
    assert (await post(http, machine, f"{base}/one/start", {"token": token})).status_code == 200

    answer = await post(
        http, machine, f"{base}/one/complete", {"token": token, "output": {"a": 1}, "next": "two"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["step"]["status"] == "completed"
    started = answer.json()["next"]
    assert (started["step_id"], started["status"]) == ("two", "running")
    rows = journal(harness.database, run_id)
    assert rows["one"].output == {"a": 1}
    assert rows["two"].status == "running"
    assert rows["two"].idempotency_key == started["idempotency_key"]


async def test_a_step_report_renews_the_lease_when_asked(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, body = await claimed_run(harness, http)
    run_id, token = str(body["run"]["id"]), lease(body)
    base = f"/v1/machine/runs/{run_id}/steps"
    await post(http, machine, f"{base}/one/start", {"token": token})
    fake(harness).advance(20)  # most of the 30 s lease has gone by
    report = {"token": token, "output": 1, "next": "two", "lease_seconds": 30}
    answer = await post(http, machine, f"{base}/one/complete", report)
    assert answer.status_code == 200, answer.text
    expected = harness.clock.now() + timedelta(seconds=30)
    assert parse_rfc3339(answer.json()["lease"]["expires_at"]) == expected
    assert parse_rfc3339(run_row(harness.database, run_id)["lease_expires_at"]) == expected
    alone = {"token": token, "output": 2, "lease_seconds": 30}
    refused = await post(http, machine, f"{base}/two/complete", alone)
    assert refused.status_code == 400  # renewal rides only on a report that starts a step
    assert refused.json()["error"]["field"] == "lease_seconds"


async def test_a_refused_next_step_undoes_the_whole_report(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, body = await claimed_run(harness, http)
    run_id, token = str(body["run"]["id"]), lease(body)
    base = f"/v1/machine/runs/{run_id}/steps"
    await post(http, machine, f"{base}/one/start", {"token": token})
    skipping = await post(
        http, machine, f"{base}/one/complete", {"token": token, "output": 1, "next": "three"}
    )
    assert skipping.status_code == 409
    assert skipping.json()["error"]["code"] == "step_out_of_order"
    assert journal(harness.database, run_id)["one"].status == "running"  # nothing journalled


async def test_completing_a_run_journals_its_last_step_and_claims_the_next_run(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    first = admit(harness.database, automation_id, harness)
    fake(harness).advance(0.001)  # the claim order is the admission order
    second = admit(harness.database, automation_id, harness)
    body = (await post(http, machine, "/v1/machine/runs/claim", {})).json()
    assert body["run"]["id"] == str(first.id)
    token = lease(body)
    base = f"/v1/machine/runs/{first.id}"
    await post(http, machine, f"{base}/steps/one/start", {"token": token})
    for step, following in (("one", "two"), ("two", "three")):
        report = {"token": token, "output": step, "next": following}
        assert (await post(http, machine, f"{base}/steps/{step}/complete", report)).is_success

    done = await post(
        http,
        machine,
        f"{base}/complete",
        {"token": token, "output": "three", "step": "three", "claim": {"lease_seconds": 20}},
    )
    assert done.status_code == 200, done.text
    assert done.json()["run"]["status"] == "completed"
    assert journal(harness.database, first.id)["three"].output == "three"
    handed = done.json()["claim"]
    assert handed["run"]["id"] == str(second.id)
    assert run_row(harness.database, second.id)["lease_owner"] == machine.id

    token = lease(handed)
    base = f"/v1/machine/runs/{second.id}"
    await post(http, machine, f"{base}/steps/one/start", {"token": token})
    incomplete = await post(
        http, machine, f"{base}/complete", {"token": token, "output": 1, "step": "one"}
    )
    assert incomplete.status_code == 409  # steps two and three are not completed
    assert journal(harness.database, second.id)["one"].status == "running"  # undone
    bad = await post(
        http, machine, f"{base}/complete", {"token": token, "output": 1, "claim": "yes"}
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "claim"


async def test_the_executor_reports_each_step_in_one_request_the_first_with_its_claim(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    sent: list[tuple[str, JsonValue]] = []

    async def record(request: httpx.Request) -> None:
        sent.append((request.url.path, json.loads(request.content or b"{}")))

    http.event_hooks["request"].append(record)
    api = long_poll(machine, http)

    async def echo(call: ActionCall) -> JsonValue:
        return {"echo": call.payload}

    runner = RunExecutor(
        api, ActionRegistry({"test.echo": echo}), ExecutorOptions(now=harness.clock.now)
    )
    stop = asyncio.Event()
    running = asyncio.create_task(runner.run(stop))
    await parked(harness, machine)
    runs = [await trigger(http, harness, automation_id) for _ in range(3)]
    await until(
        lambda: all(run_row(harness.database, r)["status"] == "completed" for r in runs),
        "every run completed",
    )
    stop.set()
    assert await running == 3

    claims = [body for path, body in sent if path.endswith("/claim")]
    assert claims
    assert all(isinstance(b, dict) and b["wait"] == 30 and b["start"] is True for b in claims)
    assert len(claims) <= len(runs) + 1  # no polling: runs came by a hint or a handoff
    for run_id in runs:
        # Step one was journalled running by the claim (a long poll's, or the previous
        # run's completion, which asks for `start` too): three requests per run.
        mine = [(p, b) for p, b in sent if f"/runs/{run_id}/" in p]
        assert [p.removeprefix(f"/v1/machine/runs/{run_id}") for p, _ in mine] == [
            "/steps/one/complete",
            "/steps/two/complete",
            "/complete",
        ]
        assert [b.get("next") for _, b in mine[0:2] if isinstance(b, dict)] == ["two", "three"]
        assert isinstance(mine[2][1], dict)
        assert mine[2][1]["step"] == "three"
        claim = mine[2][1]["claim"]
        assert claim is None or claim == {"lease_seconds": 30.0, "start": True}
        assert {s.status for s in journal(harness.database, run_id).values()} == {"completed"}


async def test_a_run_handed_to_a_stopping_executor_is_released_at_once(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    first = admit(harness.database, automation_id, harness)
    fake(harness).advance(0.001)  # the claim order is the admission order
    second = admit(harness.database, automation_id, harness)
    stop = asyncio.Event()

    calls = 0

    async def echo(call: ActionCall) -> JsonValue:
        nonlocal calls
        calls += 1
        return call.payload

    class StopAtCompletion(MachineClient):
        async def finish(self, *args: Any, **kwargs: Any) -> Any:
            handed = await super().finish(*args, **kwargs)
            stop.set()  # told to stop as the completion claimed the next run
            return handed

    api = StopAtCompletion(ORIGIN, machine.key, now=harness.clock.now, http=http, wait=0)
    runner = RunExecutor(
        api, ActionRegistry({"test.echo": echo}), ExecutorOptions(now=harness.clock.now)
    )
    assert await runner.run(stop) == 1
    assert run_row(harness.database, first.id)["status"] == "completed"
    row = run_row(harness.database, second.id)
    assert (row["status"], row["attempts"], row["lease_owner"]) == ("pending", 1, None)
    # Its claim journalled step one running; the release ended that attempt unrun (the
    # next claim starts it again under the same idempotency key).
    steps = journal(harness.database, second.id)
    assert list(steps) == ["one"]
    assert (steps["one"].status, steps["one"].output) == ("failed", None)
    assert "stopping" in (steps["one"].error or "")
    assert calls == 3  # the first run's steps: none of the second run's


async def test_a_machine_with_slots_executes_runs_side_by_side_each_once(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    automation_id = create_automation(harness.database, target=target)
    runs = [admit(harness.database, automation_id, harness) for _ in range(6)]
    in_flight = 0
    side_by_side = asyncio.Event()

    async def echo(call: ActionCall) -> JsonValue:
        # The first calls wait until three run at once: one slot alone would never get there.
        nonlocal in_flight
        in_flight += 1
        if in_flight >= 3:
            side_by_side.set()
        await asyncio.wait_for(side_by_side.wait(), timeout=30)
        in_flight -= 1
        return call.payload

    runner = RunExecutor(
        machine.client(http),
        ActionRegistry({"test.echo": echo}),
        ExecutorOptions(now=harness.clock.now),
    )
    stop = asyncio.Event()
    running = asyncio.create_task(runner.run(stop, slots=3, poll=0.05))
    await until(
        lambda: all(run_row(harness.database, r.id)["status"] == "completed" for r in runs),
        "every run completed",
    )
    stop.set()
    assert await running == 6
    assert [run_row(harness.database, r.id)["attempts"] for r in runs] == [1] * 6


def test_cron_admission_hints_after_its_commit(harness: Harness) -> None:
    target = new_target()
    automation_id = create_automation(harness.database, target=target)
    due = harness.clock.now() - timedelta(minutes=1)
    with connect(harness.database.url) as conn:
        conn.execute(
            "INSERT INTO charter.schedule_triggers (automation_id, cron, timezone, next_run_at)"
            " VALUES (%s, '0 0 1 1 *', 'UTC', %s)",
            (automation_id, due),
        )
        conn.commit()
    with connect(harness.database.url, autocommit=True) as listener:
        listener.execute("LISTEN runs_claimable")
        with harness.database.connection(Role.ENGINE) as conn:
            admitted = fire_due_crons(conn, harness.clock.now())
        assert [run.target for run in admitted] == [target]
        hints = [
            json.loads(n.payload)
            for n in listener.notifies(timeout=30, stop_after=1)
            if n.channel == "runs_claimable"
        ]
    assert {"principal": "alice", "target": target} in hints


async def test_a_run_of_short_steps_outlasting_one_lease_keeps_it(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    run = admit(harness.database, create_automation(harness.database, target=target), harness)

    async def slow_on_the_clock(call: ActionCall) -> JsonValue:
        fake(harness).advance(20)  # each step takes 20 s of the 30 s lease, no heartbeat
        return call.payload

    runner = RunExecutor(
        machine.client(http),
        ActionRegistry({"test.echo": slow_on_the_clock}),
        ExecutorOptions(now=harness.clock.now),
    )
    claimed = await machine.client(http).claim()
    assert claimed is not None
    assert await runner.execute(claimed) is Outcome.COMPLETED  # 60 s in all, one lease
    assert run_row(harness.database, run.id)["status"] == "completed"
