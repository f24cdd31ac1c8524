"""Assertions for statements the database must refuse."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from charter.core.errors import CharterError
from charter.db.errors import translated

Conn = psycopg.Connection[tuple[object, ...]]


def refused(
    conn: Conn,
    error: type[CharterError],
    statement: str | sql.Composable,
    params: tuple[Any, ...] = (),
    *,
    role: str | None = None,
) -> CharterError:
    """Run `statement` (as `role`) in a savepoint; it must fail with `error`."""

    def attempt() -> None:
        with translated(), conn.transaction():
            if role is not None:
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            conn.execute(statement, params)  # type: ignore[arg-type]

    with pytest.raises(error) as info:
        attempt()
    return info.value


def allowed(
    conn: Conn, statement: str | sql.Composable, params: tuple[Any, ...] = (), *, role: str
) -> None:
    """Run `statement` as `role` in a savepoint that is kept; the role is reset after."""
    with translated(), conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
        conn.execute(statement, params)  # type: ignore[arg-type]
    conn.execute("RESET ROLE")
