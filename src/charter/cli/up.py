"""`charter up`: the whole of Charter in one process."""

from __future__ import annotations

import typer

from charter.cli.options import DEFAULT_WORKER, Concurrency, CronInterval, LeaseSeconds
from charter.core.config import DEFAULT_HOST, DEFAULT_PORT


def up(
    host: str = typer.Option(DEFAULT_HOST, help="Address to listen on."),
    port: int = typer.Option(DEFAULT_PORT, help="Port to listen on."),
    demo: bool = typer.Option(
        False, "--demo", help="Deploy the onboarding demo and drive it live."
    ),
    cron_interval: CronInterval = 5.0,
    lease_seconds: LeaseSeconds = DEFAULT_WORKER.lease_seconds,
    concurrency: Concurrency = DEFAULT_WORKER.concurrency,
) -> None:
    """Start Charter: database, migrations, API, automation worker and cron admission.

    The database is embedded unless CHARTER_DATABASE_URL is set; Ctrl-C stops
    everything cleanly. To run the API and the workers as separate processes, use
    `charter serve` and `charter worker` instead.
    """
    from dataclasses import replace

    from charter.cli.stack import start

    worker_settings = replace(DEFAULT_WORKER, lease_seconds=lease_seconds, concurrency=concurrency)
    start(host, port, demo=demo, cron_interval=cron_interval, worker_settings=worker_settings)
