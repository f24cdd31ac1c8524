"""The embedded PostgreSQL: starts, is reused by a second process, stops cleanly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from charter.core.config import Settings
from charter.db.embedded import EmbeddedServer, database_url

REUSE_SCRIPT = """
import sys
from pathlib import Path
from charter.db.embedded import EmbeddedServer
server = EmbeddedServer(Path(sys.argv[1]))
print(server.pid)
server.close()
"""


@pytest.fixture
def short_home() -> Iterator[Path]:
    # Unix socket paths are limited to ~100 bytes: keep the data directory short.
    home = Path(f"/tmp/charter-test-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_embedded_server_lifecycle(short_home: Path) -> None:
    pgdata = short_home / "pgdata"
    server = EmbeddedServer(pgdata)
    try:
        pid = server.pid
        assert pid is not None
        assert psutil.pid_exists(pid)
        with psycopg.connect(server.url) as conn:
            row = conn.execute(
                "SELECT current_database(), pg_encoding_to_char(encoding) "
                "FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        assert row == ("charter", "UTF8")

        # A second process reuses the running server instead of starting its own,
        # and leaving does not stop it while this process still uses it.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        other = subprocess.run(
            [sys.executable, "-c", REUSE_SCRIPT, str(pgdata)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=True,
        )
        assert int(other.stdout.strip().splitlines()[-1]) == pid
        assert psutil.pid_exists(pid)
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.close()
    # The last user stopped it cleanly.
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(pid)
    assert not (pgdata / "postmaster.pid").exists()


def test_a_configured_url_is_used_as_is() -> None:
    settings = Settings(database_url="postgresql://example.invalid/db")
    with database_url(settings) as url:
        assert url == "postgresql://example.invalid/db"
