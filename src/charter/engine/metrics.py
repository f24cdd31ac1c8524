"""Prometheus metrics of the write path (served by the API at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from charter.core.metrics import REGISTRY

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
