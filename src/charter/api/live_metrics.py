"""Gauges read at scrape time: the work waiting in the database (timers due, queue and
runs by live status, machines seen) and this process's connection pools.

They come from the database, not from counters, so any API process reports the whole
deployment's backlog, whichever worker or machine holds it. One statement per scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from decimal import Decimal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from charter.core.errors import CharterError
from charter.db.database import Database, Role
from charter.operator.reads import live_state

log = logging.getLogger(__name__)


class LiveStateCollector(Collector):
    def __init__(self, database: Database) -> None:
        self.database = database

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._pools()
        try:
            with self.database.connection(Role.ENGINE) as conn, conn.transaction():
                row = live_state(conn)
        except CharterError as exc:
            # A scrape must answer: without the database, report only what this process
            # knows (the pools); the failed health check tells the rest.
            log.warning("metrics: cannot read the live state (%s)", exc.message)
            return
        # Counts (int) and an age in seconds (Decimal, or NULL when nothing is due).
        numbers = [float(value or 0) for value in row if isinstance(value, int | Decimal | None)]
        assert len(numbers) == len(row)
        due, due_hour, oldest, timers_claimed, q_pending, q_claimed, r_pending, r_running, seen = (
            numbers
        )
        yield _gauge("charter_timers_due", "Scheduled actions due now and not yet fired.", due)
        yield _gauge(
            "charter_timers_due_next_hour",
            "Scheduled actions due within the next hour (those due now included).",
            due_hour,
        )
        yield _gauge(
            "charter_timers_oldest_due_seconds",
            "How long the oldest due, unfired scheduled action has been due (0 if none).",
            oldest,
        )
        work = GaugeMetricFamily(
            "charter_work_rows",
            "Live automation work rows, by table (scheduled, queue) and status.",
            labels=["table", "status"],
        )
        work.add_metric(["scheduled", "active_due"], due)
        work.add_metric(["scheduled", "claimed"], timers_claimed)
        work.add_metric(["queue", "pending"], q_pending)
        work.add_metric(["queue", "claimed"], q_claimed)
        yield work
        runs = GaugeMetricFamily("charter_runs", "Runs not finished, by status.", labels=["status"])
        runs.add_metric(["pending"], r_pending)
        runs.add_metric(["running"], r_running)
        yield runs
        yield _gauge(
            "charter_machines_seen",
            "Machines that made an authenticated request in the last 5 minutes.",
            seen,
        )

    def _pools(self) -> Iterator[GaugeMetricFamily]:
        in_use = GaugeMetricFamily(
            "charter_db_pool_connections",
            "Connections of this process's pools, by role and state (in_use, idle).",
            labels=["role", "state"],
        )
        waiting = GaugeMetricFamily(
            "charter_db_pool_waiting",
            "Requests waiting for a connection, by role.",
            labels=["role"],
        )
        for role, stats in self.database.pool_stats().items():
            size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
            in_use.add_metric([role, "in_use"], size - idle)
            in_use.add_metric([role, "idle"], idle)
            waiting.add_metric([role], stats.get("requests_waiting", 0))
        yield in_use
        yield waiting


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
