"""Prometheus metrics of the sequencer, in the engine's registry (served at /metrics by
the `charter up` / `charter serve` process that runs it)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from charter.engine.metrics import REGISTRY

LOG_HALTED = Gauge(
    "charter_log_halted",
    "1 while the sequencer of this process is halted, by reason (db_behind_log, ...).",
    ["reason"],
    registry=REGISTRY,
)
LOG_INTEGRATED = Counter(
    "charter_log_entries_integrated",
    "Events this process's sequencer appended to the transparency log.",
    registry=REGISTRY,
)
LOG_SIZE = Gauge(
    "charter_log_size",
    "The size of the latest checkpoint this process's sequencer wrote.",
    registry=REGISTRY,
)
LOG_PENDING_OLDEST = Gauge(
    "charter_log_pending_oldest_seconds",
    "Age of the oldest queued event this process's sequencer last read (0: none): the"
    " pre-integration window, in which an unlogged event can still be erased.",
    registry=REGISTRY,
)
