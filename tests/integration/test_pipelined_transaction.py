"""`pipelined_transaction`: commits what it holds, rolls back on error, and inside a
caller's transaction is only a savepoint of it (never the caller's COMMIT)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from charter.db.database import pipelined_transaction

Conn = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def scratch(database_url: str) -> Iterator[Conn]:
    with psycopg.connect(database_url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.pipelined_probe (n int)")
        conn.execute("TRUNCATE public.pipelined_probe")
        conn.commit()
        yield conn
        conn.rollback()
        conn.execute("DROP TABLE public.pipelined_probe")
        conn.commit()


def _count(database_url: str) -> int:
    with psycopg.connect(database_url) as other:
        row = other.execute("SELECT count(*) FROM public.pipelined_probe").fetchone()
    assert row is not None
    return int(row[0])


def test_it_commits_what_it_holds(scratch: Conn, database_url: str) -> None:
    with pipelined_transaction(scratch) as pipeline:
        scratch.execute("INSERT INTO public.pipelined_probe VALUES (1)")
        pipeline.sync()
        scratch.execute("INSERT INTO public.pipelined_probe VALUES (2)")
    assert scratch.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _count(database_url) == 2


def _insert_then(conn: Conn, statement: str) -> None:
    with pipelined_transaction(conn):
        conn.execute("INSERT INTO public.pipelined_probe VALUES (1)")
        conn.execute(statement)


def _insert_then_raise(conn: Conn) -> None:
    with pipelined_transaction(conn):
        conn.execute("INSERT INTO public.pipelined_probe VALUES (1)")
        raise RuntimeError("refused")


def test_an_error_rolls_it_back(scratch: Conn, database_url: str) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        _insert_then(scratch, "SELECT 1 / 0")
    assert scratch.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _count(database_url) == 0


def test_a_python_error_rolls_it_back(scratch: Conn, database_url: str) -> None:
    with pytest.raises(RuntimeError):
        _insert_then_raise(scratch)
    assert _count(database_url) == 0


def test_inside_a_transaction_it_is_a_savepoint(scratch: Conn, database_url: str) -> None:
    scratch.execute("INSERT INTO public.pipelined_probe VALUES (1)")  # the caller's
    with pipelined_transaction(scratch):
        scratch.execute("INSERT INTO public.pipelined_probe VALUES (2)")
    # Nothing committed yet: the caller's transaction is still open.
    assert scratch.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    assert _count(database_url) == 0
    scratch.rollback()
    assert _count(database_url) == 0
