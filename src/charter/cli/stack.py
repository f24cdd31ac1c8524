"""What `charter up` runs: in its own process the database (embedded unless
configured), the migrations, the automation key and the admin token; then, each in a
child process of its own (`charter.cli.children`), the API (what `charter serve` runs)
and the automation worker with cron admission (what `charter worker` runs), and the log
sequencer when a log is configured. Two processes use two cores: in one interpreter the
API's requests and the worker's firings took turns on one lock.

A child that exits by itself stops the others and `charter up` exits 1: a service
manager restarts the whole, and the operator reads why in the error line."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rich.console import Console

from charter.auth.tokens import create_token, find_token
from charter.cli.children import Family, clean_exit
from charter.cli.prefork import api_child, listen
from charter.cli.sequencer import background_sequencer
from charter.cli.serving import check_port_free, public_settings
from charter.cli.worker import child as worker_child
from charter.core.config import Settings, admin_token_path
from charter.core.ed25519 import write_private_file
from charter.core.errors import ConfigurationError
from charter.db.database import Database, Role, connect
from charter.db.embedded import database_url
from charter.db.migrate import migrate
from charter.firing.keys import ensure_automation_actor, key_file
from charter.firing.worker import WorkerSettings
from charter.tlog.metrics import FIGURES


def start(
    host: str,
    port: int,
    *,
    demo: bool,
    cron_interval: float,
    worker_settings: WorkerSettings | None = None,
    telemetry: Callable[[], None] | None = None,
    metrics_port: int | None = None,
    quiet_access: bool = False,
    exit_after_demo: bool = False,
) -> bool:
    """Run everything until SIGINT/SIGTERM (or, with `exit_after_demo`, until the demo is
    over), then stop it all cleanly; `telemetry` (picklable) sets up the logs of each child
    process (API, worker, log sequencer). False when the demo's process did not verify."""
    console = Console()
    settings = public_settings(Settings.from_env(), host, port)
    worker_settings = worker_settings or WorkerSettings()
    check_port_free(host, port)
    with database_url(settings) as url:
        where = "CHARTER_DATABASE_URL" if settings.database_url else f"embedded, {settings.pgdata}"
        console.print(f"[bold]database[/]  ready ({where})")
        with connect(url) as conn:
            applied = migrate(conn)
        console.print(f"[bold]schema[/]    {len(applied)} migration(s) applied, up to date")
        with background_sequencer(url, telemetry=telemetry) as origin:
            if origin is not None:
                console.print(f"[bold]log[/]       sequencing {origin}")
            verified = _run(
                console,
                settings,
                url,
                host,
                port,
                demo,
                cron_interval,
                worker_settings,
                telemetry,
                metrics_port,
                quiet_access,
                exit_after_demo,
            )
    console.print("stopped cleanly")
    return verified


def _run(
    console: Console,
    settings: Settings,
    url: str,
    host: str,
    port: int,
    demo: bool,
    cron_interval: float,
    worker_settings: WorkerSettings,
    telemetry: Callable[[], None] | None,
    metrics_port: int | None,
    quiet_access: bool,
    exit_after_demo: bool,
) -> bool:
    # The parent's own work is done before the children start: the automation actor's
    # key (the worker child reads it back, verified) and the admin token.
    with Database(url, max_size=1) as database:
        key = ensure_automation_actor(settings, database)
        secret_where = (
            "AUTOMATION_ACTOR_SK" if settings.automation_secret_key else key_file(settings)
        )
        console.print(f"[bold]automation[/] actor key {key.public_key_hex[:16]}… ({secret_where})")
        token_path = _ensure_admin_token(settings, database)
    console.print(f"[bold]admin token[/] {token_path}")
    listener = listen(host, port)
    parent = os.getpid()
    context = multiprocessing.get_context("spawn")
    api_telemetry = partial(_quiet_access, telemetry) if quiet_access else telemetry
    api = context.Process(
        target=api_child,
        args=(url, settings, listener, api_telemetry, FIGURES.shared, parent),
        name="api",
    )
    worker = context.Process(
        target=worker_child,
        args=(
            url,
            settings,
            worker_settings,
            cron_interval,
            ("127.0.0.1", metrics_port),
            telemetry,
            parent,
        ),
        name="worker",
    )
    family = Family([api, worker])
    try:
        family.start()
        api_url = f"http://{host}:{port}"
        console.print(f"[bold]api[/]       {api_url}  (process {api.pid}; Ctrl-C stops everything)")
        console.print(f"[bold]console[/]   {api_url}/console/  (sign in with the admin token)")
        metrics = f", metrics at http://127.0.0.1:{metrics_port}/metrics" if metrics_port else ""
        console.print(
            f"[bold]worker[/]    process {worker.pid} (lease {worker_settings.lease_seconds} s,"
            f" {worker_settings.concurrency} at once{metrics})",
            soft_wrap=True,
        )
        console.print(f"[bold]cron[/]      admission every {cron_interval:g} s (in the worker)")
        beside = None
        if demo:
            beside = _demo(api_url, settings, console, token_path, keep_running=not exit_after_demo)
        died = asyncio.run(family.run(beside, until_beside=exit_after_demo))
    finally:
        codes = family.stop()
        listener.close()
    if died is not None:
        raise ConfigurationError(died.message)
    if not all(clean_exit(code) for code in codes):
        raise ConfigurationError(
            f"a process did not stop cleanly (exit codes {', '.join(map(str, codes))})"
        )
    return family.beside_result is not False


async def _demo(
    api_url: str, settings: Settings, console: Console, token_path: Path, *, keep_running: bool
) -> bool:
    """The demo against the running API; whether its process verified."""
    from charter.demo import run_demo

    verified = bool(await run_demo(api_url, settings, console, token_path))
    if keep_running:
        console.print("Charter keeps running; Ctrl-C stops it.")
    return verified


def _quiet_access(telemetry: Callable[[], None] | None) -> None:
    """The demo's API process: its live view polls the API twice a second, and the
    access lines would bury the view (they are there at --log-level debug)."""
    if telemetry is not None:
        telemetry()
    logging.getLogger("charter.access").setLevel(logging.WARNING)


def _ensure_admin_token(settings: Settings, database: Database) -> Path:
    """An admin (`*`) token in $CHARTER_HOME/admin-token, mode 0600, that this database
    knows: made on first start, and made again when the file holds a token the database
    never issued or revoked (a new database under an old home)."""
    path = admin_token_path(settings)
    with database.connection(Role.ENGINE) as conn:
        if path.exists():
            known = find_token(conn, path.read_text().strip())
            if known is not None and known.revoked_at is None:
                return path
        token = create_token(conn, scopes=["*"], name="admin (charter up)", principal="admin")
    settings.home.mkdir(parents=True, exist_ok=True)
    write_private_file(path, (token + "\n").encode("ascii"), overwrite=True)
    return path
