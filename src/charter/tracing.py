"""OpenTelemetry traces: spans for each HTTP request, `process_event`, each fire and each
run step, one trace from a webhook delivery to its run's steps and their outgoing requests.

A run stores the W3C `traceparent` of the span that admitted it (`current_traceparent`);
the machine gets it with its claim and opens each step's span as that span's child
(`span(..., carrier=run_carrier(...))`); `http.request` sends the step's context on as
its own `traceparent` header.

The OpenTelemetry API is a no-op until a tracer provider is installed, so the spans cost
next to nothing when tracing is off. `configure_tracing` installs the SDK's provider when
the optional extra is installed (`pip install charter[otel]`) and the standard `OTEL_*`
variables ask for an exporter (`OTEL_TRACES_EXPORTER=otlp|console`, or an
`OTEL_EXPORTER_OTLP_ENDPOINT`); `OTEL_SDK_DISABLED=true` keeps it off. Service name:
`OTEL_SERVICE_NAME`, else the command's (`charter-api`, `charter-worker`, ...).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)
TRACER_NAME = "charter"
Attributes = Mapping[str, str | int | bool]


def tracer() -> trace.Tracer:
    # Looked up per use (cheap): a provider installed later is still picked up.
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def span(
    name: str,
    attributes: Attributes | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    carrier: Mapping[str, str] | None = None,
) -> Iterator[Span]:
    """A span, current inside the block; `carrier` (headers with a W3C `traceparent`)
    makes it the child of a remote span. An exception marks it as an error."""
    parent = propagate.extract(carrier) if carrier is not None else None
    with tracer().start_as_current_span(
        name, context=parent, kind=kind, attributes=dict(attributes or {})
    ) as current:
        yield current


def traceparent() -> dict[str, str]:
    """The current trace context as headers (`traceparent`, `tracestate`): empty when
    there is no recording span."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, to store with what it admits; None
    when there is no recording span (tracing off)."""
    return traceparent().get("traceparent")


def run_carrier(stored: str | None) -> dict[str, str]:
    """The carrier a run's step spans are opened with: the admitting span's context, or
    an empty one (the run's steps then start a trace of their own)."""
    return {"traceparent": stored} if stored else {}


def configure_tracing(service_name: str) -> bool:
    """Install the SDK's tracer provider if the environment asks for traces and the
    `otel` extra is installed; whether tracing is on."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not exporter_name and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporter_name = "otlp"
    if exporter_name in ("", "none"):
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_* asks for traces but the otel extra is not installed "
                    "(pip install 'charter[otel]'); tracing stays off")  # fmt: skip
        return False
    exporter = _exporter(exporter_name)
    if exporter is None:
        return False
    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


def _exporter(name: str) -> SpanExporter | None:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        try:
            # By name: the exporter is in the otel extra only, not in the dev install.
            otlp = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        except ImportError:
            log.warning("OTEL_TRACES_EXPORTER=otlp needs the otel extra's OTLP exporter "
                        "(pip install 'charter[otel]'); tracing stays off")  # fmt: skip
            return None
        # Endpoint, headers and timeout come from the OTEL_EXPORTER_OTLP_* variables.
        return cast("SpanExporter", otlp.OTLPSpanExporter())
    log.warning("OTEL_TRACES_EXPORTER=%s is not supported (otlp, console); tracing stays off",
                name)  # fmt: skip
    return None
