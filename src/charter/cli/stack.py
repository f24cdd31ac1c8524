"""What `charter up` runs: database, migrations, automation key, API, worker and cron
admission in one process. Imported only when `charter up` runs (FastAPI and uvicorn are
slow to import, and every other command would pay for them)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from rich.console import Console

from charter.auth.tokens import create_token, find_token
from charter.automation.keys import ensure_automation_actor, key_file
from charter.automation.worker import AutomationWorker, WorkerSettings
from charter.automations.admission import CronAdmission
from charter.cli.serving import api_server, check_port_free, public_settings
from charter.core.config import Settings, admin_token_path
from charter.core.ed25519 import write_private_file
from charter.db.database import Database, Role, connect
from charter.db.embedded import database_url
from charter.db.migrate import migrate
from charter.engine.process_event import Engine
from charter.tlog.background import background_sequencer


def start(
    host: str,
    port: int,
    *,
    demo: bool,
    cron_interval: float,
    worker_settings: WorkerSettings | None = None,
    telemetry: Callable[[], None] | None = None,
    exit_after_demo: bool = False,
) -> bool:
    """Run everything until SIGINT/SIGTERM (or, with `exit_after_demo`, until the demo is
    over), then stop it all cleanly; `telemetry` (picklable) sets up the logs of the log
    sequencer's process. False when the demo's process did not verify."""
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
            ok = _run(
                console,
                settings,
                url,
                host,
                port,
                demo=demo or exit_after_demo,
                exit_after_demo=exit_after_demo,
                cron_interval=cron_interval,
                worker_settings=worker_settings,
            )
    console.print("stopped cleanly")
    return ok


def _run(
    console: Console,
    settings: Settings,
    url: str,
    host: str,
    port: int,
    *,
    demo: bool,
    exit_after_demo: bool,
    cron_interval: float,
    worker_settings: WorkerSettings,
) -> bool:
    # The API's threads, the worker's concurrent firings, cron admission.
    with Database(url, max_size=max(12, worker_settings.concurrency + 6)) as database:
        key = ensure_automation_actor(settings, database)
        secret_where = (
            "AUTOMATION_ACTOR_SK" if settings.automation_secret_key else key_file(settings)
        )
        console.print(f"[bold]automation[/] actor key {key.public_key_hex[:16]}… ({secret_where})")
        token_path = _ensure_admin_token(settings, database)
        console.print(f"[bold]admin token[/] {token_path}")
        engine = Engine.from_settings(database, settings)
        worker = AutomationWorker(database, url, key, engine=engine, settings=worker_settings)
        server = api_server(database, engine, settings, host, port)
        api_url = f"http://{host}:{port}"
        console.print(f"[bold]api[/]       {api_url}  (Ctrl-C stops everything)")
        console.print(f"[bold]console[/]   {api_url}/console/  (sign in with the admin token)")
        console.print(
            f"[bold]worker[/]    {worker.worker_id} (lease {worker_settings.lease_seconds} s,"
            f" {worker_settings.concurrency} at once)"
        )
        crons = CronAdmission(database, interval=cron_interval)
        console.print(f"[bold]cron[/]      admission every {cron_interval:g} s")
        demo_url = api_url if demo else None
        return asyncio.run(
            _serve(
                server,
                worker,
                crons,
                demo_url=demo_url,
                exit_after_demo=exit_after_demo,
                settings=settings,
                console=console,
                token_path=token_path,
            )
        )


async def _serve(
    server: uvicorn.Server,
    worker: AutomationWorker,
    crons: CronAdmission,
    *,
    demo_url: str | None,
    settings: Settings,
    console: Console,
    token_path: Path,
    exit_after_demo: bool = False,
) -> bool:
    """Serve until a stop signal, a side task dies or (`exit_after_demo`) the demo is
    over; whether the demo's process verified (True without a demo)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    tasks: set[asyncio.Task[Any]] = {
        asyncio.create_task(server.serve(), name="charter-api"),
        asyncio.create_task(worker.run(), name="charter-worker"),
        # Admission only inserts runs; its ticks log their own failures and go on.
        asyncio.create_task(crons.run(), name="charter-cron"),
        asyncio.create_task(stop.wait(), name="charter-stop"),
    }
    if demo_url is not None:
        from charter.demo import run_demo

        tasks.add(
            asyncio.create_task(
                run_demo(demo_url, settings, console, token_path), name="charter-demo"
            )
        )
    verified = True
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.get_name() == "charter-demo" and not task.cancelled():
                verified = bool(task.result())
                if exit_after_demo:
                    break
                console.print("Charter keeps running; Ctrl-C stops it.")
                await stop.wait()  # the demo finished; keep serving until Ctrl-C
            elif task.get_name() != "charter-stop":
                task.result()  # a side task died: say why
    finally:
        stop.set()  # its waiting task is among those gathered below
        server.should_exit = True
        worker.stop()
        crons.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
    return verified


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
