"""Connections to one Charter database, each bound to the role of its component.

Every component works under its own role (`SET ROLE` on the connecting user), so the
privileges of docs/architecture.md are real in every mode, embedded or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from enum import StrEnum
from threading import Lock

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from charter.core.errors import DatabaseUnavailable
from charter.db.errors import translated

SCHEMA = "charter"


class Role(StrEnum):
    """The database roles of docs/architecture.md"""

    ENGINE = "charter_engine"
    WORKER = "charter_worker"
    READER = "charter_reader"
    SEQUENCER = "charter_sequencer"


def conninfo(url: str, *, application_name: str = "charter") -> str:
    """The connection string for `url` with Charter's schema on the search path."""
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise DatabaseUnavailable(f"invalid database URL: {exc}") from None
    return make_conninfo(
        url, options=f"-c search_path={SCHEMA},public", application_name=application_name
    )


Conn = psycopg.Connection[tuple[object, ...]]


def act_as(conn: Conn, role: Role) -> None:
    """Work as `role` until the transaction (or savepoint) ends: one transaction may hold
    the steps of several components, each under its own privileges."""
    conn.execute(_SET_LOCAL_ROLE[role])


_SET_LOCAL_ROLE = {
    role: sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role.value)) for role in Role
}


# The outermost pipeline's `sync` (psycopg's Pipeline.sync), for `answered`.
Sync = Callable[[], None]


@contextmanager
def answered(conn: Conn, sync: Sync | None) -> Iterator[None]:
    """The statements run inside are sent and answered as complete requests when the
    block exits (they end with a Sync); read their cursors after it.

    In pipeline mode a plain fetch only asks the server to flush; and leaving a nested
    pipeline block sends a Sync and then, often, one more flush request. Either way the
    server's last message is not a Sync: it never learns that the request is over, and
    does not arm `idle_in_transaction_session_timeout` — a client paused then (SIGSTOP, a
    stalled VM) would hold its locks for good. `Pipeline.sync()` waits for every answer
    and sends nothing after the Sync, so every read of a transaction that goes on to
    work in Python goes through here with the outermost pipeline's `sync`. Outside
    pipeline mode every statement is a complete request already."""
    if sync is not None:
        yield
        sync()
    elif conn.pgconn.pipeline_status:
        with conn.pipeline():  # in a pipeline whose sync we were not given: answered,
            yield  # but possibly not armed
    else:
        yield


@contextmanager
def pipelined_transaction(conn: Conn) -> Iterator[psycopg.Pipeline]:
    """One transaction in pipeline mode that costs no round trip of its own.

    `conn.transaction()` inside a pipeline opens nested pipeline blocks, each of which
    waits for the server when it opens or closes: one event's transaction would wait
    four times (BEGIN, the reads, the writes, the COMMIT) where two are needed.
    Here BEGIN travels with the first statement (psycopg sends it unasked
    outside autocommit) and COMMIT with the last writes, answered by one Sync, which is
    also the server's last message (see `answered`). Use the pipeline's `sync` for the
    reads whose results the transaction needs; savepoints inside still work
    (`conn.transaction()` within an open transaction is a savepoint). Entered inside an
    open transaction, it is a savepoint of that transaction, as `conn.transaction()` is.
    """
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        # Inside the caller's transaction: a savepoint, never the caller's COMMIT.
        with conn.pipeline() as pipeline, conn.transaction():
            yield pipeline
        return
    try:
        with conn.pipeline() as pipeline:
            yield pipeline
            conn.commit()
    except BaseException:
        # Rolled back once the pipeline has closed: a ROLLBACK queued in a pipeline that
        # an error aborted could itself fail and leave the session in a failed
        # transaction (seen under load). If the connection is gone the pool discards
        # it; the first error tells why.
        with suppress(psycopg.Error):
            conn.rollback()
        raise


def _assume(conn: psycopg.Connection[object], role: Role | None) -> None:
    if role is not None:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role.value)))


def connect(
    url: str,
    role: Role | None = None,
    *,
    autocommit: bool = False,
    application_name: str = "charter",
    connect_timeout: int = 10,
) -> psycopg.Connection[tuple[object, ...]]:
    """A direct connection (migrations, LISTEN); `role=None` keeps the connecting user."""
    with translated():
        conn = psycopg.connect(
            conninfo(url, application_name=application_name),
            autocommit=True,
            connect_timeout=connect_timeout,
        )
        try:
            _assume(conn, role)
            conn.autocommit = autocommit
        except BaseException:
            conn.close()
            raise
    return conn


class Database:
    """One pool per role, opened on first use."""

    def __init__(self, url: str, *, max_size: int = 8, application_name: str = "charter"):
        self.url = url
        self._conninfo = conninfo(url, application_name=application_name)
        self._max_size = max_size
        self._pools: dict[Role, ConnectionPool] = {}
        self._lock = Lock()

    @property
    def max_size(self) -> int:
        """The most connections each role's pool opens."""
        return self._max_size

    def pool(self, role: Role) -> ConnectionPool:
        with self._lock:
            if role not in self._pools:

                def configure(conn: psycopg.Connection[tuple[object, ...]]) -> None:
                    _assume(conn, role)
                    conn.commit()

                pool = ConnectionPool(
                    self._conninfo,
                    min_size=1,
                    max_size=self._max_size,
                    configure=configure,
                    name=f"charter-{role.name.lower()}",
                    open=False,
                )
                try:
                    pool.open(wait=True, timeout=15)
                except PoolTimeout:
                    pool.close()
                    raise DatabaseUnavailable(f"cannot connect to the database as {role}") from None
                self._pools[role] = pool
            return self._pools[role]

    @contextmanager
    def connection(self, role: Role) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        """A pooled connection working as `role`; database errors become Charter errors."""
        with translated():
            try:
                with self.pool(role).connection(timeout=30) as conn:
                    yield conn
            except PoolTimeout:
                raise DatabaseUnavailable("no database connection became free in 30 s") from None

    def pool_stats(self) -> dict[str, dict[str, int]]:
        """psycopg_pool's figures (pool_size, pool_available, requests_waiting, ...) of
        each pool opened so far, by role name."""
        with self._lock:
            pools = dict(self._pools)
        return {role.name.lower(): pool.get_stats() for role, pool in pools.items()}

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
