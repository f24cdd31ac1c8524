"""Forward-only, versioned migrations (Graphile's guard).

Each migration runs in its own transaction that first takes an advisory lock and inserts
its row into `schema_migrations`; a row that is already there means "applied", so two
processes migrating at once, or one migrating twice, are safe and idempotent.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from typing import LiteralString, cast

import psycopg

from charter.core.errors import MigrationError
from charter.db.errors import translated
from charter.db.queries import query

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: LiteralString
    checksum: str


@dataclass(frozen=True)
class MigrationStatus:
    version: int
    name: str
    applied_at: datetime | None
    checksum_matches: bool | None  # None when not applied (or unknown to this release)
    known: bool  # False: recorded in the database but not shipped with this release


@cache
def available_migrations() -> tuple[Migration, ...]:
    """The migrations shipped in charter/sql/migrations, numbered 1..n without gaps."""
    folder = resources.files("charter") / "sql" / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match is None:
            continue
        text = entry.read_text(encoding="utf-8")
        checksum = hashlib.sha256(text.encode()).hexdigest()
        # Migration text ships inside the package; it is never user input.
        found.append(Migration(int(match[1]), match[2], text, checksum))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise MigrationError(f"migration {expected:04d} is missing")
    return tuple(found)


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[Migration]:
    """Apply every pending migration; returns those this call applied."""
    if conn.autocommit:
        raise MigrationError("migrate needs a connection with autocommit off")
    applied: list[Migration] = []
    with translated():
        with conn.transaction():
            conn.execute(query("lock_migrations"))
            conn.execute(query("bootstrap_migrations"))
        for migration in available_migrations():
            if _apply(conn, migration):
                applied.append(migration)
    return applied


def _apply(conn: psycopg.Connection[tuple[object, ...]], migration: Migration) -> bool:
    with conn.transaction():
        conn.execute(query("lock_migrations"))
        params = {"version": migration.version, "name": migration.name}
        row = conn.execute(
            query("record_migration"), {**params, "checksum": migration.checksum}
        ).fetchone()
        if row is None:
            return False
        try:
            conn.execute(migration.sql)
        except psycopg.Error as exc:
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name} failed: {exc}"
            ) from exc
    return True


def check_migrated(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Refuse a database that lacks any migration this release ships (MigrationError
    naming them). Migrations recorded but not shipped (a newer release migrated it) are
    fine: functions carry version suffixes so that older callers keep working."""
    pending = [row for row in status(conn) if row.known and row.applied_at is None]
    if not pending:
        return
    names = ", ".join(f"{row.version:04d}_{row.name}" for row in pending[:3])
    more = f" and {len(pending) - 3} more" if len(pending) > 3 else ""
    raise MigrationError(
        f"the database lacks {len(pending)} migration(s) ({names}{more}); "
        "run `charter db migrate` first"
    )


def status(conn: psycopg.Connection[tuple[object, ...]]) -> list[MigrationStatus]:
    """Every migration, shipped or recorded, with whether and when it was applied."""
    with translated():
        exists = conn.execute(query("migrations_table_exists")).fetchone()
        rows = conn.execute(query("applied_migrations")).fetchall() if exists and exists[0] else []
    recorded = {int(cast(int, r[0])): r for r in rows}
    result: list[MigrationStatus] = []
    for migration in available_migrations():
        row = recorded.pop(migration.version, None)
        result.append(
            MigrationStatus(
                version=migration.version,
                name=migration.name,
                applied_at=cast(datetime, row[3]) if row else None,
                checksum_matches=(row[2] == migration.checksum) if row else None,
                known=True,
            )
        )
    for version, row in sorted(recorded.items()):
        result.append(MigrationStatus(version, str(row[1]), cast(datetime, row[3]), None, False))
    return result
