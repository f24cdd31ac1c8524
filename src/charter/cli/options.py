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
        help="How long a worker's claim on a work row holds before another worker may "
        "take it over (a crashed worker's rows wait this long).",
    ),
]
Concurrency = Annotated[
    int,
    typer.Option(
        "--concurrency",
        min=1,
        envvar="CHARTER_WORKER_CONCURRENCY",
        help="Work rows the automation worker fires at once.",
    ),
]
CronInterval = Annotated[
    float,
    typer.Option("--cron-interval", min=0.1, help="Seconds between cron admission ticks."),
]
