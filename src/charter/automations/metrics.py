"""Prometheus metrics of automations: cron admission (and its catch-up), webhook
deliveries received and refused."""

from __future__ import annotations

from prometheus_client import Counter

from charter.engine.metrics import REGISTRY

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
