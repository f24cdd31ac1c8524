"""Prometheus metrics of the engine (served by the API at /metrics)."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from charter.engine.evidence import VerificationReport

# No `_created` series: one more time series per counter, which nobody queries.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)
# The process itself: CPU, memory, open files, start time; the Python runtime's GC.
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

EVENTS_ACCEPTED = Counter(
    "charter_events_accepted", "Events appended by process_event.", registry=REGISTRY
)
EVENTS_REJECTED = Counter(
    "charter_events_rejected", "Submissions refused, by error code.", ["code"], registry=REGISTRY
)
EVENT_SECONDS = Histogram(
    "charter_process_event_seconds",
    "Time spent in process_event, signature check and transaction included.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
VERIFICATIONS = Counter(
    "charter_verifications",
    "Processes verified through the API, by result (ok, problems).",
    ["result"],
    registry=REGISTRY,
)
VERIFICATION_PROBLEMS = Counter(
    "charter_verification_problems",
    "Problems those verifications found, by code (bad_signature, provenance_..., ...).",
    ["code"],
    registry=REGISTRY,
)
CASCADE_STOPS = Counter(
    "charter_automation_cascade_stops",
    "Automatic actions not queued because the cascade limit was reached.",
    registry=REGISTRY,
)
AUTO_RENDER_FAILURES = Counter(
    "charter_automation_render_failures",
    "Automatic actions recorded failed because their data did not render.",
    registry=REGISTRY,
)


def count_verification(report: VerificationReport) -> None:
    VERIFICATIONS.labels(result="ok" if report.ok else "problems").inc()
    for problem in report.problems:
        VERIFICATION_PROBLEMS.labels(code=problem.code).inc()
