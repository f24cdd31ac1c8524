"""Charter's own PostgreSQL, from the `pgserver` package, when no URL is configured.

pgserver keeps the server in `CHARTER_HOME/pgdata`, reuses one that is already running
there (another `charter` process started it) and counts its users across processes: the
last one to let go stops it cleanly (`pg_ctl stop`, fast mode).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from charter.core.config import Settings
from charter.core.errors import ConfigurationError, DatabaseUnavailable
from charter.db.queries import query

DATABASE_NAME = "charter"
log = logging.getLogger(__name__)


class EmbeddedServer:
    """A running embedded PostgreSQL and the Charter database inside it."""

    def __init__(self, pgdata: Path, *, stop_on_close: bool = True) -> None:
        pgdata.mkdir(parents=True, exist_ok=True)
        self.pgdata = pgdata
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pgserver warns about XDG_RUNTIME_DIR
            try:
                from pgserver.postgres_server import get_server
            except ImportError as exc:  # no wheel for this platform
                raise ConfigurationError(
                    "no CHARTER_DATABASE_URL is set and the embedded server (pgserver) is not "
                    f"available here: {exc}"
                ) from None
            try:
                self._server: Any = get_server(
                    pgdata, cleanup_mode="stop" if stop_on_close else None
                )
            except Exception as exc:
                raise DatabaseUnavailable(
                    f"the embedded PostgreSQL in {pgdata} did not start: {exc} "
                    f"(see {pgdata / 'log'})"
                ) from exc
        self._ensure_database()

    @property
    def pid(self) -> int | None:
        """The postmaster's process id (the same for every user of this data directory)."""
        pid = self._server.get_pid()
        return int(pid) if pid is not None else None

    @property
    def admin_url(self) -> str:
        return str(self._server.get_uri())

    @property
    def url(self) -> str:
        """The URL of the Charter database in this server."""
        return make_conninfo(self.admin_url, dbname=DATABASE_NAME)

    def _ensure_database(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            row = conn.execute(query("database_exists"), {"name": DATABASE_NAME}).fetchone()
            if not (row and row[0]):
                # Another process may create it first; that is fine.
                with suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(query("create_charter_database"))

    def close(self) -> None:
        """Let go of the server; the last user stops it."""
        self._server.cleanup()


@contextmanager
def database_url(settings: Settings) -> Iterator[str]:
    """The database to use: `CHARTER_DATABASE_URL`, or the embedded server for its lifetime."""
    if settings.database_url:
        yield settings.database_url
        return
    server = EmbeddedServer(settings.pgdata)
    log.info("embedded PostgreSQL ready in %s", settings.pgdata)
    try:
        yield server.url
    finally:
        server.close()
