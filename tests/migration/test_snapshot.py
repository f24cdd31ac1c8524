"""Migrating from zero reproduces the committed schema snapshot."""

from __future__ import annotations

import difflib

from charter.db.database import connect
from charter.db.migrate import migrate
from charter.db.snapshot import committed_snapshot, render_schema


def test_migrating_from_zero_reproduces_the_snapshot(empty_database_url: str) -> None:
    with connect(empty_database_url) as conn:
        migrate(conn)
        conn.commit()
        rendered = render_schema(conn)
    committed = committed_snapshot()
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            rendered.splitlines(keepends=True),
            "schema.snapshot.sql (committed)",
            "migrated from zero",
        )
    )
    assert rendered == committed, (
        "the schema differs from src/charter/sql/schema.snapshot.sql; if the change is "
        "intended, regenerate it with `charter db schema > src/charter/sql/schema.snapshot.sql`"
        f"\n{diff}"
    )
