"""The app behind a real uvicorn server on a free port, in a thread of the test process.

For what an in-process transport cannot show: chunked uploads over a socket, what an
ordinary HTTP client sees when the server answers before reading the whole body.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def live_server(app: ASGIApp, *, timeout: float = 30, port: int | None = None) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (on `port`, else a free one) until the block ends; yields
    the base URL."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
