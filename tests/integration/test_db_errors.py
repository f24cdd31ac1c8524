"""The one SQLSTATE table (charter.db.errors) on real PostgreSQL errors: text the database
cannot store is the client's `malformed` (400), anything unknown stays a 500."""

from __future__ import annotations

from typing import LiteralString

import psycopg
import pytest

from charter.core.errors import CharterError, Malformed
from charter.db.errors import translate

Conn = psycopg.Connection[tuple[object, ...]]


def _error(
    conn: Conn, sql: LiteralString, params: tuple[object, ...] | None = None
) -> psycopg.Error:
    try:
        conn.execute(sql, params)
    except psycopg.Error as exc:
        conn.rollback()
        return exc
    raise AssertionError("the statement did not fail")


@pytest.mark.parametrize(
    ("sql", "params", "sqlstate"),
    [
        # psycopg itself refuses NUL in a text parameter, before sending: no SQLSTATE.
        ("SELECT %s::text", ("a\x00b",), None),
        # jsonb cannot hold \u0000: untranslatable_character.
        ("SELECT %s::jsonb", ('{"name": "a\\u0000b"}',), "22P05"),
        # An invalid UTF-8 byte sequence: character_not_in_repertoire.
        ("SELECT convert_from('\\xff'::bytea, 'UTF8')", None, "22021"),
    ],
)
def test_text_the_database_cannot_store_is_malformed(
    conn: Conn, sql: LiteralString, params: tuple[object, ...] | None, sqlstate: str | None
) -> None:
    exc = _error(conn, sql, params)
    assert exc.sqlstate == sqlstate
    translated = translate(exc)
    assert isinstance(translated, Malformed)
    assert translated.http_status == 400
    assert "cannot store" in translated.message


def test_an_unknown_database_error_is_still_a_500(conn: Conn) -> None:
    translated = translate(_error(conn, "SELECT 1 / 0"))
    assert type(translated) is CharterError
    assert translated.http_status == 500
    assert translated.context["sqlstate"] == "22012"
