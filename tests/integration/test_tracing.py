"""Traces with the SDK's in-memory exporter: an HTTP request's span (FastAPI's own, once
a provider is installed) continues the caller's trace (W3C traceparent) and holds
`process_event`'s; each fire has a span."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from charter.core.envelope import sign
from charter.db.database import Database
from charter.tracing import _exporter, configure_tracing
from tests.integration.apikit import ERRANDS, Harness, make_harness, new_id
from tests.integration.test_metrics import TICKING, TICKING_DEFINITION
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
    return make_harness(database)


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
