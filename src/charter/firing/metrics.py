"""Prometheus metrics of the automation worker: fires by outcome and kind, how late each
accepted fire was, leases reclaimed. Counted after the batch's COMMIT, so a rolled-back
batch counts nothing."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from prometheus_client import Counter, Histogram

from charter.core.metrics import REGISTRY
from charter.firing.outcomes import FireResult, Outcome

FIRES = Counter(
    "charter_automation_fires",
    "Work rows fired, by outcome (accepted, skipped, transient_error, failed, lost) and "
    "kind (scheduled_action, auto_action).",
    ["outcome", "kind"],
    registry=REGISTRY,
)
FIRING_LAG = Histogram(
    "charter_automation_firing_lag_seconds",
    "From the instant a row's occurrence fell due (a schedule's run_at, an automatic "
    "action's queued_at) to the commit of the batch that fired it, for accepted fires; "
    "retries after errors count in it.",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
    registry=REGISTRY,
)
LEASE_RECLAIMS = Counter(
    "charter_automation_lease_reclaims",
    "Rows whose lease had expired (their worker died or stalled), made due again.",
    registry=REGISTRY,
)


def count_fires(results: Iterable[FireResult], committed_at: datetime) -> None:
    """Count a committed batch's results."""
    for result in results:
        row = result.row
        FIRES.labels(outcome=result.outcome.value, kind=row.kind).inc()
        if result.outcome is Outcome.ACCEPTED:
            lag = (committed_at - row.occurrence).total_seconds()
            FIRING_LAG.labels(kind=row.kind).observe(max(0.0, lag))
