"""`charter up`: the whole of Charter in one command — the API and the worker each in a
child process of its own (and, with a log configured, the sequencer in a third)."""

from __future__ import annotations

from functools import partial

import typer

from charter.cli.options import (
    DEFAULT_WORKER,
    Concurrency,
    CronInterval,
    LeaseSeconds,
    LogFormat,
    LogFormatName,
    LogLevel,
    LogLevelName,
    setup_telemetry,
)
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
    exit_after_demo: bool = typer.Option(
        False,
        "--exit-after-demo",
        help="Run the demo (as --demo does), then stop everything cleanly: exit 0 when "
        "the demo's process verified, 1 when not. For CI and scripts.",
    ),
    metrics_port: int | None = typer.Option(
        None,
        "--metrics-port",
        min=1,
        max=65535,
        envvar="CHARTER_WORKER_METRICS_PORT",
        help="Serve the worker process's Prometheus metrics (fires, firing lag, lease"
        " reclaims, cron) at http://127.0.0.1:PORT/metrics; the API's /metrics has the"
        " API's. Off unless given.",
    ),
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
) -> None:
    """Start Charter: database, migrations, API, automation worker and cron admission.

    The API and the worker (with cron admission) run as two child processes, so they
    use two cores; Ctrl-C (or SIGTERM) stops them all cleanly, and if one of them dies
    the others are stopped and `charter up` exits 1.

    With --demo the access log is left out (the live view polls the API) unless
    --log-level is debug.

    The database is embedded unless CHARTER_DATABASE_URL is set. To run and scale the
    API and the workers separately, use `charter serve` and `charter worker` instead.
    """
    from dataclasses import replace

    telemetry = partial(setup_telemetry, log_level, log_format, "charter")
    telemetry()

    from charter.cli.stack import start

    worker_settings = replace(DEFAULT_WORKER, lease_seconds=lease_seconds, concurrency=concurrency)
    demo = demo or exit_after_demo
    verified = start(
        host,
        port,
        demo=demo,
        cron_interval=cron_interval,
        worker_settings=worker_settings,
        telemetry=telemetry,
        metrics_port=metrics_port,
        exit_after_demo=exit_after_demo,
        # The demo's live view polls the API twice a second: its access lines would bury
        # the view. They are there at --log-level debug.
        quiet_access=demo and log_level is not LogLevelName.debug,
    )
    if exit_after_demo and not verified:
        raise typer.Exit(1)
