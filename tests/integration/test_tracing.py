"""Traces with the SDK's in-memory exporter: an HTTP request's span (FastAPI's own, once
a provider is installed) continues the caller's trace (W3C traceparent) and holds
`process_event`'s; each fire has a span."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from charter.automations.admission import fire_due_crons
from charter.automations.webhooks import sign as webhook_signature
from charter.core.envelope import sign
from charter.core.jsontypes import JsonValue
from charter.core.metrics import REGISTRY
from charter.db.database import Database, Role, connect
from charter.machine.executor import ExecutorOptions, Outcome, RunExecutor
from charter.machine.http_request import HttpRequestAction
from charter.machine.registry import ActionRegistry
from charter.tracing import _exporter, configure_tracing
from tests.integration.apikit import ERRANDS, Harness, new_id
from tests.integration.liveserver import free_port
from tests.integration.machinekit import (
    Machine,
    asgi_client,
    create_automation,
    machine_harness,
    new_target,
    register,
    run_row,
)
from tests.integration.test_metrics import TICKING, TICKING_DEFINITION
from tests.integration.triggerkit import automation, new_principal, new_secret, schedule, webhook
from tests.integration.world import World, new_process_id, scratch_database

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> Iterator[None]:
    """The SDK's provider, installed for this module only.

    A process may install one global provider, ever; OpenTelemetry's own test utilities
    (opentelemetry-test-utils, `reset_trace_globals`) put the globals back the same way,
    so that no other test runs with tracing on (FastAPI traces every request once a
    provider is set)."""
    installed = TracerProvider()
    installed.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(installed)
    try:
        yield
    finally:
        installed.shutdown()
        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = Once()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _one(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in spans.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    return found[0]


@pytest.fixture(scope="module")
def h(database: Database) -> Harness:
    # Its public origin is the test client's, so machines can call it too (DPoP `htu`).
    return machine_harness(database)


def _ancestors(spans: InMemorySpanExporter, span: ReadableSpan) -> list[int]:
    """Span ids from `span`'s parent up to the root, among the finished spans."""
    by_id = {s.context.span_id: s for s in spans.get_finished_spans() if s.context}
    found: list[int] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        found.append(parent.span_id)
        parent = by_id[parent.span_id].parent
    return found


def test_a_request_continues_the_callers_trace_and_holds_process_event(
    h: Harness, spans: InMemorySpanExporter
) -> None:
    clerk = h.keys["clerk"]
    process_id = new_id()
    response = h.post(
        sign(h.envelope(clerk, process_id, "create", {"amount": 5}), clerk),
        headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
    )
    assert response.status_code == 201, response.text
    server = _one(spans, "POST /v1/events")
    engine = _one(spans, "charter.process_event")
    assert server.kind is SpanKind.SERVER
    assert server.context is not None
    assert engine.context is not None
    assert format(server.context.trace_id, "032x") == CALLER_TRACE
    assert server.parent is not None
    assert format(server.parent.span_id, "016x") == CALLER_SPAN
    assert server.context.span_id in _ancestors(spans, engine)  # inside the request
    assert engine.context.trace_id == server.context.trace_id
    assert (server.attributes or {}).get("http.route") == "/v1/events"
    assert dict(engine.attributes or {}) == {
        "charter.process_id": process_id, "charter.action": "create",
        "charter.workflow": ERRANDS, "charter.seq": 1,
    }  # fmt: skip


def test_a_refused_event_marks_the_engine_span_as_an_error(
    h: Harness, spans: InMemorySpanExporter
) -> None:
    clerk = h.keys["clerk"]
    # "approve" on a process that does not exist: refused by the engine.
    refused = h.post(sign(h.envelope(clerk, new_id(), "approve"), clerk))
    assert refused.status_code >= 400
    engine = _one(spans, "charter.process_event")
    assert engine.status.status_code is StatusCode.ERROR
    assert _one(spans, "POST /v1/events").status.status_code is not StatusCode.ERROR


def test_each_fire_has_a_span_named_by_its_work(
    pg_admin_url: str, template_database: str, spans: InMemorySpanExporter
) -> None:
    with scratch_database(pg_admin_url, template_database) as database:
        world = World(database)
        world.deploy(TICKING, TICKING_DEFINITION)
        world.actor("ada", "customer")
        world.actor("automation", "AUTOMATION")
        process_id = new_process_id()
        world.submit("ada", "open", process_id, None, workflow=TICKING,
                     input_={"due": "2026-06-18T09:00:00Z"})  # fmt: skip
        spans.clear()
        [fired] = world.firer().fire_due().results
    span = _one(spans, "charter.fire")
    assert dict(span.attributes or {}) == {
        "charter.work_id": str(fired.row.id), "charter.kind": "scheduled_action",
        "charter.process_id": process_id, "charter.action": "tick",
    }  # fmt: skip


def test_tracing_stays_off_unless_the_environment_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    assert configure_tracing("charter-test") is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert configure_tracing("charter-test") is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert configure_tracing("charter-test") is False
    assert type(_exporter("console")).__name__ == "ConsoleSpanExporter"
    assert _exporter("zipkin") is None


# --- one trace from a webhook delivery to its run's outgoing requests -------------------


class _Target(ThreadingHTTPServer):
    """A local HTTP server standing for a step's target: it records each request's
    `traceparent` header and answers 200 JSON, or `status` when told."""

    def __init__(self, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _TargetHandler)
        self.status = status
        self.traceparents: list[str | None] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _TargetHandler(BaseHTTPRequestHandler):
    server: _Target

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.traceparents.append(self.headers.get("traceparent"))
        body = b'{"ok": true}'
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet


@contextmanager
def _target(status: int = 200) -> Iterator[_Target]:
    server = _Target(status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def machines(h: Harness) -> Harness:
    return h


def _deliver(harness: Harness, principal: str, target: str, secret: str) -> str:
    """A signed delivery to `POST /events`; the one run it admits."""
    body = b'{"type": "order.paid", "source": "shop", "data": {"order": 42}}'
    stamp = int(harness.clock.now().timestamp())
    message_id = new_id("msg")
    response = harness.http.post(
        "/events",
        content=body,
        headers={
            "X-Charter-Principal": principal,
            "X-Charter-Target": target,
            "Content-Type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": webhook_signature(secret, message_id, stamp, body),
        },
    )
    assert response.status_code == 202, response.text
    [run_id] = response.json()["runs"]
    assert isinstance(run_id, str)
    return run_id


async def _execute_one(harness: Harness, machine: Machine) -> Outcome:
    registry = ActionRegistry({"http.request": HttpRequestAction()})
    async with asgi_client(harness) as http:
        api = machine.client(http)
        claimed = await api.claim()
        assert claimed is not None
        options = ExecutorOptions(now=harness.clock.now)
        return await RunExecutor(api, registry, options).execute(claimed)


def _webhook_automation(harness: Harness, url: str) -> tuple[str, str, str, Machine]:
    """An automation of a new principal whose one step POSTs to `url`, triggered by a
    webhook of source `shop`, and a machine for its target."""
    principal, target, secret = new_principal(), new_target(), new_secret()
    steps: JsonValue = [{"id": "notify", "actionId": "http.request",
              "input": {"method": "POST", "url": url, "json": {"hello": 1}}}]  # fmt: skip
    automation_id = create_automation(
        harness.database, target=target, principal=principal, steps=steps
    )
    with connect(harness.database.url) as conn:
        webhook(conn, automation_id, source="shop", secret=secret)
        conn.commit()
    return principal, target, secret, register(harness, target, principal=principal)


def _step_seconds_count(outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "charter_run_step_duration_seconds_count", {"outcome": outcome}
    )
    return value or 0.0


def _step_count(outcome: str) -> float:
    value = REGISTRY.get_sample_value("charter_run_steps_total", {"outcome": outcome})
    return value or 0.0


@pytest.mark.anyio
async def test_a_webhooks_trace_runs_through_its_run_and_step_into_the_outgoing_request(
    machines: Harness, spans: InMemorySpanExporter
) -> None:
    with _target() as target_server:
        principal, target, secret, machine = _webhook_automation(machines, target_server.url)
        run_id = _deliver(machines, principal, target, secret)
        completed_before = _step_count("completed")
        outcome = await _execute_one(machines, machine)
    assert outcome is Outcome.COMPLETED

    delivery = _one(spans, "POST /events")
    run = _one(spans, "charter.run")
    step = _one(spans, "charter.run.step")
    outgoing = _one(spans, "POST")
    assert delivery.context is not None
    assert run.context is not None
    assert step.context is not None
    assert outgoing.context is not None
    trace_id = delivery.context.trace_id
    # The run stored the context of a span inside the delivery's request (the handler's);
    # the machine's run span continued it.
    stored = run_row(machines.database, run_id)["traceparent"]
    _, stored_trace, stored_span, _ = stored.split("-")
    assert stored_trace == f"{trace_id:032x}"
    [admitting] = [s for s in spans.get_finished_spans()
                   if s.context and s.context.span_id == int(stored_span, 16)]  # fmt: skip
    assert admitting is delivery or delivery.context.span_id in _ancestors(spans, admitting)
    assert {s.context.trace_id for s in (run, step, outgoing)} == {trace_id}
    assert run.parent is not None
    assert run.parent.span_id == int(stored_span, 16)
    assert step.parent is not None
    assert step.parent.span_id == run.context.span_id
    assert outgoing.parent is not None
    assert outgoing.parent.span_id == step.context.span_id
    assert outgoing.kind is SpanKind.CLIENT
    assert dict(run.attributes or {}) == {
        "charter.run_id": run_id, "charter.run.attempt": 1, "charter.outcome": "completed",
    }  # fmt: skip
    assert dict(step.attributes or {}) == {
        "charter.run_id": run_id, "charter.step": "notify", "charter.step.attempt": 1,
        "charter.outcome": "completed",
    }  # fmt: skip
    assert (outgoing.attributes or {}).get("http.response.status_code") == 200
    # The target saw the outgoing request's own span as its caller, in the same trace.
    [sent] = target_server.traceparents
    assert sent is not None
    assert sent.split("-")[1:3] == [f"{trace_id:032x}", f"{outgoing.context.span_id:016x}"]
    # The service's spans for the machine's requests after its claim join the trace too.
    journal = [s for s in spans.get_finished_spans()
               if s.name.startswith("POST /v1/machine/runs/{run_id}/")]  # fmt: skip
    assert journal
    assert {s.context.trace_id for s in journal if s.context} == {trace_id}
    assert _step_count("completed") == completed_before + 1


@pytest.mark.anyio
async def test_a_failed_step_is_an_error_span_and_counted_failed(
    machines: Harness, spans: InMemorySpanExporter
) -> None:
    with _target(status=400) as target_server:
        principal, target, secret, machine = _webhook_automation(machines, target_server.url)
        _deliver(machines, principal, target, secret)
        failed_before = _step_count("failed")
        outcome = await _execute_one(machines, machine)
    assert outcome is Outcome.FAILED
    step = _one(spans, "charter.run.step")
    assert step.status.status_code is StatusCode.ERROR
    assert (step.attributes or {}).get("charter.outcome") == "failed"
    assert _one(spans, "charter.run").status.status_code is StatusCode.ERROR
    assert _step_count("failed") == failed_before + 1


def test_each_cron_occurrence_starts_a_trace_its_run_keeps(
    database: Database, spans: InMemorySpanExporter
) -> None:
    principal = new_principal()
    due = datetime(2026, 6, 18, 9, 0, tzinfo=UTC)
    with connect(database.url) as conn:
        schedule(conn, automation(conn, principal), cron="0 * * * *", next_run_at=due)
        conn.commit()
    with database.connection(Role.ENGINE) as conn:
        runs = fire_due_crons(conn, due + timedelta(minutes=90))
    mine = [r for r in runs if r.principal == principal]
    assert len(mine) == 2  # 09:00 and 10:00
    admits = {s.context.span_id: s for s in spans.get_finished_spans()
              if s.name == "charter.cron.admit" and s.context}  # fmt: skip
    traces = set()
    for run in mine:
        assert run.traceparent is not None
        _, trace_id, span_id, _ = run.traceparent.split("-")
        admit = admits[int(span_id, 16)]
        assert admit.parent is None  # a root: a trace of its own
        assert admit.context is not None
        assert f"{admit.context.trace_id:032x}" == trace_id
        traces.add(trace_id)
    assert len(traces) == 2


@pytest.mark.anyio
async def test_a_transient_failure_releases_the_step_and_counts_it_released(
    machines: Harness, spans: InMemorySpanExporter
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: connection refused
    principal, target, secret, machine = _webhook_automation(machines, closed)
    _deliver(machines, principal, target, secret)
    released_before = _step_count("released")
    timed_before = _step_seconds_count("released")
    outcome = await _execute_one(machines, machine)
    assert outcome is Outcome.RELEASED
    step = _one(spans, "charter.run.step")
    assert (step.attributes or {}).get("charter.outcome") == "released"
    assert step.status.status_code is StatusCode.ERROR
    assert _step_count("released") == released_before + 1
    assert _step_seconds_count("released") == timed_before + 1
