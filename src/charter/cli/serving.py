"""The API server as `charter up` and `charter serve` run it. Imported only by them
(FastAPI and uvicorn are slow to import, and every other command would pay for them)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace

import uvicorn
from rich.console import Console

from charter.api.app import create_app
from charter.api.state import Services
from charter.cli import loops
from charter.cli.prefork import POOL_SIZE, serve_workers
from charter.core.config import Settings
from charter.core.errors import ConfigurationError
from charter.db.database import Database, connect
from charter.db.embedded import database_url
from charter.db.migrate import check_migrated
from charter.engine.process_event import Engine
from charter.tlog.background import background_sequencer


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: the command stops everything it runs
    together (uvicorn's would re-raise the signal after shutdown: no clean exit 0)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Waiting long-poll claims answer 204 now instead of holding the shutdown up.
        services = getattr(getattr(self.config.app, "state", None), "charter", None)
        if isinstance(services, Services):
            services.wakeups.drain()
        await super().shutdown(sockets)


def public_settings(settings: Settings, host: str, port: int) -> Settings:
    """Unless CHARTER_API_URL says otherwise, the public origin is where we listen:
    machines' DPoP proofs are bound to it."""
    if os.environ.get("CHARTER_API_URL"):
        return settings
    return replace(settings, api_url=f"http://{host}:{port}")


def api_server(
    database: Database, engine: Engine, settings: Settings, host: str, port: int
) -> QuietServer:
    app = create_app(database, engine=engine, settings=settings)
    # Logging is the command's (charter.logs): uvicorn neither configures it nor writes
    # its own access log.
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, log_level=None, access_log=False
    )
    return QuietServer(config)


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


async def until_signal(
    server: uvicorn.Server,
    sockets: list[socket.socket] | None = None,
    signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
) -> None:
    """Serve (on `sockets`, if given: a listening socket shared with other processes)
    until one of `signals`."""

    def stop() -> None:
        server.should_exit = True

    loop = asyncio.get_running_loop()
    for signum in signals:
        loop.add_signal_handler(signum, stop)
    await server.serve(sockets)
