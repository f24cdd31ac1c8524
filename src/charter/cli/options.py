"""Options that several commands share, declared once so their names, bounds, environment
variables and help read the same in `charter up` and `charter worker`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from charter.firing.worker import WorkerSettings

DEFAULT_WORKER = WorkerSettings()

LeaseSeconds = Annotated[
    int,
    typer.Option(
        "--lease-seconds",
        min=5,
        envvar="CHARTER_LEASE_SECONDS",
        help="How long a worker may stall inside a batch before PostgreSQL ends its session "
        "and other workers take the rows (also the lease of a claim held across "
        "transactions).",
    ),
]
Concurrency = Annotated[
    int,
    typer.Option(
        "--concurrency",
        min=1,
        envvar="CHARTER_WORKER_CONCURRENCY",
        help="Batches the automation worker fires at once (each its own transaction).",
    ),
]
CronInterval = Annotated[
    float,
    typer.Option("--cron-interval", min=0.1, help="Seconds between cron admission ticks."),
]


class LogLevelName(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LogFormatName(StrEnum):
    text = "text"
    json = "json"


LogLevel = Annotated[
    LogLevelName,
    typer.Option(
        "--log-level", envvar="CHARTER_LOG_LEVEL", case_sensitive=False,
        help="Lowest level logged to stderr.",
    ),
]  # fmt: skip
LogFormat = Annotated[
    LogFormatName,
    typer.Option(
        "--log-format", envvar="CHARTER_LOG_FORMAT",
        help="text: timestamp, level, logger, message; json: one object per line, with "
        "the request id, process, action, work or run id where known.",
    ),
]  # fmt: skip


def setup_telemetry(level: LogLevelName, log_format: LogFormatName, service: str) -> None:
    """What every long-running command does first: its log output from its options, and
    traces when the OTEL_* variables ask for them (charter.tracing)."""
    from charter.logs import configure_logging
    from charter.tracing import configure_tracing

    configure_logging(level.value, "json" if log_format is LogFormatName.json else "text")
    configure_tracing(service)
