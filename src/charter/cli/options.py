"""Options that several commands share, declared once so their names, bounds, environment
variables and help read the same in `charter up` and `charter worker`."""

from __future__ import annotations

from typing import Annotated

import typer

from charter.automation.worker import WorkerSettings

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
