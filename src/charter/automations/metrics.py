"""Prometheus metrics of automations: cron admission (and its catch-up), webhook
deliveries received and refused, run steps by outcome and their durations."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Histogram

from charter.automations.ledger import StepRecord
from charter.core.metrics import REGISTRY

CRON_ADMISSIONS = Counter(
    "charter_cron_admissions",
    "Runs admitted for due occurrences of schedule triggers.",
    registry=REGISTRY,
)
CRON_CATCHUP = Counter(
    "charter_cron_catchup",
    "Of those, occurrences admitted in the same tick after an earlier occurrence of the "
    "same trigger: the trigger was behind (admission was down, or a tick was capped).",
    registry=REGISTRY,
)
WEBHOOKS_RECEIVED = Counter(
    "charter_webhooks_received",
    "Webhook deliveries received, whatever became of them.",
    registry=REGISTRY,
)
WEBHOOKS_REFUSED = Counter(
    "charter_webhooks_refused",
    "Webhook deliveries refused, by error code (bad signature, stale timestamp, ...).",
    ["reason"],
    registry=REGISTRY,
)
WEBHOOK_RUNS = Counter(
    "charter_webhook_runs_admitted",
    "Runs admitted from webhook deliveries.",
    registry=REGISTRY,
)
RUN_STEPS = Counter(
    "charter_run_steps",
    "Run steps ended, by outcome: completed (output journalled), failed (the run failed) "
    "or released (the run went back to the queue, the step starts again on a retry).",
    ["outcome"],
    registry=REGISTRY,
)
RUN_STEP_SECONDS = Histogram(
    "charter_run_step_duration_seconds",
    "From a step journalled running to journalled ended, by outcome.",
    ["outcome"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
    registry=REGISTRY,
)


def observe_steps(ended: Iterable[tuple[str, StepRecord]]) -> None:
    """Count steps a committed transaction journalled as ended (`journal.EndedSteps`)."""
    for outcome, step in ended:
        RUN_STEPS.labels(outcome=outcome).inc()
        if step.finished_at is not None:
            seconds = (step.finished_at - step.started_at).total_seconds()
            RUN_STEP_SECONDS.labels(outcome=outcome).observe(max(0.0, seconds))
