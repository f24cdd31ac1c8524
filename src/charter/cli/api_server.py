"""The API's uvicorn server, shared by `charter serve` (one process or a prefork family)
and `charter up`'s API child. Imported only where an API runs: FastAPI and uvicorn are
slow to import."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator

import uvicorn

from charter.api.app import create_app
from charter.api.state import Services
from charter.core.config import Settings
from charter.db.database import Database
from charter.engine.process_event import Engine


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
