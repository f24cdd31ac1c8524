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

# Migrations whose comments were reworded after release: the checksum each release
# recorded, and the checksum of its statements alone (`statements_checksum`), which the
# rewording left unchanged (a test holds the shipped files to it). A database that
# recorded the released checksum has applied exactly these statements.
REWORDED: dict[int, tuple[str, str]] = {
    1: (
        "22d7bf2013d7eaf69f1f3d51b45bbad85fa30ed688b89cc4a5ac5ad65a683276",
        "9e6990af1c8fe50972957178391bd685c7c06183f169ec04e6afbcf67e9fc570",
    ),
    2: (
        "f0a4421a3e20e9af835b94d5d17ed6165c9b3a59bc339e2eadbbd7c4fecdbe13",
        "727e3fe4e06894980f3c569272796d8bbf5d4989b600ecbb2503f7f0b6e20c8f",
    ),
    3: (
        "ac03db8d86d36c1d7bb809da1e6710db6f104f88e09e7f393402a603fb3a8ef9",
        "e4c3d4ef779f89b37bc26ea52b6b0df6cba731f26af8f197432b9aec9f17bc0c",
    ),
    4: (
        "5c250224aecef5b97e204db99809996cc3976a2ede243e926ed820d082696cad",
        "82259a12de35894660762dbbdf03f2430b6e62e67cfb0b20829684e326744f4c",
    ),
    5: (
        "a88bff3a0e48d60acfe21a8a0217a37d4f105e8a2fa07e139f7e56d05ac79706",
        "ee155e33233ed0649795aac270fd412f3b3d99a13aef6d82b1405232943f261d",
    ),
    6: (
        "efd576e579fd990976d2b479ac0ec7eb1a86822d549a7907eeb362eb43400023",
        "115189a4e07f88a02b743ec0f60c210752c683b3dfec375bdd56bad86bfdb35a",
    ),
    7: (
        "be707897e480ddbe6ee2499c568163234d3a45ef57938d39fe9a645dfef95556",
        "1b9fe983a3a09fbbf7ed2858cc9748170e62d991702a6f3b49f4796948599495",
    ),
    8: (
        "61a06a67092dd08a92c575c3d3c4f746d25cbcf7e853862a5167204062ee5d6c",
        "79e2a0dd4006e6c3591f3b93a75b2eb83e9bc8dcbe4def479f543f0b8f7dc8f7",
    ),
    9: (
        "17d7f66c93b9e012358e5d948a1c920119e2916cec371c486b9b72956560e340",
        "bf440c6c5104c8fefb8355c0ad276e72a4ea59fa128daa4291b544c38922e108",
    ),
    10: (
        "d51866f517b67fd06bb14057cb401e46ae609095e91a9544dc2e680759b76ce6",
        "0c5db77f4276c93544840d9380e8e91bd8603576fac877f395ae4988084a56d8",
    ),
    11: (
        "8a08e8dc76f2d94c82a3e7c25e340b86a9b5c9ba050b7ae0ca8685fde438b7e9",
        "22c0e0a9aaaefb64f401b3a107a76a6e23b46d571902f114854d4d90e3adb376",
    ),
    12: (
        "edabc9ed6f86c7b93c97a43f88855f629bd339e25b4d942cbb11e9610d226559",
        "4bf0bbcb486fcbc666b33997bca6168b1e07f54d77e2a8c0ca9f343f3c13b755",
    ),
    13: (
        "99b575a5903471d7b542e4b2890ed02a6d7e01030245fcd6fa24e0be50aa297c",
        "aeefbfd56923568da6cd06a9aff495c748d8980195d2f42ec5d5d623741af571",
    ),
    15: (
        "9097393d1d56e53cb74ed6b8ee372335dd342b34bcc631349410d952224b9bc8",
        "b36ff4fdb2c8e9e7ab140de91e2db1ab3b979e0c0ed910ad1cc739ef864df2fd",
    ),
    16: (
        "462adfcbb43f3bd63afc24c64c5198a2b2277eb8be2df407aee4b78a2dd6bc9b",
        "a70cadbb3f2e9c907ff3e398dea9a6866ec738e5d3a7244e7a89f5792e835fae",
    ),
    17: (
        "e92ad2f6baedde1d974f53035c458779d6a3041c5a12e9ae094258894e94681a",
        "846765b4dd46503efd6f4a24d21ff8699f1dc92e3bc5af3b298de48dbb398f0f",
    ),
}


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: LiteralString
    checksum: str

    def recorded_by_this_release(self, recorded: str) -> bool:
        """Whether a checksum found in `schema_migrations` is this migration's: today's,
        or the one recorded before its comments were reworded."""
        released = REWORDED.get(self.version)
        return recorded == self.checksum or (released is not None and recorded == released[0])


def statements_checksum(sql: str) -> str:
    """SHA-256 of a migration without its whole-line `--` comments: what rewording a
    comment leaves unchanged."""
    kept = "\n".join(line for line in sql.split("\n") if not line.lstrip().startswith("--"))
    return hashlib.sha256(kept.encode()).hexdigest()


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
                checksum_matches=migration.recorded_by_this_release(str(row[2])) if row else None,
                known=True,
            )
        )
    for version, row in sorted(recorded.items()):
        result.append(MigrationStatus(version, str(row[1]), cast(datetime, row[3]), None, False))
    return result


def schema_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The latest applied migration (0 when none is): a health check's one query."""
    row = conn.execute(query("health")).fetchone()
    return int(cast(int, row[0])) if row else 0
