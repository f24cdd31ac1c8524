"""Throwaway databases for test runs: created and migrated, then dropped.

`charter workflows test` and the scenario fixture (charter.testing) run on one. Nothing
of it outlives the block that made it, whether the block ends normally, by an error or
by Ctrl-C: the database is dropped (`WITH (FORCE)` ends the sessions still on it) and a
server started for it is stopped and its directory removed.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from charter.db.database import connect
from charter.db.embedded import EmbeddedServer
from charter.db.errors import translated
from charter.db.migrate import migrate
from charter.db.queries import query

PREFIX = "charter_scratch"


@contextmanager
def throwaway_server() -> Iterator[str]:
    """An embedded PostgreSQL of its own in a temporary directory; yields its superuser
    URL. The user's own embedded server (`CHARTER_HOME`) is never touched."""
    with tempfile.TemporaryDirectory(prefix="charter-scratch-") as directory:
        server = EmbeddedServer(Path(directory) / "pgdata")
        try:
            yield server.admin_url
        finally:
            server.close()


@contextmanager
def scratch_server(admin_url: str | None) -> Iterator[str]:
    """The superuser URL to use: `admin_url` as given, or a throwaway embedded server's."""
    if admin_url:
        yield admin_url
        return
    with throwaway_server() as url:
        yield url


@contextmanager
def scratch_database(admin_url: str, *, prefix: str = PREFIX) -> Iterator[str]:
    """A migrated database of its own on the server `admin_url` names (a superuser URL);
    yields its URL and drops it afterwards."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    _admin(admin_url, "create_scratch_database", name)
    try:
        url = make_conninfo(admin_url, dbname=name)
        with connect(url) as conn:
            migrate(conn)
        yield url
    finally:
        _admin(admin_url, "drop_scratch_database", name)


def _admin(admin_url: str, name: str, database: str) -> None:
    statement = sql.SQL(query(name)).format(name=sql.Identifier(database))
    with translated(), psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)
