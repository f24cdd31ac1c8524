"""The API server as `charter up` and `charter serve` run it. Imported only by them
(FastAPI and uvicorn are slow to import, and every other command would pay for them)."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from dataclasses import replace

from rich.console import Console

from charter.cli import loops
from charter.cli.api_server import api_server, until_signal
from charter.cli.prefork import POOL_SIZE, serve_workers
from charter.cli.sequencer import background_sequencer
from charter.core.config import Settings
from charter.core.errors import ConfigurationError
from charter.db.database import Database, connect
from charter.db.embedded import database_url
from charter.db.migrate import check_migrated
from charter.engine.process_event import Engine


def public_settings(settings: Settings, host: str, port: int) -> Settings:
    """Unless CHARTER_API_URL says otherwise, the public origin is where we listen:
    machines' DPoP proofs are bound to it."""
    if os.environ.get("CHARTER_API_URL"):
        return settings
    return replace(settings, api_url=f"http://{host}:{port}")


def check_port_free(host: str, port: int) -> None:
    """Fail with one clear line before any work if the address cannot be bound."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used: {exc}"
            raise ConfigurationError(
                f"{host}:{port} {reason}; choose another with --port"
            ) from None


def serve_api(
    host: str, port: int, workers: int = 1, telemetry: Callable[[], None] | None = None
) -> None:
    """`charter serve`: the API until SIGINT/SIGTERM, on a migrated database only; with
    `workers` > 1, that many processes share the port (`charter.cli.prefork`), each
    calling `telemetry` (picklable) first to set up its logs and traces."""
    console = Console()
    settings = public_settings(Settings.from_env(), host, port)
    check_port_free(host, port)
    with database_url(settings) as url:
        with connect(url) as conn:
            check_migrated(conn)
        where = "CHARTER_DATABASE_URL" if settings.database_url else f"embedded, {settings.pgdata}"
        console.print(f"[bold]database[/]  ready ({where}), schema up to date")
        with background_sequencer(url, telemetry=telemetry) as origin:
            if origin is not None:
                console.print(f"[bold]log[/]       sequencing {origin}")
            _serve_api(url, settings, console, host, port, workers, telemetry)
    console.print("stopped cleanly")


def _serve_api(
    url: str,
    settings: Settings,
    console: Console,
    host: str,
    port: int,
    workers: int,
    telemetry: Callable[[], None] | None,
) -> None:
    processes = f", {workers} processes" if workers > 1 else ""
    listening = (
        f"[bold]api[/]       http://{host}:{port}  (no worker, no cron admission{processes};"
        " Ctrl-C stops)"
    )
    if workers > 1:
        console.print(listening, soft_wrap=True)
        console.print(f"[bold]console[/]   http://{host}:{port}/console/")
        serve_workers(url, settings, host, port, workers, telemetry)
    else:
        with Database(url, max_size=POOL_SIZE) as database:
            engine = Engine.from_settings(database, settings)
            server = api_server(database, engine, settings, host, port)
            console.print(listening, soft_wrap=True)
            console.print(f"[bold]console[/]   http://{host}:{port}/console/")
            loops.run(until_signal(server))
