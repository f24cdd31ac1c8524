"""Real-PostgreSQL fixtures at two speeds: a migrated template database built once per session,
cloned per module.

The server is the one at 127.0.0.1:5432 when it answers (or CHARTER_TEST_ADMIN_URL),
otherwise an embedded one started for the session. A template database is migrated
once per session and cloned per test module; `conn` is a transaction rolled back after
each test.
"""

from __future__ import annotations

import faulthandler
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings
from psycopg import sql
from psycopg.conninfo import make_conninfo

from charter.db.database import Database, connect
from charter.db.embedded import EmbeddedServer
from charter.db.migrate import migrate

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

# Properties are about correctness; a busy machine must not turn slowness into failures.
settings.register_profile("charter", deadline=None)
settings.load_profile("charter")
Conn = psycopg.Connection[tuple[object, ...]]


def _reachable(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A superuser URL to a maintenance database on the server tests use."""
    url = os.environ.get("CHARTER_TEST_ADMIN_URL", DEFAULT_ADMIN_URL)
    if _reachable(url):
        yield url
        return
    server = EmbeddedServer(tmp_path_factory.mktemp("pg") / "pgdata")
    try:
        yield server.admin_url
    finally:
        server.close()


def database_url_for(admin_url: str, name: str) -> str:
    return make_conninfo(admin_url, dbname=name)


def create_database(admin_url: str, name: str, template: str = "template0") -> str:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return database_url_for(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def unique_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"


@pytest.fixture(scope="session")
def template_database(pg_admin_url: str) -> Iterator[str]:
    """A migrated database, built once per session, that modules clone."""
    name = unique_name("charter_tpl")
    url = create_database(pg_admin_url, name)
    try:
        with connect(url) as conn:
            migrate(conn)
        yield name
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def database_url(
    pg_admin_url: str, template_database: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A migrated database of this test module's own, dropped afterwards."""
    module = re.sub(r"[^a-z0-9]", "", Path(str(request.module.__file__)).stem.lower())[:20]
    name = unique_name(f"charter_t_{module}")
    url = create_database(pg_admin_url, name, template=template_database)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture
def empty_database_url(pg_admin_url: str) -> Iterator[str]:
    """A database with nothing in it, for migration tests."""
    name = unique_name("charter_empty")
    url = create_database(pg_admin_url, name)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def database(database_url: str) -> Iterator[Database]:
    with Database(database_url, max_size=4) as db:
        yield db


@pytest.fixture
def conn(database_url: str) -> Iterator[Conn]:
    """An owner (superuser) connection inside a transaction that is rolled back."""
    with connect(database_url) as connection:
        try:
            yield connection
        finally:
            connection.rollback()


# A thread a failed test left blocked would otherwise keep the interpreter (and CI)
# waiting at exit long after the report was printed: give such threads a minute, then
# name them and end the run as failed.
_LINGER_SECONDS = 60.0


def pytest_unconfigure(config: pytest.Config) -> None:
    deadline = time.monotonic() + _LINGER_SECONDS
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
    lingering = [t for t in threading.enumerate() if t.is_alive() and not t.daemon]
    lingering = [t for t in lingering if t is not threading.main_thread()]
    if not lingering:
        return
    names = ", ".join(t.name for t in lingering)
    sys.stderr.write(f"\nthreads still running {_LINGER_SECONDS:.0f} s after the tests: {names}\n")
    faulthandler.dump_traceback(all_threads=True)
    sys.stderr.flush()
    os._exit(1)
