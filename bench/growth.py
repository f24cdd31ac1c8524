"""process_event latency as history grows: appends to existing processes of a database
holding 10 k events vs one holding 10 M (`--quick`: 1 M), same procedure, interleaved.

Both databases are built by bench/growth_build.py (100 events per process, valid signed
chains COPYed in, a sample verified by Charter) and kept between runs, since the large one
takes many minutes to build: `charter_growth_10k`, `charter_growth_10m` (`--quick`:
`charter_growth_1m`); `--rebuild` builds them again, `--drop` drops them at the end.

Each run: a warm-up of appends, a CHECKPOINT, then `--events` appends by one writer to
processes picked at random, each `process_event` call timed (signing is not). WAL is
read back with pg_walinspect and counted for this database's pages and transactions
only (the server is shared): bytes and full-page images per event. Measured from a
checkpoint, so every page an event touches for the first time since then costs a
full-page image — as in each checkpoint cycle's first minutes.

Then the sizes of the large database's tables and indexes, and the bytea question:
the same indexes and rows with the hex columns as bytea (built, measured, rolled back).

Run: python bench/growth.py [--quick] [--rebuild] [--runs 3] [--events 2000]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server) and
~10 GB of disk for 10 M events. On a 2-core machine the 10 M build takes about 50 min
(COPY 39, indexes 9) and a measurement with a kept database 4 to 5 min; `--quick` takes
about a minute once `charter_growth_1m` is kept (its first build, about 2 min).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from charter.core.envelope import Envelope, Submission, sign
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database
from charter.engine.process_event import Engine
from common import percentiles, print_results
from growth_build import ACTORS, WORKFLOW, Shape, actor_key, build, process_id
from growth_sizes import bytea_answer, print_bytea, print_sizes

ADMIN = os.environ.get("CHARTER_BENCH_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
BUILT = "charter growth bench: {events} events, complete"  # the database comment when built
POOL = 1000  # processes a run appends to, picked at random


@dataclass(frozen=True)
class Side:
    label: str
    database: str
    shape: Shape


@dataclass(frozen=True)
class Run:
    p50_ms: float
    p99_ms: float
    events_per_s: float
    # From this database's WAL; None if the server recycled it before it was read.
    wal_bytes_per_event: float | None
    fpi_per_event: float | None
    server_wal_bytes_per_event: float  # pg_current_wal_lsn difference: every session's
    # relation -> (block references, full-page images) per event, from this database's WAL
    pages: dict[str, tuple[float, float]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 k vs 1 M events")
    parser.add_argument("--rebuild", action="store_true", help="build the databases again")
    parser.add_argument("--drop", action="store_true", help="drop the databases at the end")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, help="appends timed per run (2000; quick 200)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-bytea", action="store_true", help="skip the bytea measurement")
    args = parser.parse_args()
    small = Side("10 k events", "charter_growth_10k", Shape(100, 100))
    large = (
        Side("1 M events", "charter_growth_1m", Shape(10_000, 100))
        if args.quick
        else Side("10 M events", "charter_growth_10m", Shape(100_000, 100))
    )
    events = args.events or (200 if args.quick else 2000)
    warmup = 50 if args.quick else 200
    for side in (small, large):
        ensure_built(side, rebuild=args.rebuild, workers=args.workers)
    try:
        compare(small, large, runs=args.runs, events=events, warmup=warmup)
        with psycopg.connect(url_of(large.database)) as conn:
            print_sizes(conn, large.label)
            if not args.no_bytea:
                started = time.perf_counter()
                answer = bytea_answer(conn)
                print_bytea(answer)
                print(f"(bytea measurement took {time.perf_counter() - started:.0f} s)")
    finally:
        if args.drop:
            for side in (small, large):
                drop(side.database)


def url_of(database: str) -> str:
    return make_conninfo(ADMIN, dbname=database)


def ensure_built(side: Side, *, rebuild: bool, workers: int) -> None:
    """Build `side`'s database unless a complete one is kept (its comment says so)."""
    marker = BUILT.format(events=side.shape.events)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (side.database,),
        ).fetchone()
        if row is not None and row[0] == marker and not rebuild:
            print(f"{side.label}: reusing database {side.database}")
            return
        name = sql.Identifier(side.database)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(name))
    print(f"{side.label}: building {side.database} ({side.shape.processes:,} processes x "
          f"{side.shape.events_per_process} events)", flush=True)  # fmt: skip
    started = time.perf_counter()
    build(url_of(side.database), url_of(side.database), side.shape, workers=workers)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(side.database), sql.Literal(marker)
            )
        )
    print(f"{side.label}: built in {time.perf_counter() - started:.0f} s", flush=True)


def drop(database: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )


def compare(small: Side, large: Side, *, runs: int, events: int, warmup: int) -> None:
    """`runs` runs on each side, alternating which goes first."""
    results: dict[str, list[Run]] = {small.label: [], large.label: []}
    for number in range(runs):
        for side in (small, large) if number % 2 == 0 else (large, small):
            run = measure(side, events=events, warmup=warmup)
            results[side.label].append(run)
            print(f"  run {number + 1} {side.label}: p50 {run.p50_ms:.2f} ms, "
                  f"p99 {run.p99_ms:.2f} ms, {run.events_per_s:.0f} events/s, "
                  f"{_one(run.wal_bytes_per_event, 0)} WAL B/event, "
                  f"{_one(run.fpi_per_event, 2)} FPI/event (server-wide "
                  f"{run.server_wal_bytes_per_event:.0f} B/event)", flush=True)  # fmt: skip
    rows = [summary(label, runs_of) for label, runs_of in results.items()]
    rows.append(ratios(results[large.label], results[small.label]))
    print_results(
        f"process_event appending to existing processes, {events} events per run, "
        f"median (min-max) of {runs} runs",
        rows,
        width=140,
    )
    print_pages(results)
    print(f"ratio = {large.label} ÷ {small.label}: above 1 the large database is slower for "
          "p50/p99, below 1 for events/s (range: over the runs paired in order)")  # fmt: skip


def print_pages(results: dict[str, list[Run]]) -> None:
    """Pages touched and full-page images per event, by relation (median over runs)."""
    names = sorted({name for runs in results.values() for run in runs for name in run.pages})
    rows: list[dict[str, object]] = []
    for name in names:
        row: dict[str, object] = {"relation": name}
        for label, runs in results.items():
            touched = [run.pages.get(name, (0.0, 0.0)) for run in runs]
            row[f"{label}: pages/event"] = statistics.median(t[0] for t in touched)
            row[f"{label}: FPI/event"] = statistics.median(t[1] for t in touched)
        rows.append(row)
    print_results("WAL block references per event, by relation (median of the runs)", rows,
                  width=140)  # fmt: skip


def _one(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _spread(measured: list[float | None], digits: int = 2) -> str:
    values = [v for v in measured if v is not None]
    if not values:
        return "n/a"
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def summary(label: str, runs: list[Run]) -> dict[str, object]:
    return {
        "database": label,
        "p50 ms": _spread([r.p50_ms for r in runs]),
        "p99 ms": _spread([r.p99_ms for r in runs]),
        "events/s": _spread([r.events_per_s for r in runs], 0),
        "WAL B/event": _spread([r.wal_bytes_per_event for r in runs], 0),
        "FPI/event": _spread([r.fpi_per_event for r in runs]),
        "server WAL B/event": _spread([r.server_wal_bytes_per_event for r in runs], 0),
    }


def ratios(large: list[Run], small: list[Run]) -> dict[str, object]:
    def ratio(field: str) -> str:
        pairs: list[float | None] = []
        for a, b in zip(large, small, strict=True):
            x, y = getattr(a, field), getattr(b, field)
            pairs.append(x / y if x is not None and y else None)
        return _spread(pairs)

    return {
        "database": "ratio large ÷ small",
        "p50 ms": ratio("p50_ms"),
        "p99 ms": ratio("p99_ms"),
        "events/s": ratio("events_per_s"),
        "WAL B/event": ratio("wal_bytes_per_event"),
        "FPI/event": ratio("fpi_per_event"),
        "server WAL B/event": "",
    }


def measure(side: Side, *, events: int, warmup: int) -> Run:
    """One run on `side`: warm-up, CHECKPOINT, `events` timed appends; WAL read back."""
    url = url_of(side.database)
    rng = random.Random()
    picked = rng.sample(range(side.shape.processes), min(POOL, side.shape.processes))
    with psycopg.connect(url, autocommit=True) as admin, Database(url, max_size=2) as database:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        heads: dict[int, tuple[str, int]] = {
            int(row[0][1:]): (str(row[1]), int(row[2]))
            for row in admin.execute(
                "SELECT id, head_hash, seq FROM charter.processes WHERE id = ANY (%s)",
                ([process_id(i) for i in picked],),
            )
        }
        engine = Engine(database)

        def append() -> float:
            index = rng.choice(picked)
            head, seq = heads[index]
            submission = _bump(index, head, seq + 1)
            started = time.perf_counter()
            accepted = engine.process_event(submission)
            elapsed = time.perf_counter() - started
            heads[index] = (accepted.hash, accepted.seq)
            return elapsed

        for _ in range(warmup):
            append()
        admin.execute("CHECKPOINT")
        # A temporary slot (gone with this session) keeps the run's WAL until it is read:
        # other sessions' checkpoints would otherwise recycle it.
        admin.execute(
            "SELECT pg_create_physical_replication_slot(%s, true, true)",
            (f"charter_growth_{os.getpid()}",),
        )
        start_lsn = _lsn(admin)
        latencies = [append() for _ in range(events)]
        end_lsn = _lsn(admin)
        server_wal = _wal_between(admin, start_lsn, end_lsn)
        try:
            wal: tuple[int, int] | None = _wal_of_database(admin, start_lsn, end_lsn)
            pages = _pages_by_relation(admin, start_lsn, end_lsn)
        except psycopg.errors.UndefinedFile:
            wal, pages = None, {}
    points = percentiles([s * 1000 for s in latencies], (50, 99))
    return Run(
        p50_ms=points[50],
        p99_ms=points[99],
        events_per_s=events / sum(latencies),
        wal_bytes_per_event=wal[0] / events if wal else None,
        fpi_per_event=wal[1] / events if wal else None,
        server_wal_bytes_per_event=server_wal / events,
        pages={name: (refs / events, fpi / events) for name, (refs, fpi) in pages.items()},
    )


def _bump(index: int, head: str, seq: int) -> Submission:
    key = actor_key(index % ACTORS)
    envelope = Envelope(
        v=1,
        process=process_id(index),
        workflow=WORKFLOW,
        action="bump",
        input={"n": seq},
        prev=head,
        actor=key.public_key_hex,
        at=format_rfc3339(datetime.now(UTC)),
    )
    return sign(envelope, key)


def _lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _wal_between(conn: psycopg.Connection[Any], start: str, end: str) -> int:
    row = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (end, start)).fetchone()
    assert row is not None
    return int(row[0])


# This database's WAL between two positions: records touching its pages, and the commit
# records of the transactions that wrote them. "FPW" marks each full-page image.
_WAL_OF_DATABASE = """
WITH r AS (SELECT * FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)),
mine AS (SELECT DISTINCT xid FROM r WHERE block_ref LIKE %(pattern)s AND xid <> '0')
SELECT coalesce(sum(record_length), 0)::bigint,
       coalesce(sum((length(block_ref) - length(replace(block_ref, 'FPW', ''))) / 3), 0)::bigint
FROM r
WHERE block_ref LIKE %(pattern)s OR xid IN (SELECT xid FROM mine)
"""


# Each block reference of this database's WAL records, by relation: how many pages of
# which table or index an event touches, and how many of those cost a full-page image.
_PAGES_BY_RELATION = """
WITH r AS (
    SELECT block_ref FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
    WHERE block_ref LIKE %(pattern)s
),
refs AS (
    SELECT m[1]::oid AS node, m[2] IS NOT NULL AS fpw
    FROM r, regexp_matches(r.block_ref, %(regex)s, 'g') AS m
)
SELECT coalesce(c.relname, 'relfilenode ' || refs.node), count(*), count(*) FILTER (WHERE fpw)
FROM refs LEFT JOIN pg_class c ON c.relfilenode = refs.node AND c.relfilenode <> 0
GROUP BY 1
"""


def _pages_by_relation(
    conn: psycopg.Connection[Any], start: str, end: str
) -> dict[str, tuple[int, int]]:
    oid = _database_oid(conn)
    rows = conn.execute(
        _PAGES_BY_RELATION,
        {
            "start": start,
            "end": end,
            "pattern": f"%/{oid}/%",
            "regex": rf"rel \d+/{oid}/(\d+) fork \w+ blk \d+( \(FPW\))?",
        },
    )
    return {str(name): (int(refs), int(fpi)) for name, refs, fpi in rows}


def _database_oid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


def _wal_of_database(conn: psycopg.Connection[Any], start: str, end: str) -> tuple[int, int]:
    oid = _database_oid(conn)
    found = conn.execute(
        _WAL_OF_DATABASE, {"start": start, "end": end, "pattern": f"%/{oid}/%"}
    ).fetchone()
    assert found is not None
    return int(found[0]), int(found[1])


if __name__ == "__main__":
    main()
