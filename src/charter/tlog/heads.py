"""The sequencer's head index: for each process key, the last logged (seq, event hash, index).

It lives in the log's state directory (`heads.sqlite`), outside the database, because it is
what the sequencer checks the database against: the next event of a process must extend
the head it logged. It records the tree size it reflects; on open it replays the entries
beyond that size from the entry bundles, so a crash after a checkpoint write and before
the index update loses nothing. It is derived data: deleting it rebuilds it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from charter.tlog.entry import LogEntry
from charter.tlog.logdir import LogDirectory

_SCHEMA = """
CREATE TABLE IF NOT EXISTS heads (
    process_key BLOB PRIMARY KEY, seq INTEGER NOT NULL, event_hash BLOB NOT NULL,
    idx INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (one INTEGER PRIMARY KEY CHECK (one = 1), size INTEGER NOT NULL);
"""
_REPLAY_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Head:
    """The last logged event of a process."""

    seq: int
    event_hash: bytes
    index: int


class HeadIndex:
    """`process_key → Head` for the log up to `size`, kept in SQLite."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        # WAL with synchronous=NORMAL: a commit appends to the WAL without an fsync (the
        # WAL is synced at its checkpoints). A power loss may forget the last commits,
        # never half of one: the index is then at an older `size` and `open` replays the
        # entries beyond it from the bundles, which are fsynced before the checkpoint. Its
        # durability is the tiles' job; FULL cost three fsyncs a batch.
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    @classmethod
    def open(cls, log: LogDirectory, size: int) -> HeadIndex:
        """The index of `log` caught up to `size` (replayed, or rebuilt if ahead of it)."""
        index = cls(log.heads_path)
        if index.size > size:  # the directory was restored to an older state: start over
            index._reset()
        start = index.size
        while start < size:
            end = min(size, start + _REPLAY_CHUNK)
            index.record(start, log.entries(start, end, size))
            start = end
        return index

    @property
    def size(self) -> int:
        row = self._db.execute("SELECT size FROM meta").fetchone()
        return 0 if row is None else int(row[0])

    def get(self, process_key: bytes) -> Head | None:
        row = self._db.execute(
            "SELECT seq, event_hash, idx FROM heads WHERE process_key = ?", (process_key,)
        ).fetchone()
        return None if row is None else Head(int(row[0]), bytes(row[1]), int(row[2]))

    def record(self, first_index: int, entries: Sequence[LogEntry]) -> None:
        """Entries appended at `first_index`, in order, in one SQLite transaction."""
        # Only each process's last entry of the batch is its head: one upsert per process.
        last = {e.process_key: (e, first_index + i) for i, e in enumerate(entries)}
        rows = [(key, e.seq, e.event_hash, index) for key, (e, index) in last.items()]
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT INTO heads (process_key, seq, event_hash, idx) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (process_key) DO UPDATE SET seq = excluded.seq,"
                " event_hash = excluded.event_hash, idx = excluded.idx",
                rows,
            )
            self._db.execute(
                "INSERT INTO meta (one, size) VALUES (1, ?)"
                " ON CONFLICT (one) DO UPDATE SET size = excluded.size",
                (first_index + len(entries),),
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _reset(self) -> None:
        self._db.execute("DELETE FROM heads")
        self._db.execute("DELETE FROM meta")

    def close(self) -> None:
        self._db.close()
