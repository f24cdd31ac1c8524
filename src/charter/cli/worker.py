"""`charter worker`: the automation worker on its own."""

from __future__ import annotations

import asyncio
import logging
import signal

import typer
from rich.console import Console

from charter.automation.keys import verified_secret
from charter.automation.worker import AutomationWorker, WorkerSettings
from charter.core.config import Settings
from charter.db.database import Database
from charter.db.embedded import database_url
from charter.engine.process_event import Engine


def worker(
    worker_id: str = typer.Option(None, help="Name of this worker (default host:pid:random)."),
    lease_seconds: int = typer.Option(
        60, min=5, help="How long a claim holds before others may take it."
    ),
    batch_size: int = typer.Option(100, min=1, help="Rows claimed per pass."),
    concurrency: int = typer.Option(8, min=1, help="Rows fired at once."),
    sweep_seconds: float = typer.Option(300.0, min=1.0, help="Safety sweep interval."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every pass."),
) -> None:
    """Fire scheduled and automatic actions as the automation actor until SIGTERM/Ctrl-C.

    Needs AUTOMATION_ACTOR_SK (or the key file `charter up` made in CHARTER_HOME) that
    matches the automation actor's registered public key.
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING)
    settings = Settings.from_env()
    console = Console(stderr=True)
    with database_url(settings) as url, Database(url, max_size=concurrency + 2) as database:
        key = verified_secret(settings, database)
        automation = AutomationWorker(
            database,
            url,
            key,
            engine=Engine.from_settings(database, settings),
            worker_id=worker_id,
            settings=WorkerSettings(
                lease_seconds=lease_seconds,
                batch_size=batch_size,
                concurrency=concurrency,
                sweep_seconds=sweep_seconds,
            ),
        )
        console.print(f"worker {automation.worker_id} started")
        asyncio.run(_run(automation))
        console.print(f"worker {automation.worker_id} stopped; fired {automation.fired_total}")


async def _run(automation: AutomationWorker) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, automation.stop)
    await automation.run()
