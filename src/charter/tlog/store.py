"""The sequencer's queries (charter/sql/queries/log.sql), one typed function each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from psycopg.types.json import Jsonb

from charter.db.database import Conn
from charter.db.queries import query


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """A queued event, with whether its events row is genuine and how long it has waited."""

    event_hash: str
    process_id: str
    seq: int
    prev_hash: str | None
    genuine: bool
    age_s: float


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One entry as the database records it."""

    index: int
    event_hash: str
    process_id: str
    seq: int


def try_leader(conn: Conn) -> bool:
    row = conn.execute(query("log_try_leader")).fetchone()
    return bool(row and row[0])


def enable_queue(conn: Conn) -> int:
    """Switch the log queue on; how many already accepted events it queued (0 once on)."""
    row = conn.execute(query("log_enable_queue")).fetchone()
    return int(cast(int, row[0])) if row else 0


def pending_batch(conn: Conn, *, limit: int) -> list[PendingEvent]:
    rows = conn.execute(query("log_pending_batch"), {"limit": limit}).fetchall()
    return [
        PendingEvent(
            event_hash=str(r[0]),
            process_id=str(r[1]),
            seq=cast(int, r[2]),
            prev_hash=None if r[3] is None else str(r[3]),
            genuine=bool(r[4]),
            age_s=float(cast(float, r[5])),
        )
        for r in rows
    ]


def db_size(conn: Conn) -> int:
    row = conn.execute(query("log_db_size")).fetchone()
    return int(cast(int, row[0])) if row else 0


def events_by_hash(conn: Conn, hashes: Sequence[str]) -> dict[str, tuple[str, int]]:
    """hash → (process id, seq) of the events that exist."""
    rows = conn.execute(query("log_events_by_hash"), {"hashes": list(hashes)}).fetchall()
    return {str(r[0]): (str(r[1]), cast(int, r[2])) for r in rows}


def record_batch(
    conn: Conn,
    *,
    logged: Sequence[LoggedEvent],
    dequeue: Sequence[str],
    size: int,
    root_hex: str,
    note: str,
    witnessed: bool,
) -> None:
    """The sequencer's commit step: entries, dequeue and checkpoint in the caller's transaction."""
    if logged:
        conn.execute(
            query("log_record_entries"),
            {
                "idx": [e.index for e in logged],
                "hashes": [e.event_hash for e in logged],
                "process_ids": [e.process_id for e in logged],
                "seqs": [e.seq for e in logged],
            },
        )
    if dequeue:
        conn.execute(query("log_dequeue"), {"hashes": list(dequeue)})
    conn.execute(
        query("log_record_checkpoint"),
        {"size": size, "root": root_hex, "note": note, "witnessed": witnessed},
    )


def record_halt(conn: Conn, *, code: str, message: str, detail: Mapping[str, object]) -> None:
    conn.execute(
        query("log_record_halt"), {"code": code, "message": message, "detail": Jsonb(dict(detail))}
    )


def pending_count(conn: Conn) -> tuple[int, float]:
    row = conn.execute(query("log_pending_count")).fetchone()
    return (int(cast(int, row[0])), float(cast(float, row[1]))) if row else (0, 0.0)


def index_of(conn: Conn, event_hash: str) -> int | None:
    """The leaf index recorded for an event, or None."""
    row = conn.execute(query("log_index_of"), {"event_hash": event_hash}).fetchone()
    return None if row is None else int(cast(int, row[0]))


def checkpoint_note(conn: Conn, size: int) -> bytes | None:
    """The signed checkpoint the sequencer recorded for a tree size, or None."""
    row = conn.execute(query("log_checkpoint_note"), {"size": size}).fetchone()
    return None if row is None else str(row[0]).encode()


def chain_of(conn: Conn, process_id: str) -> list[tuple[int, str, datetime | None]]:
    """(seq, hash, received_at) of a process's events, in order."""
    rows = conn.execute(query("log_chain_of"), {"process_id": process_id}).fetchall()
    return [(cast(int, r[0]), str(r[1]), cast("datetime | None", r[2])) for r in rows]
