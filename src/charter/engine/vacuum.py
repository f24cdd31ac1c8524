"""VACUUM after an erasure: the erased texts leave the table pages as soon as PostgreSQL
can drop them, instead of whenever autovacuum comes by.

An erasure turns each disclosure text, and the process data that held its values, into
dead row versions; VACUUM frees them. It runs after the commit, off the request path (it
may take a while on a large `processes` table), as the connecting user, who owns the
tables (the component roles do not). Requests made while one runs are served by one more
run. It is best effort: the bytes may linger in free page space, WAL and backups until
those are overwritten or expire (docs/operations.md, "Erasure and copies").
"""

from __future__ import annotations

import logging
import threading

import psycopg

from charter.core.errors import CharterError
from charter.db.database import connect

log = logging.getLogger(__name__)

STATEMENT = "VACUUM (SKIP_LOCKED) charter.event_disclosures, charter.processes"


class Vacuum:
    """One background VACUUM at a time for a database, run again if asked meanwhile."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()
        self._wanted = False
        self._running: threading.Thread | None = None
        self.runs = 0  # VACUUMs completed, for tests and metrics

    def request(self) -> None:
        with self._lock:
            self._wanted = True
            if self._running is None:
                self._running = threading.Thread(
                    target=self._run, name="charter-vacuum", daemon=True
                )
                self._running.start()

    def wait(self, timeout: float) -> bool:
        """Whether the runs asked for so far are done within `timeout` seconds."""
        with self._lock:
            running = self._running
        if running is not None:
            running.join(timeout)
        with self._lock:
            return self._running is None

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._wanted:
                    self._running = None
                    return
                self._wanted = False
            try:
                with connect(self._url, autocommit=True, application_name="charter-vacuum") as conn:
                    conn.execute(STATEMENT)
                self.runs += 1
            except (psycopg.Error, CharterError) as exc:
                log.warning("VACUUM after an erasure failed: %s", exc)
