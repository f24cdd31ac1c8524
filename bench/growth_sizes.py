"""Sizes for bench/growth.py: the database, its tables and indexes, and the bytea question
(how much smaller would the hash, signature and key columns be as bytea than as hex text)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from common import print_results

MIB = 1024 * 1024
TABLES = (
    "events", "processes", "system_log", "automation_queue", "scheduled_actions",
    "automation_firings",
)  # fmt: skip


def print_sizes(conn: psycopg.Connection[Any], title: str) -> None:
    """The database size, then each table's heap, TOAST and indexes."""
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    assert size is not None
    rows: list[dict[str, object]] = []
    for table in TABLES:
        name = f"charter.{table}"
        row = conn.execute(
            """SELECT c.reltuples::bigint, pg_relation_size(c.oid),
                      coalesce(pg_relation_size(c.reltoastrelid), 0), pg_total_relation_size(c.oid)
               FROM pg_class c WHERE c.oid = %s::regclass""",
            (name,),
        ).fetchone()
        assert row is not None
        rows.append({"relation": name, "rows (estimate)": int(row[0]), "MiB": row[1] / MIB,
                     "TOAST MiB": row[2] / MIB, "total MiB": row[3] / MIB})  # fmt: skip
        for index, index_size in conn.execute(
            """SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
               FROM pg_index i WHERE i.indrelid = %s::regclass ORDER BY 2 DESC""",
            (name,),
        ):
            rows.append({"relation": f"  index {index}", "MiB": index_size / MIB})
    print_results(f"{title}: database {size[0] / MIB:,.0f} MiB", rows, width=120)


@dataclass(frozen=True)
class ByteaAnswer:
    """Measured sizes of the events table's hex columns as text and as bytea."""

    events: int
    events_total: int  # heap + TOAST + indexes, bytes
    heap_saved_per_row: float
    index_sizes: dict[str, tuple[int, int]]  # index -> (as text, as bytea), bytes

    @property
    def saved(self) -> float:
        indexes = sum(text - raw for text, raw in self.index_sizes.values())
        return self.heap_saved_per_row * self.events + indexes


# Each hex index of events, and the same key as bytea, built the same way (CREATE INDEX
# on the whole table) inside a transaction that is rolled back. (events_actor, the other
# hex index measured before, was dropped in migration 0014.)
_BYTEA_INDEXES = {
    "events_hash_key": (
        "growth_probe_hash",
        "CREATE UNIQUE INDEX growth_probe_hash ON charter.events ((decode(hash, 'hex')))",
    ),
}
_AS_BYTEA = """
SELECT process_id, seq, decode(hash, 'hex') AS hash, decode(prev_hash, 'hex') AS prev_hash,
       kind, envelope, decode(signature, 'hex') AS signature, decode(actor, 'hex') AS actor,
       actor_id, actor_roles, action, workflow_path, workflow_version,
       decode(cause_hash, 'hex') AS cause_hash, received_at
FROM growth_sample_text
"""


def bytea_answer(conn: psycopg.Connection[Any], *, sample_percent: float = 1.0) -> ByteaAnswer:
    """Index sizes on the whole table; heap bytes per row on a sample of whole rows."""
    conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
    total = conn.execute("SELECT pg_total_relation_size('charter.events')").fetchone()
    assert total is not None
    index_sizes: dict[str, tuple[int, int]] = {}
    for index, (probe, create) in _BYTEA_INDEXES.items():
        conn.execute(create)
        row = conn.execute(
            "SELECT pg_relation_size(%s::regclass), pg_relation_size(%s::regclass)",
            (f"charter.{index}", f"charter.{probe}"),
        ).fetchone()
        assert row is not None
        index_sizes[index] = (int(row[0]), int(row[1]))
    conn.execute(
        "CREATE TEMP TABLE growth_sample_text ON COMMIT DROP AS "
        f"SELECT * FROM charter.events TABLESAMPLE SYSTEM ({float(sample_percent)})"
    )
    conn.execute(f"CREATE TEMP TABLE growth_sample_bytea ON COMMIT DROP AS {_AS_BYTEA}")
    row = conn.execute(
        """SELECT (SELECT count(*) FROM growth_sample_text),
                  pg_relation_size('growth_sample_text'), pg_relation_size('growth_sample_bytea'),
                  (SELECT count(*) FROM charter.events)"""
    ).fetchone()
    assert row is not None
    sampled, text_heap, bytea_heap, events = (int(v) for v in row)
    conn.rollback()  # the probe indexes go
    return ByteaAnswer(
        events=events,
        events_total=int(total[0]),
        heap_saved_per_row=(text_heap - bytea_heap) / max(sampled, 1),
        index_sizes=index_sizes,
    )


def print_bytea(answer: ByteaAnswer) -> None:
    rows: list[dict[str, object]] = [
        {"what": f"index {index}", "as text MiB": text / MIB, "as bytea MiB": raw / MIB,
         "saved MiB": (text - raw) / MIB}
        for index, (text, raw) in answer.index_sizes.items()
    ]  # fmt: skip
    rows.append({"what": "heap, bytes per row (sample of whole rows)", "saved MiB":
                 answer.heap_saved_per_row * answer.events / MIB,
                 "as text MiB": f"{answer.heap_saved_per_row:.1f} B/row saved"})  # fmt: skip
    print_results(
        f"hashes, signatures and keys as bytea ({answer.events:,} events): would save "
        f"{answer.saved / MIB:,.0f} MiB of {answer.events_total / MIB:,.0f} MiB",
        rows,
        width=120,
    )
