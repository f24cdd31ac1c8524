"""`charter worker`: what `charter up` runs beside the API — the automation worker and
cron admission — as a process of its own (`charter serve` is the other half)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer
from prometheus_client import start_http_server
from rich.console import Console

from charter.automations.admission import CronAdmission
from charter.cli import loops
from charter.cli.children import die_with_parent
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
from charter.core.config import Settings
from charter.core.errors import CharterError, ConfigurationError
from charter.core.metrics import REGISTRY
from charter.db.database import Database
from charter.db.embedded import database_url
from charter.engine.process_event import Engine
from charter.firing.keys import verified_secret
from charter.firing.worker import AutomationWorker, WorkerSettings


def worker(
    worker_id: str = typer.Option(None, help="Name of this worker (default host:pid:random)."),
    lease_seconds: LeaseSeconds = DEFAULT_WORKER.lease_seconds,
    batch_size: int = typer.Option(
        DEFAULT_WORKER.batch_size, min=1, help="Rows claimed, fired and recorded per transaction."
    ),
    concurrency: Concurrency = DEFAULT_WORKER.concurrency,
    sweep_seconds: float = typer.Option(
        DEFAULT_WORKER.sweep_seconds, min=1.0, help="Safety sweep interval."
    ),
    cron: bool = typer.Option(
        True,
        "--cron/--no-cron",
        help="Also admit runs of due schedule triggers (safe in any number of workers: "
        "each due occurrence is admitted once).",
    ),
    cron_interval: CronInterval = 5.0,
    metrics_port: int | None = typer.Option(
        None,
        "--metrics-port",
        min=1,
        max=65535,
        envvar="CHARTER_WORKER_METRICS_PORT",
        help="Serve this worker's Prometheus metrics (fires, firing lag, lease reclaims, cron, "
        "the process) at http://HOST:PORT/metrics; off unless given.",
    ),
    metrics_host: str = typer.Option(
        "127.0.0.1", "--metrics-host", help="Address the metrics endpoint listens on."
    ),
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Same as --log-level debug."),
) -> None:
    """Fire scheduled and automatic actions as the automation actor, and admit cron runs,
    until SIGTERM/Ctrl-C.

    Needs AUTOMATION_ACTOR_SK (or the key file `charter up` made in CHARTER_HOME) that
    matches the automation actor's registered public key.
    """
    setup_telemetry(LogLevelName.debug if verbose else log_level, log_format, "charter-worker")
    settings = Settings.from_env()
    console = Console(stderr=True)
    # Connections: the concurrent firings, a pass's bookkeeping, cron admission.
    with (
        database_url(settings) as url,
        Database(url, max_size=concurrency + 3) as database,
    ):
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
        crons = CronAdmission(database, interval=cron_interval) if cron else None
        admission = f", cron admission every {cron_interval:g} s" if crons else ""
        with serving_metrics(metrics_host, metrics_port) as metrics_url:
            exposed = f", metrics at {metrics_url}" if metrics_url else ""
            console.print(
                f"worker {automation.worker_id} started (lease {lease_seconds} s, "
                f"{concurrency} at once{admission}{exposed})",
                soft_wrap=True,  # one line, however narrow the terminal: logs are grepped
            )
            loops.run(_run(automation, crons))
        console.print(
            f"worker {automation.worker_id} stopped; fired {automation.fired_total}",
            soft_wrap=True,
        )


@contextmanager
def serving_metrics(host: str, port: int | None) -> Iterator[str | None]:
    """The process's metrics over HTTP (prometheus_client's own small server, in a
    thread) while the block runs; nothing when no port is given."""
    if port is None:
        yield None
        return
    try:
        server, thread = start_http_server(port, host, registry=REGISTRY)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve metrics on {host}:{port} ({exc.strerror}); choose another --metrics-port"
        ) from None
    try:
        yield f"http://{host}:{port}/metrics"
    finally:
        server.shutdown()
        thread.join(5)


def child(
    url: str,
    settings: Settings,
    worker_settings: WorkerSettings,
    cron_interval: float,
    metrics: tuple[str, int | None],
    telemetry: Callable[[], None] | None,
    parent: int,
) -> None:
    """`charter up`'s worker process: what `charter worker` runs, until SIGTERM (the
    parent's) or the parent's death."""
    die_with_parent(parent)
    if telemetry is not None:
        telemetry()  # a spawned process starts with the default logging: set ours up
    try:
        # Connections: the concurrent firings, a pass's bookkeeping, cron admission.
        with Database(url, max_size=worker_settings.concurrency + 3) as database:
            automation = AutomationWorker(
                database,
                url,
                verified_secret(settings, database),
                engine=Engine.from_settings(database, settings),
                settings=worker_settings,
            )
            with serving_metrics(*metrics):
                crons = CronAdmission(database, interval=cron_interval)
                # SIGTERM only: a Ctrl-C is the parent's to relay.
                loops.run(_run(automation, crons, (signal.SIGTERM,)))
    except CharterError as exc:
        print(f"error: {' '.join(exc.message.split())}", file=sys.stderr)
        sys.exit(1)


async def _run(
    automation: AutomationWorker,
    crons: CronAdmission | None,
    signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
) -> None:
    def stop() -> None:
        automation.stop()
        if crons is not None:
            crons.stop()

    loop = asyncio.get_running_loop()
    for signum in signals:
        loop.add_signal_handler(signum, stop)
    tasks = {asyncio.create_task(automation.run(), name="charter-worker")}
    if crons is not None:
        tasks.add(asyncio.create_task(crons.run(), name="charter-cron"))
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # one that died stops the other, loudly
    finally:
        stop()
        await asyncio.gather(*tasks, return_exceptions=True)
