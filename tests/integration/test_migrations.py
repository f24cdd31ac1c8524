"""Forward-only migrations: idempotent, safe under concurrency, listed by status."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from charter.core.errors import MigrationError
from charter.db.database import connect
from charter.db.migrate import (
    REWORDED,
    available_migrations,
    migrate,
    statements_checksum,
    status,
)
from charter.db.snapshot import render_schema


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in available_migrations()]
    assert versions == list(range(1, len(versions) + 1))


def test_migrating_twice_is_a_no_op(empty_database_url: str) -> None:
    with connect(empty_database_url) as conn:
        first = migrate(conn)
        before = render_schema(conn)
        second = migrate(conn)
        after = render_schema(conn)
        recorded = conn.execute("SELECT count(*) FROM charter.schema_migrations").fetchone()
    assert [m.version for m in first] == [m.version for m in available_migrations()]
    assert second == []
    assert before == after
    assert recorded == (len(first),)


def test_status_lists_pending_then_applied(empty_database_url: str) -> None:
    with connect(empty_database_url) as conn:
        pending = status(conn)
        assert all(s.applied_at is None for s in pending)
        migrate(conn)
        applied = status(conn)
    assert [s.version for s in pending] == [s.version for s in applied]
    assert all(s.applied_at is not None and s.checksum_matches for s in applied)


def test_status_flags_a_changed_migration(empty_database_url: str) -> None:
    with connect(empty_database_url) as conn:
        migrate(conn)
        conn.execute(
            "UPDATE charter.schema_migrations SET checksum = repeat('0', 64) WHERE version = 2"
        )
        conn.execute(
            "INSERT INTO charter.schema_migrations (version, name, checksum) "
            "VALUES (9999, 'from_the_future', repeat('1', 64))"
        )
        rows = {s.version: s for s in status(conn)}
    assert rows[2].checksum_matches is False
    assert rows[1].checksum_matches is True
    assert rows[9999].known is False


def test_a_failing_migration_leaves_no_record(empty_database_url: str) -> None:
    with connect(empty_database_url) as conn:
        conn.execute("CREATE SCHEMA charter")
        conn.execute("CREATE TABLE charter.actors (id int)")  # 0002 will clash with it
        conn.commit()
        with pytest.raises(MigrationError, match="0002_actors_and_registry"):
            migrate(conn)
        conn.rollback()
        versions = conn.execute("SELECT version FROM charter.schema_migrations").fetchall()
    assert versions == [(1,)]


def test_four_processes_migrating_at_once(empty_database_url: str) -> None:
    """Real processes race; each migration is applied exactly once."""
    script = (
        "import sys\n"
        "from charter.db.database import connect\n"
        "from charter.db.migrate import migrate\n"
        "with connect(sys.argv[1]) as conn:\n"
        "    print(len(migrate(conn)))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script, empty_database_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    results = [worker.communicate(timeout=120) for worker in workers]
    assert [w.returncode for w in workers] == [0, 0, 0, 0], results
    applied = sorted(int(out.strip()) for out, _ in results)
    total = len(available_migrations())
    assert sum(applied) == total  # every migration applied by exactly one process
    with connect(empty_database_url) as conn:
        rows = conn.execute("SELECT version FROM charter.schema_migrations ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == list(range(1, total + 1))


def test_a_database_migrated_before_a_comment_was_reworded_still_matches(
    empty_database_url: str,
) -> None:
    """A deployment recorded the checksum its release shipped; rewording a comment since
    must not make `db status` report the migration changed."""
    version = min(REWORDED)
    released, _ = REWORDED[version]
    with connect(empty_database_url) as conn:
        migrate(conn)
        conn.execute(
            "UPDATE charter.schema_migrations SET checksum = %s WHERE version = %s",
            (released, version),
        )
        rows = {s.version: s for s in status(conn)}
    assert rows[version].checksum_matches is True


def test_every_reworded_migration_kept_its_statements() -> None:
    shipped = {m.version: m for m in available_migrations()}
    for version, (released, statements) in REWORDED.items():
        migration = shipped[version]
        assert migration.checksum != released, f"{version:04d} was not reworded: drop it"
        assert statements_checksum(migration.sql) == statements, (
            f"migration {version:04d} changed more than its comments since it was released"
        )
