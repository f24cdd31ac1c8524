"""`charter up`: the database, its migrations and the API in one process."""

from __future__ import annotations

import errno
import signal
import socket
from types import FrameType

import typer
import uvicorn
from rich.console import Console

from charter.api.app import create_app
from charter.core.config import DEFAULT_HOST, DEFAULT_PORT, Settings
from charter.core.errors import ConfigurationError
from charter.db.database import Database, connect
from charter.db.embedded import database_url
from charter.db.migrate import migrate


def up(
    host: str = typer.Option(DEFAULT_HOST, help="Address to listen on."),
    port: int = typer.Option(DEFAULT_PORT, help="Port to listen on."),
) -> None:
    """Start Charter: database (embedded unless CHARTER_DATABASE_URL is set), migrations, API."""
    console = Console()
    settings = Settings.from_env()
    _check_port_free(host, port)
    with database_url(settings) as url:
        where = "CHARTER_DATABASE_URL" if settings.database_url else f"embedded, {settings.pgdata}"
        console.print(f"[bold]database[/]  ready ({where})")
        with connect(url) as conn:
            applied = migrate(conn)
        console.print(f"[bold]schema[/]    {len(applied)} migration(s) applied, up to date")
        with Database(url) as database:
            server = uvicorn.Server(
                uvicorn.Config(create_app(database), host=host, port=port, log_level="warning")
            )
            console.print(f"[bold]api[/]       http://{host}:{port}  (Ctrl-C stops everything)")
            _run_until_signalled(server)
    console.print("stopped cleanly")


class _StopRequested(Exception):
    """SIGTERM arrived: leave through the normal exits so the database stops cleanly."""


def _raise_stop(_signum: int, _frame: FrameType | None) -> None:
    raise _StopRequested


def _run_until_signalled(server: uvicorn.Server) -> None:
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal with the
    # previous handlers restored; turn both into exceptions we catch here, so the
    # `with` blocks above close the pools and stop the embedded server.
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        server.run()
    except (KeyboardInterrupt, _StopRequested):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used: {exc}"
            raise ConfigurationError(
                f"{host}:{port} {reason}; choose another with --port"
            ) from None
