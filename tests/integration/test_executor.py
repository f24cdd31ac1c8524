"""The executor against the real API (in-process) and database: the step journal of
the rules of docs/machines.md (1, 2 and 4 to 7), lease renewal, cancellation, retries and the
shipped action hosts."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from charter import deadline
from charter.automations.journal import idempotency_key
from charter.core.config import Settings
from charter.core.disclosures import parse_disclosure
from charter.core.ed25519 import write_secret_key_file
from charter.core.envelope import Envelope
from charter.core.errors import (
    CharterError,
    DatabaseUnavailable,
    ForbiddenRole,
    LeaseLost,
    Malformed,
)
from charter.core.errors.automations import InvalidPlan
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Database
from charter.db.database import connect as db_connect
from charter.machine.actions import (
    ActionCall,
    ActionCancelled,
    ActionFailed,
    ActionTransient,
    TargetAnswered,
    retry_after,
)
from charter.machine.charter_submit import CharterSubmitAction
from charter.machine.client import ClaimedRun, JournalEntry, MachineClient
from charter.machine.executor import ExecutorOptions, Outcome, RunExecutor, plan_from_snapshot
from charter.machine.failures import service_unavailable, transient_failure
from charter.machine.http_request import HttpRequestAction
from charter.machine.registry import ActionRegistry, UnknownActionHost, default_registry
from charter.sdk import ApiUnavailable, AsyncClient, Client
from charter.sdk.protocol import NO_RETRY
from tests.integration.apikit import ERRANDS, Harness
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
    plan,
    register,
    run_row,
)

Behaviour = Callable[[ActionCall], Awaitable[JsonValue]]
pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def harness(database: Database) -> Harness:
    return machine_harness(database)


@pytest.fixture
async def http(harness: Harness) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(harness) as client:
        yield client


@dataclass
class Host:
    """A `test.*` action host that records every call and behaves as told per step."""

    calls: list[ActionCall] = field(default_factory=list)
    behaviours: dict[str, list[Behaviour]] = field(default_factory=dict)

    async def __call__(self, call: ActionCall) -> JsonValue:
        self.calls.append(call)
        assert isinstance(call.payload, dict)
        step = str(call.payload["n"])
        queue = self.behaviours.get(step)
        if queue:
            return await queue.pop(0)(call)
        return {"echo": call.payload}

    def on(self, n: int, behaviour: Behaviour) -> None:
        self.behaviours.setdefault(str(n), []).append(behaviour)

    def keys(self, n: int) -> list[str]:
        return [
            c.idempotency_key
            for c in self.calls
            if isinstance(c.payload, dict) and c.payload.get("n") == n
        ]

    def steps(self) -> list[int]:
        return [int(str(c.payload["n"])) for c in self.calls if isinstance(c.payload, dict)]


class CountingApi(MachineClient):
    """A MachineClient that counts lease renewals and can run a hook before each."""

    renewals = 0
    before_renew: Callable[[], None] | None = None

    async def renew(self, run_id: str, token: str) -> datetime:
        if self.before_renew is not None:
            self.before_renew()
        expires = await super().renew(run_id, token)
        self.renewals += 1
        return expires


def setup(
    harness: Harness,
    steps: JsonValue = None,
    *,
    allowlist: JsonValue = None,
    limits: JsonValue = None,
) -> tuple[Machine, str]:
    target = new_target()
    machine = register(harness, target)
    automation = create_automation(
        harness.database,
        target=target,
        allowlist=allowlist,
        limits=limits,
        steps=steps
        if steps is not None
        else plan(
            ("one", "test.echo", {"n": 1}),
            ("two", "test.echo", {"n": 2}),
            ("three", "test.echo", {"n": 3}),
        )["steps"],
    )
    return machine, str(admit(harness.database, automation, harness).id)


def executor(
    harness: Harness,
    api: MachineClient,
    host: Host,
    **options: object,
) -> RunExecutor:
    registry = ActionRegistry({"test.echo": host})
    settings = ExecutorOptions(now=harness.clock.now, **options)  # type: ignore[arg-type]
    return RunExecutor(api, registry, settings)


async def claim(api: MachineClient) -> ClaimedRun:
    claimed = await api.claim()
    assert claimed is not None
    return claimed


# --- the happy path --------------------------------------------------------------------


async def test_a_run_executes_every_step_in_order_and_completes(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    host = Host()
    api = machine.client(http)
    outcome = await executor(harness, api, host).execute(await claim(api))
    assert outcome is Outcome.COMPLETED
    assert host.steps() == [1, 2, 3]
    entries = journal(harness.database, run_id)
    assert [(s, e.status) for s, e in entries.items()] == [
        ("one", "completed"),
        ("two", "completed"),
        ("three", "completed"),
    ]
    for n, step in enumerate(("one", "two", "three"), start=1):
        assert host.keys(n) == [idempotency_key(run_id, step)]
        assert entries[step].output == {"echo": {"n": n}}
    row = run_row(harness.database, run_id)
    assert row["status"] == "completed"
    assert row["output"] == {"echo": {"n": 3}}


async def test_the_loop_claims_executes_and_stops(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    runner = executor(harness, api, Host())
    assert await runner.run(asyncio.Event(), once=True) == 1
    assert run_row(harness.database, run_id)["status"] == "completed"
    assert await runner.run(asyncio.Event(), once=True) == 0


# --- the rules ----------------------------------------------------------------------------


async def test_rule_1_the_executor_runs_the_snapshot_not_the_current_plan(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    from charter.db.database import connect

    machine, run_id = setup(harness)
    automation = run_row(harness.database, run_id)["automation_id"]
    with connect(harness.database.url) as conn:
        conn.execute(
            "UPDATE charter.plans SET steps = "
            """'[{"id": "other", "actionId": "test.echo", "input": {"n": 99}}]'::jsonb """
            "WHERE automation_id = %s",
            (automation,),
        )
        conn.commit()
    host = Host()
    api = machine.client(http)
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.COMPLETED
    assert host.steps() == [1, 2, 3]


@pytest.mark.parametrize("start", [False, True], ids=["claim", "claim-and-start"])
async def test_rule_2_an_action_without_a_host_fails_the_run_before_any_step(
    harness: Harness, http: httpx.AsyncClient, start: bool
) -> None:
    machine, run_id = setup(
        harness,
        plan(("one", "test.echo", {"n": 1}), ("two", "shell.exec", {"cmd": "true"}))["steps"],
    )
    host = Host()
    api = machine.client(http, start=start)
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.FAILED
    row = run_row(harness.database, run_id)
    assert row["status"] == "failed"
    assert "no action host for 'shell.exec'" in row["error"]
    assert host.calls == []  # no action was invoked
    steps = journal(harness.database, run_id)
    if not start:
        assert steps == {}
    else:  # the claim journalled step one running; the run's failure ended it unrun
        assert list(steps) == ["one"]
        assert steps["one"].status == "failed"
        assert steps["one"].output is None
        assert "no action host for 'shell.exec'" in (steps["one"].error or "")


async def test_step_inputs_read_the_run_input_and_earlier_outputs(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    target = new_target()
    machine = register(harness, target)
    steps = plan(
        ("one", "test.echo", {"n": 1}),
        ("two", "test.echo", {"n": 2, "after": "{{ steps.one.echo.n }}",
                              "who": "{{ input.payload.name }}", "note": "for {{ input.kind }}"}),
    )["steps"]  # fmt: skip
    automation = create_automation(harness.database, target=target, steps=steps)
    admit(harness.database, automation, harness, {"kind": "webhook", "payload": {"name": "Ada"}})
    host = Host()
    api = machine.client(http)
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.COMPLETED
    assert [c.payload for c in host.calls] == [
        {"n": 1},
        {"n": 2, "after": 1, "who": "Ada", "note": "for webhook"},
    ]


async def test_an_action_off_the_allowlist_fails_the_run_before_any_step(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness, allowlist=["http.*"])
    host = Host()
    api = machine.client(http)
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.FAILED
    row = run_row(harness.database, run_id)
    assert row["status"] == "failed"
    assert "'test.echo' is not on the allowlist" in row["error"]
    assert host.calls == []


async def test_an_action_past_the_step_time_limit_is_cancelled_and_fails_the_run(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness, limits={"stepTimeoutSeconds": 0.2})
    api = machine.client(http)
    host = Host()
    cancelled = asyncio.Event()

    async def slow(call: ActionCall) -> JsonValue:
        await call.cancel.wait()
        cancelled.set()
        return None

    host.on(1, slow)
    ran = executor(harness, api, host, heartbeat=0.05)
    assert await ran.execute(await claim(api)) is Outcome.FAILED
    assert cancelled.is_set()
    row = run_row(harness.database, run_id)
    assert row["status"] == "failed"
    assert "ran past 0.2 s" in row["error"]
    assert host.steps() == [1]


async def test_rule_4_a_resumed_run_never_invokes_a_completed_step_again(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    first, run_id = setup(harness)
    token = first.claimed()["lease"]["token"]
    first.step(run_id, "one", "start", token=token)
    first.step(run_id, "one", "complete", token=token, output={"from": "first"})
    first.step(run_id, "two", "start", token=token)  # then the first machine vanished
    fake(harness).advance(31)
    second = register(harness, first.target)
    host = Host()
    api = second.client(http)
    claimed = await claim(api)
    assert claimed.journal["one"].status == "completed"
    assert await executor(harness, api, host).execute(claimed) is Outcome.COMPLETED
    assert host.steps() == [2, 3]  # resumed at the first incomplete step
    entries = journal(harness.database, run_id)
    assert entries["one"].output == {"from": "first"}
    assert entries["two"].attempts == 2
    assert run_row(harness.database, run_id)["output"] == {"echo": {"n": 3}}


async def test_rule_5_the_lease_is_renewed_while_an_action_runs(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = CountingApi(ORIGIN, machine.key, now=harness.clock.now, http=http, wait=0)
    # Each renewal happens 20 s later than the one before: without them the 30 s lease
    # would lapse during the step, and its output could not be journalled.

    def later() -> None:
        fake(harness).advance(20)

    api.before_renew = later
    host = Host()

    async def slow(call: ActionCall) -> JsonValue:
        while api.renewals < 3:
            await asyncio.sleep(0.005)
        return {"renewed": api.renewals}

    host.on(1, slow)
    outcome = await executor(harness, api, host, heartbeat=0.01).execute(await claim(api))
    assert outcome is Outcome.COMPLETED
    assert api.renewals >= 3
    assert journal(harness.database, run_id)["one"].output == {"renewed": 3}


async def test_rule_5_a_failed_renewal_cancels_the_action_and_stops_advancing(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    first, run_id = setup(harness)
    second = register(harness, first.target)
    api_a, api_b = first.client(http), second.client(http)
    stolen: list[ClaimedRun] = []
    host = Host()

    async def lose_the_lease(call: ActionCall) -> JsonValue:
        # The lease expires while the action runs, and another machine takes the run.
        fake(harness).advance(31)
        stolen.append(await claim(api_b))
        await call.cancel.wait()  # the executor signals cancellation
        return {"late": True}

    host.on(1, lose_the_lease)
    outcome = await executor(harness, api_a, host, heartbeat=0.01).execute(await claim(api_a))
    assert outcome is Outcome.LOST
    assert host.calls[0].cancel.is_set()
    assert host.steps() == [1]  # step two never began
    entries = journal(harness.database, run_id)
    assert list(entries) == ["one"]
    assert entries["one"].status == "running"  # the late output was not journalled
    # The machine that holds the lease now resumes at the same step, with the same key.
    assert await executor(harness, api_b, host).execute(stolen[0]) is Outcome.COMPLETED
    assert host.keys(1) == [idempotency_key(run_id, "one")] * 2
    assert host.steps() == [1, 1, 2, 3]


async def test_rule_5_an_action_ignoring_cancellation_is_cancelled_after_the_grace(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    cancelled = asyncio.Event()
    host = Host()

    async def stubborn(call: ActionCall) -> JsonValue:
        fake(harness).advance(31)
        try:
            await asyncio.Event().wait()  # never returns by itself
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    host.on(1, stubborn)
    runner = executor(harness, api, host, heartbeat=0.01, cancel_grace=0.01)
    assert await runner.execute(await claim(api)) is Outcome.LOST
    assert cancelled.is_set()
    assert journal(harness.database, run_id)["one"].status == "running"


async def test_rule_6_every_retry_of_a_step_presents_the_same_key(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    host = Host()

    async def flaky(call: ActionCall) -> JsonValue:
        raise httpx.ConnectError("connection refused")

    host.on(2, flaky)
    host.on(2, flaky)
    runner = executor(harness, api, host, retry_delay=lambda attempt: 1.0)
    for _ in range(2):
        assert await runner.execute(await claim(api)) is Outcome.RELEASED
        fake(harness).advance(1)
    assert await runner.execute(await claim(api)) is Outcome.COMPLETED
    assert host.keys(2) == [idempotency_key(run_id, "two")] * 3
    assert host.keys(1) == [idempotency_key(run_id, "one")]


async def test_rule_7_a_transient_failure_releases_with_a_bounded_retry_and_keeps_outputs(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    host = Host()

    async def timeout(call: ActionCall) -> JsonValue:
        raise httpx.ReadTimeout("the peer is slow")

    host.on(2, timeout)
    runner = executor(harness, api, host, retry_delay=lambda attempt: 1e9, max_retry_delay=90.0)
    assert await runner.execute(await claim(api)) is Outcome.RELEASED
    row = run_row(harness.database, run_id)
    assert row["status"] == "pending"
    assert "ReadTimeout" in row["error"]
    retry_at = datetime.fromisoformat(row["retry_at"])
    assert retry_at == harness.clock.now() + timedelta(seconds=90)  # capped
    entries = journal(harness.database, run_id)
    assert entries["one"].status == "completed"
    assert entries["two"].status == "failed"
    assert await api.claim() is None  # not before its retry time
    fake(harness).set(retry_at)
    assert await runner.execute(await claim(api)) is Outcome.COMPLETED
    assert host.steps() == [1, 2, 2, 3]  # step one kept its output, never ran again


async def test_rule_7_transient_failures_fail_the_run_after_max_attempts(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    host = Host()

    async def down(call: ActionCall) -> JsonValue:
        raise ActionTransient("the peer reset the connection")

    host.on(1, down)
    host.on(1, down)
    runner = executor(harness, api, host, max_attempts=2, retry_delay=lambda attempt: 0.0)
    assert await runner.execute(await claim(api)) is Outcome.RELEASED
    assert await runner.execute(await claim(api)) is Outcome.FAILED
    row = run_row(harness.database, run_id)
    assert row["status"] == "failed"
    assert "gave up after 2 attempt(s)" in row["error"]


@pytest.mark.parametrize(
    "error",
    [
        ActionFailed("HTTP 404 from the peer"),
        ForbiddenRole("the actor holds none of the roles"),
        ValueError("a bug in the host"),
        httpx.UnsupportedProtocol("no such scheme"),
    ],
)
async def test_rule_7_a_deterministic_error_fails_the_run(
    harness: Harness, http: httpx.AsyncClient, error: Exception
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    host = Host()

    async def broken(call: ActionCall) -> JsonValue:
        raise error

    host.on(2, broken)
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.FAILED
    row = run_row(harness.database, run_id)
    assert row["status"] == "failed"
    assert "step 'two' (test.echo)" in row["error"]
    entries = journal(harness.database, run_id)
    assert entries["one"].status == "completed"
    assert entries["two"].status == "failed"
    assert host.steps() == [1, 2]


async def test_rule_7_an_invalid_plan_snapshot_fails_the_run(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    # The database checks only the shape of steps; the snapshot is validated on use.
    machine, run_id = setup(harness, [{"id": "one", "input": {}}])
    api = machine.client(http)
    host = Host()
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.FAILED
    row = run_row(harness.database, run_id)
    assert row["error"].startswith("invalid plan snapshot")
    assert host.calls == []


async def test_a_non_json_output_fails_the_run_without_journalling_it(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    host = Host()

    async def nan(call: ActionCall) -> JsonValue:
        return {"value": float("nan")}

    host.on(1, nan)
    assert await executor(harness, api, host).execute(await claim(api)) is Outcome.FAILED
    assert "not JSON" in run_row(harness.database, run_id)["error"]
    assert journal(harness.database, run_id)["one"].status == "failed"


async def test_a_stopping_machine_releases_the_run_between_steps(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)
    api = machine.client(http)
    stop = asyncio.Event()
    host = Host()

    async def then_stop(call: ActionCall) -> JsonValue:
        stop.set()
        return "done"

    host.on(1, then_stop)
    claimed = await claim(api)
    assert await executor(harness, api, host).execute(claimed, stop) is Outcome.RELEASED
    row = run_row(harness.database, run_id)
    assert row["status"] == "pending"
    assert datetime.fromisoformat(row["retry_at"]) == harness.clock.now()
    assert journal(harness.database, run_id)["one"].output == "done"


# --- a target's answers: only a step's `retry.on` retries them (rule 7) --------------


@dataclass
class Target:
    """An HTTP target answering from a script, one answer per request (then 200)."""

    answers: list[httpx.Response] = field(default_factory=list)
    seen: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return self.answers.pop(0) if self.answers else httpx.Response(200, json={"ok": True})

    def keys(self) -> list[str]:
        return [r.headers["Idempotency-Key"] for r in self.seen]


def http_setup(harness: Harness, retry: JsonValue = None) -> tuple[Machine, str]:
    """A run of one `http.request` step, opted in to `retry` when given."""
    step: dict[str, JsonValue] = {
        "id": "call",
        "actionId": "http.request",
        "input": {"url": "https://target.example/hook"},
    }
    if retry is not None:
        step["retry"] = retry
    return setup(harness, [step])


def http_executor(harness: Harness, api: MachineClient, target: Target) -> RunExecutor:
    registry = ActionRegistry(
        {"http.request": HttpRequestAction(transport=httpx.MockTransport(target))}
    )
    options = ExecutorOptions(
        now=harness.clock.now, retry_delay=lambda attempt: 7.0, max_retry_delay=600.0
    )
    return RunExecutor(api, registry, options)


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (503, None),
        (500, None),
        (429, None),
        (429, {"on": ["http_5xx"]}),  # opted in to another condition
        (503, {"on": ["http_429"]}),
    ],
)
async def test_rule_7_a_target_answering_5xx_or_429_fails_the_run_unless_opted_in(
    harness: Harness, http: httpx.AsyncClient, status: int, retry: JsonValue
) -> None:
    machine, run_id = http_setup(harness, retry)
    api = machine.client(http)
    target = Target([httpx.Response(status, text="busy")])
    assert await http_executor(harness, api, target).execute(await claim(api)) is Outcome.FAILED
    row = run_row(harness.database, run_id)
    assert row["status"] == "failed"
    assert (
        f"target_answered: GET https://target.example/hook answered HTTP {status}" in (row["error"])
    )
    assert len(target.seen) == 1


@pytest.mark.parametrize(("status", "condition"), [(503, "http_5xx"), (429, "http_429")])
async def test_a_step_opted_in_is_released_on_the_answer_and_later_completes(
    harness: Harness, http: httpx.AsyncClient, status: int, condition: str
) -> None:
    machine, run_id = http_setup(harness, {"on": [condition]})
    api = machine.client(http)
    target = Target([httpx.Response(status, text="busy")])
    runner = http_executor(harness, api, target)
    assert await runner.execute(await claim(api)) is Outcome.RELEASED
    row = run_row(harness.database, run_id)
    assert row["status"] == "pending"
    assert f"answered HTTP {status}" in row["error"]
    retry_at = datetime.fromisoformat(row["retry_at"])
    assert retry_at == harness.clock.now() + timedelta(seconds=7)  # the backoff
    assert run_row(harness.database, run_id)["plan"]["steps"][0]["retry"] == {"on": [condition]}
    fake(harness).set(retry_at)
    assert await runner.execute(await claim(api)) is Outcome.COMPLETED
    assert run_row(harness.database, run_id)["output"]["json"] == {"ok": True}
    assert target.keys() == [idempotency_key(run_id, "call")] * 2


@pytest.mark.parametrize(("retry_after", "seconds"), [("42", 42), ("86400", 600)])
async def test_an_opted_in_retry_waits_for_the_answers_retry_after(
    harness: Harness, http: httpx.AsyncClient, retry_after: str, seconds: int
) -> None:
    machine, run_id = http_setup(harness, {"on": ["http_429", "http_5xx"]})
    api = machine.client(http)
    busy = httpx.Response(429, headers={"Retry-After": retry_after})
    assert (
        await http_executor(harness, api, Target([busy])).execute(await claim(api))
        is Outcome.RELEASED
    )
    retry_at = datetime.fromisoformat(run_row(harness.database, run_id)["retry_at"])
    # Retry-After instead of the 7 s backoff, within the executor's 600 s cap.
    assert retry_at == harness.clock.now() + timedelta(seconds=seconds)


async def test_opted_in_answers_still_give_up_after_max_attempts(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = http_setup(harness, {"on": ["http_5xx"]})
    api = machine.client(http)
    target = Target([httpx.Response(503), httpx.Response(502)])
    registry = ActionRegistry(
        {"http.request": HttpRequestAction(transport=httpx.MockTransport(target))}
    )
    options = ExecutorOptions(now=harness.clock.now, max_attempts=2, retry_delay=lambda a: 0.0)
    runner = RunExecutor(api, registry, options)
    assert await runner.execute(await claim(api)) is Outcome.RELEASED
    assert await runner.execute(await claim(api)) is Outcome.FAILED
    assert "gave up after 2 attempt(s)" in run_row(harness.database, run_id)["error"]


async def test_a_refused_connection_is_retried_without_opting_in(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more: a real connection refused.
    machine, run_id = setup(
        harness,
        [{"id": "call", "actionId": "http.request", "input": {"url": f"http://127.0.0.1:{port}/"}}],
    )
    api = machine.client(http)
    runner = RunExecutor(
        api,
        ActionRegistry({"http.request": HttpRequestAction()}),
        ExecutorOptions(now=harness.clock.now),
    )
    assert await runner.execute(await claim(api)) is Outcome.RELEASED
    row = run_row(harness.database, run_id)
    assert row["status"] == "pending"
    assert "ConnectError" in row["error"]


async def test_a_target_timing_out_is_retried_without_opting_in(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer in time", request=request)

    machine, run_id = http_setup(harness)
    api = machine.client(http)
    registry = ActionRegistry(
        {"http.request": HttpRequestAction(transport=httpx.MockTransport(slow))}
    )
    runner = RunExecutor(api, registry, ExecutorOptions(now=harness.clock.now))
    assert await runner.execute(await claim(api)) is Outcome.RELEASED
    assert "ReadTimeout" in run_row(harness.database, run_id)["error"]


async def test_the_service_answering_unavailable_releases_the_run(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    machine, run_id = setup(harness)

    class Flaky(MachineClient):
        async def complete_and_start(
            self, run_id: str, step_id: str, token: str, output: JsonValue, next_step: str
        ) -> JournalEntry:
            raise DatabaseUnavailable("the database cannot be reached")

    api = Flaky(ORIGIN, machine.key, now=harness.clock.now, http=http, wait=0)
    assert await executor(harness, api, Host()).execute(await claim(api)) is Outcome.RELEASED
    row = run_row(harness.database, run_id)
    assert row["status"] == "pending"
    assert "the service failed: database_unavailable" in row["error"]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    def answer(status: int, **headers: str) -> httpx.Response:
        return httpx.Response(status, headers=headers)

    assert retry_after(answer(429, **{"Retry-After": "120"})) == 120.0
    assert retry_after(answer(503, **{"Retry-After": "0"})) == 0.0
    dated = {
        "Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT",
        "Date": "Wed, 21 Oct 2015 07:28:00 GMT",
    }
    assert retry_after(answer(503, **dated)) == 30.0
    assert retry_after(answer(500, **{"Retry-After": "120"})) is None  # not a 429 or 503
    assert retry_after(answer(429, **{"Retry-After": "soon"})) is None
    assert retry_after(answer(429)) is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("9" * 5000, float(2**64 - 1)),  # past int()'s 4,300 digits: as long as can be
        ("9" * 400, float(2**64 - 1)),
        ("0" * 5000 + "7", 7.0),
        ("\u00b2", None),  # a digit to str.isdigit(), not to int() nor to HTTP
        ("-5", None),
        ("1.5", None),
    ],
)
def test_retry_after_reads_only_ascii_digits_bounded_by_length(
    value: str, seconds: float | None
) -> None:
    answer = httpx.Response(429, headers=[(b"Retry-After", value.encode("latin-1"))])
    assert retry_after(answer) == seconds


# --- transient_failure -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (httpx.ConnectTimeout("t"), True),
        (httpx.ReadTimeout("t"), True),
        (httpx.WriteTimeout("t"), True),
        (httpx.PoolTimeout("t"), True),
        (httpx.ConnectError("c"), True),
        (httpx.ReadError("r"), True),
        (httpx.RemoteProtocolError("closed"), True),
        (deadline.DeadlineExceeded("past 15 s"), True),
        (ActionTransient("reset"), True),
        (ApiUnavailable("cannot reach the Charter API"), True),
        # Answers are never transport failures, whatever their status.
        (TargetAnswered("HTTP 503", status=503), False),
        (TargetAnswered("HTTP 429", status=429), False),
        (DatabaseUnavailable("down"), False),
        (CharterError("HTTP 502: bad gateway", status=502), False),
        (httpx.UnsupportedProtocol("ftp"), False),
        (httpx.InvalidURL("bad"), False),
        (httpx.TooManyRedirects("loop"), False),
        (LeaseLost("gone"), False),
        (ForbiddenRole("no"), False),
        (Malformed("bad"), False),
        (ActionFailed("404"), False),
        (UnknownActionHost("x.y"), False),
        (ValueError("bug"), False),
        (asyncio.CancelledError(), False),
    ],
)
def test_transient_failure_is_exactly_the_transport_kind(
    error: BaseException, transient: bool
) -> None:
    assert transient_failure(error) is transient


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (DatabaseUnavailable("down"), True),
        (CharterError("HTTP 502: bad gateway", status=502), True),
        (CharterError("HTTP 504", status=504), True),
        (CharterError("HTTP 500", status=500), False),
        (LeaseLost("gone"), False),
        (httpx.ConnectError("refused"), False),
    ],
)
def test_the_service_answering_it_is_unavailable(error: BaseException, unavailable: bool) -> None:
    assert service_unavailable(error) is unavailable


def test_api_unavailable_is_classified_by_its_transport_cause() -> None:
    def wrapped(cause: Exception) -> ApiUnavailable:
        try:
            raise ApiUnavailable("cannot reach the Charter API") from cause
        except ApiUnavailable as exc:
            return exc

    assert transient_failure(wrapped(httpx.ConnectError("refused")))
    assert not transient_failure(wrapped(httpx.UnsupportedProtocol("ftp")))


def test_plan_from_snapshot_reads_the_plan_and_its_policy_and_nothing_else() -> None:
    snapshot: dict[str, JsonValue] = {
        "version": 1,
        "steps": [{"id": "a", "actionId": "test.echo", "input": {}}],
        "allowlist": None,
        "limits": None,
    }
    plan_, policy = plan_from_snapshot(snapshot)
    assert [s.id for s in plan_.steps] == ["a"]
    assert policy.allows("anything.at_all")
    _, narrow = plan_from_snapshot(
        {**snapshot, "allowlist": ["test.*", "http.request"], "limits": {"stepTimeoutSeconds": 2}}
    )
    assert (narrow.allows("test.echo"), narrow.allows("http.request")) == (True, True)
    assert (narrow.allows("charter.submit"), narrow.allows("testing.x")) == (False, False)
    assert narrow.step_timeout_seconds == 2.0
    bad_policies: list[dict[str, JsonValue]] = [
        {"allowlist": "test.*"},
        {"allowlist": ["Not An Id"]},
        {"limits": {"x": 1}},
        {"limits": {"stepTimeoutSeconds": 0}},
        {"limits": {"stepTimeoutSeconds": True}},
    ]
    for bad in bad_policies:
        with pytest.raises(InvalidPlan):
            plan_from_snapshot({**snapshot, **bad})
    with pytest.raises(InvalidPlan):
        plan_from_snapshot({**snapshot, "extra": 1})
    with pytest.raises(InvalidPlan):
        plan_from_snapshot({"version": 1, "steps": []})


def test_executor_options_are_checked() -> None:
    with pytest.raises(ValueError, match="heartbeat"):
        ExecutorOptions(heartbeat=0)
    with pytest.raises(ValueError, match="max_attempts"):
        ExecutorOptions(max_attempts=0)


def test_the_registry_has_no_fallback() -> None:
    registry = default_registry(Settings())
    assert registry.ids() == ["charter.submit", "http.request"]
    with pytest.raises(UnknownActionHost):
        registry.get("shell.exec")
    with pytest.raises(ValueError, match="registered already"):
        registry.register("http.request", HttpRequestAction())


# --- http.request ----------------------------------------------------------------------


def call(payload: JsonValue, key: str = "k" * 64) -> ActionCall:
    return ActionCall("http.request", payload, key, asyncio.Event())


async def test_http_request_sends_the_idempotency_key_and_returns_json() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"id": 7}, headers={"Location": "/things/7"})

    host = HttpRequestAction(transport=httpx.MockTransport(answer))
    output = await host(
        call(
            {
                "method": "post",
                "url": "https://api.example/things",
                "json": {"a": 1},
                "headers": {"Idempotency-Key": "forged", "X-Trace": "1"},
            }
        )
    )
    assert output == {
        "status": 201,
        "headers": {"content-type": "application/json", "location": "/things/7"},
        "json": {"id": 7},
    }
    assert seen[0].headers["Idempotency-Key"] == "k" * 64
    assert seen[0].headers["X-Trace"] == "1"
    assert seen[0].method == "POST"


async def test_http_request_classifies_answers() -> None:
    statuses = iter([503, 429, 404, 200])

    def answer(request: httpx.Request) -> httpx.Response:
        status = next(statuses)
        headers = {"Retry-After": "30"} if status == 503 else {}
        return httpx.Response(status, text="plain", headers=headers)

    host = HttpRequestAction(transport=httpx.MockTransport(answer))
    with pytest.raises(TargetAnswered, match="answered HTTP 503") as unavailable:
        await host(call({"url": "http://api.example/"}))
    assert (unavailable.value.condition, unavailable.value.retry_after) == ("http_5xx", 30.0)
    with pytest.raises(TargetAnswered, match="answered HTTP 429") as limited:
        await host(call({"url": "http://api.example/"}))
    assert (limited.value.condition, limited.value.status) == ("http_429", 429)
    with pytest.raises(TargetAnswered, match="404") as missing:
        await host(call({"url": "http://api.example/"}))
    assert isinstance(missing.value, ActionFailed)  # deterministic, whatever the plan says
    assert (missing.value.condition, missing.value.retry_after) == (None, None)
    assert await host(call({"url": "http://api.example/"})) == {
        "status": 200,
        "headers": {"content-type": "text/plain; charset=utf-8"},
        "text": "plain",
    }


@pytest.mark.parametrize(
    "payload",
    [
        "GET /",
        {"url": "file:///etc/passwd"},
        {"url": "http://x/", "method": "TRACE"},
        {"url": "http://x/", "timeout": 0},
        {"url": "http://x/", "headers": {"bad header": "x"}},
        {"url": "http://x/", "body": "x"},
    ],
)
async def test_http_request_refuses_bad_input(payload: JsonValue) -> None:
    with pytest.raises(ActionFailed):
        await HttpRequestAction()(call(payload))


async def test_http_request_stops_when_cancelled() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    host = HttpRequestAction(transport=httpx.MockTransport(hang))
    invocation = call({"url": "http://api.example/"})
    task = asyncio.ensure_future(host(invocation))
    await asyncio.sleep(0)
    invocation.cancel.set()
    with pytest.raises(ActionCancelled):
        await task


# --- charter.submit --------------------------------------------------------------------


async def test_charter_submit_signs_submits_and_repeats_idempotently(
    harness: Harness, tmp_path: Path
) -> None:
    key_file = tmp_path / "clerk.key"
    write_secret_key_file(key_file, harness.keys["clerk"])
    token = harness.token("processes:read")
    host = CharterSubmitAction(
        ORIGIN,
        token,
        now=harness.clock.now,
        client=lambda: AsyncClient(ORIGIN, token, http=_asgi(harness), retry=NO_RETRY),
    )
    process = f"p-{os.urandom(4).hex()}"
    base: dict[str, JsonValue] = {
        "process": process,
        "workflow": ERRANDS,
        "action": "create",
        "input": {"amount": 5},
        "key_file": str(key_file),
    }
    invocation = ActionCall("charter.submit", base, "a" * 64, asyncio.Event())
    created = await host(invocation)
    assert isinstance(created, dict)
    assert created["seq"] == 1
    assert created["state"] == "open"
    # The same step again (an uncertain acknowledgement): the same event, not a second.
    assert await host(invocation) == created
    client = Client(ORIGIN, token, http=harness.http)
    events = client.events(process)
    assert len(events) == 1
    assert events[0].input == {"amount": 5, "meta": {"idempotency_key": "a" * 64}}
    # Another step's key is another event; the governed engine's refusals are final.
    noted = await host(
        ActionCall(
            "charter.submit",
            {**base, "action": "note", "input": {}},
            "b" * 64,
            asyncio.Event(),
        )
    )
    assert isinstance(noted, dict)
    assert noted["seq"] == 2
    with pytest.raises(ForbiddenRole) as refused:
        await host(
            ActionCall(
                "charter.submit",
                {**base, "action": "approve", "input": {}},
                "c" * 64,
                asyncio.Event(),
            )
        )
    assert not transient_failure(refused.value)


# A create whose `name` is personal: a v2 envelope and a disclosure, never in clear.
PEOPLE_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["clerk", "dpo"],
    "erasure": {"role": "dpo", "from": "*", "bases": ["art17-1a"]},
    "actions": {
        "open": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "input": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "x-personal": True},
                    "country": {"type": "string"},
                },
            },
            "mutate": {"$set": {"name": "{{ input.name }}", "country": "{{ input.country }}"}},
        },
    },
}


async def test_charter_submit_sends_personal_fields_as_disclosures_of_a_v2_envelope(
    harness: Harness, tmp_path: Path
) -> None:
    path = f"tests/submit-people-{os.urandom(4).hex()}"
    harness.deploy(path, PEOPLE_DEFINITION)
    key_file = tmp_path / "clerk.key"
    write_secret_key_file(key_file, harness.keys["clerk"])
    token = harness.token("processes:read")
    host = CharterSubmitAction(
        ORIGIN,
        token,
        now=harness.clock.now,
        client=lambda: AsyncClient(ORIGIN, token, http=_asgi(harness), retry=NO_RETRY),
    )
    process = f"p-{os.urandom(4).hex()}"
    payload: dict[str, JsonValue] = {
        "process": process,
        "workflow": path,
        "action": "open",
        "input": {"name": "Ada Lovelace", "country": "GB"},
        "key_file": str(key_file),
    }
    invocation = ActionCall("charter.submit", payload, "e" * 64, asyncio.Event())
    created = await host(invocation)
    assert isinstance(created, dict)
    assert (created["seq"], created["state"]) == (1, "open")
    # Idempotent as before: the step again answers the same event.
    assert await host(invocation) == created
    with db_connect(harness.database.url) as conn:
        [(text,)] = conn.execute(
            "SELECT envelope::text FROM charter.events WHERE process_id = %s", (process,)
        ).fetchall()
        kept = conn.execute(
            "SELECT pointer, disclosure FROM charter.event_disclosures WHERE event_hash = %s",
            (created["hash"],),
        ).fetchall()
    envelope = Envelope.from_text(str(text))
    assert envelope.v == 2
    assert envelope.input == {"country": "GB", "meta": {"idempotency_key": "e" * 64}}
    for personal in ('"name":', "Ada", "Lovelace"):
        assert personal not in str(text), personal
    [(pointer, disclosure)] = kept
    assert pointer == "/name"
    disclosed = parse_disclosure(str(disclosure))
    assert disclosed.value == "Ada Lovelace"
    assert envelope.sd == {"/name": disclosed.digest}
    # The engine joined the disclosure: the process document holds the value.
    found = Client(ORIGIN, token, http=harness.http).process(process)
    assert found.data == {"name": "Ada Lovelace", "country": "GB"}


@pytest.mark.parametrize(
    "payload",
    [
        {"process": "p", "workflow": "w", "action": "a"},  # no key
        {"process": "p", "workflow": "w", "action": "a", "key_file": "x", "key_env": "Y"},
        {"process": "p", "workflow": "w", "key_env": "Y"},
        {"process": "p", "workflow": "w", "action": "a", "key_env": "CHARTER_NO_SUCH_VAR"},
        {"process": "p", "workflow": "w", "action": "a", "key_env": "Y", "input": []},
    ],
)
async def test_charter_submit_refuses_bad_input(payload: JsonValue) -> None:
    host = CharterSubmitAction("http://127.0.0.1:9", None)
    with pytest.raises(ActionFailed):
        await host(ActionCall("charter.submit", payload, "k" * 64, asyncio.Event()))


def _asgi(harness: Harness) -> httpx.AsyncClient:
    """An async client of the harness's app, in this process (the action host is async)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=harness.http.app))


def submit_call(key_env: str) -> ActionCall:
    payload: dict[str, JsonValue] = {
        "process": "p-1",
        "workflow": ERRANDS,
        "action": "create",
        "key_env": key_env,
    }
    return ActionCall("charter.submit", payload, "d" * 64, asyncio.Event())


async def test_charter_submit_5xx_answers_follow_the_steps_retry_policy(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Charter API is charter.submit's target like any other: its 503
    # database_unavailable is a target answer (retried only with `retry.on`), not transport.
    monkeypatch.setenv("CHARTER_TEST_CLERK_SK", harness.keys["clerk"].hex())

    def down(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "database_unavailable", "message": "the database is down"}}
        return httpx.Response(503, json=body, headers={"Retry-After": "12"})

    host = CharterSubmitAction(
        ORIGIN,
        "ch_x",
        client=lambda: AsyncClient(
            ORIGIN, "ch_x", http=httpx.AsyncClient(transport=httpx.MockTransport(down))
        ),
    )
    with pytest.raises(TargetAnswered) as caught:
        await host(submit_call("CHARTER_TEST_CLERK_SK"))
    answered = caught.value
    assert (answered.status, answered.condition, answered.retry_after) == (503, "http_5xx", 12.0)
    assert "HTTP 503 database_unavailable: the database is down" in answered.message
    assert isinstance(answered.__cause__, DatabaseUnavailable)
    assert not transient_failure(answered)


async def test_charter_submit_cannot_reach_its_api_is_a_transport_failure(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARTER_TEST_CLERK_SK", harness.keys["clerk"].hex())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    host = CharterSubmitAction(f"http://127.0.0.1:{port}", "ch_x")
    with pytest.raises(ApiUnavailable) as caught:
        await host(submit_call("CHARTER_TEST_CLERK_SK"))
    assert transient_failure(caught.value)
