"""`charter up`: the whole of Charter in one process (and, with a log configured, its
sequencer in a child process)."""

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
    exit_after_demo: bool = typer.Option(
        False,
        "--exit-after-demo",
        help="Run the demo (as --demo does), then stop everything cleanly: exit 0 when "
        "the demo's process verified, 1 when not. For CI and scripts.",
    ),
    cron_interval: CronInterval = 5.0,
    lease_seconds: LeaseSeconds = DEFAULT_WORKER.lease_seconds,
    concurrency: Concurrency = DEFAULT_WORKER.concurrency,
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
) -> None:
    """Start Charter: database, migrations, API, automation worker and cron admission.

    With --demo the access log is left out (the live view polls the API) unless
    --log-level is debug.

    The database is embedded unless CHARTER_DATABASE_URL is set; Ctrl-C stops
    everything cleanly. To run the API and the workers as separate processes, use
    `charter serve` and `charter worker` instead.
    """
    import logging
    from dataclasses import replace

    telemetry = partial(setup_telemetry, log_level, log_format, "charter")
    telemetry()
    demo = demo or exit_after_demo
    if demo and log_level is not LogLevelName.debug:
        # The demo's live view polls the API twice a second: its access lines would bury
        # the view. They are there at --log-level debug.
        logging.getLogger("charter.access").setLevel(logging.WARNING)

    from charter.cli.stack import start

    worker_settings = replace(DEFAULT_WORKER, lease_seconds=lease_seconds, concurrency=concurrency)
    verified = start(
        host,
        port,
        demo=demo,
        exit_after_demo=exit_after_demo,
        cron_interval=cron_interval,
        worker_settings=worker_settings,
        telemetry=telemetry,
    )
    if exit_after_demo and not verified:
        raise typer.Exit(1)
