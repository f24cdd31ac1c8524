"""`charter serve --workers N`: N API processes accepting on one listening socket.

One Python process runs its requests under one GIL, about one core, and most of an
event's cost on the API side is Python (HTTP, signature check, the engine's statements).
On a machine with cores to spare, N processes serve more. The parent binds the socket
once (a busy port fails before anything starts) and spawns the children — spawned, not
forked: each opens its own database pools, no connection crosses a fork — and the kernel
hands each new connection to one of them. SIGINT or SIGTERM to the parent stops every
child cleanly; a child that dies stops the others, and the parent then exits 1.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, MutableSequence

from charter.cli import loops
from charter.cli.children import die_with_parent
from charter.cli.stopping import stop_on_signals
from charter.core.config import Settings
from charter.core.errors import CharterError, ConfigurationError
from charter.db.database import Database
from charter.tlog.metrics import FIGURES

# Each child's pools: the API's request threads and its event-submission pool.
POOL_SIZE = 12


def serve_workers(
    url: str,
    settings: Settings,
    host: str,
    port: int,
    workers: int,
    telemetry: Callable[[], None] | None = None,
) -> None:
    """Run `workers` API processes until a signal; ConfigurationError if one of them
    stopped by itself or did not stop cleanly."""
    listener = listen(host, port)
    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(
            target=api_child,
            args=(url, settings, listener, telemetry, FIGURES.shared, os.getpid()),
            name=f"charter-api-{n}",
            daemon=False,
        )
        for n in range(1, workers + 1)
    ]
    stop = threading.Event()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stop_on_signals(stop)
    try:
        for child in children:
            child.start()
        while not stop.wait(0.2):
            if any(not child.is_alive() for child in children):
                break
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()  # SIGTERM: the child's own handler stops it cleanly
        for child in children:
            child.join(60)
            if child.is_alive():
                child.kill()
                child.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        listener.close()
    codes = [child.exitcode for child in children]
    # -SIGTERM: stopped by our SIGTERM before it served (its handler is set only then).
    if not stop.is_set() or any(code not in (0, -signal.SIGTERM) for code in codes):
        raise ConfigurationError(
            f"an API process stopped unexpectedly (exit codes {', '.join(map(str, codes))})"
        )


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP said outright: asyncio sets TCP_NODELAY only on sockets whose protocol
    # says TCP, and without it every answer waits out the client's delayed ACK (40 ms).
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(2048)  # uvicorn's default backlog
    listener.set_inheritable(True)
    return listener


def api_child(
    url: str,
    settings: Settings,
    listener: socket.socket,
    telemetry: Callable[[], None] | None = None,
    log_figures: MutableSequence[float] | None = None,
    parent: int | None = None,
) -> None:
    """One API process on the shared socket, until SIGTERM (the parent's, which relays its
    own SIGINT: a Ctrl-C reaching the whole group mid-startup must not crash a child) or
    the parent's death."""
    if parent is not None:
        die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if telemetry is not None:
        telemetry()  # a spawned process starts with the default logging: set ours up
    if log_figures is not None:  # the parent's log sequencer: its figures on our /metrics
        FIGURES.share(log_figures)
    # Imported here, in the child: the parent never loads the app.
    from charter.cli.api_server import api_server, until_signal
    from charter.engine.process_event import Engine

    try:
        with Database(url, max_size=POOL_SIZE) as database:
            engine = Engine.from_settings(database, settings)
            server = api_server(database, engine, settings, *listener.getsockname()[:2])
            loops.run(until_signal(server, [listener], (signal.SIGTERM,)))
    except CharterError as exc:
        print(f"error: {' '.join(exc.message.split())}", file=sys.stderr)
        sys.exit(1)
