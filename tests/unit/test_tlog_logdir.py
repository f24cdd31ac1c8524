"""The log directory on disk: atomic files and entries read back from any tree size."""

from __future__ import annotations

import stat
from pathlib import Path

from charter.tlog.entry import LogEntry
from charter.tlog.heads import HeadIndex
from charter.tlog.logdir import LogDirectory
from charter.tlog.tiles import append_tiles


def _entries(n: int, start: int = 0) -> list[LogEntry]:
    return [
        LogEntry(bytes([i % 3]) * 32, i // 3 + 1, (start + i).to_bytes(32, "big"))
        for i in range(start, start + n)
    ]


def _grow(log: LogDirectory, old: int, entries: list[LogEntry]) -> None:
    log.write_tiles(append_tiles(log.tiles, old, [e.encode() for e in entries]))


def test_entries_read_back_from_partial_and_full_bundles(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path)
    first, second = _entries(200), _entries(100, 200)
    _grow(log, 0, first)
    _grow(log, 200, second)
    assert log.entries(0, 300) == first + second
    assert log.entries(199, 201, 300) == [first[-1], second[0]]
    assert log.entries(150, 151, 200) == [first[150]]  # the old partial bundle .p/200
    mode = stat.S_IMODE((tmp_path / "tile/entries/000").stat().st_mode)
    assert mode == 0o644
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temporary files left


def test_the_head_index_replays_what_it_missed_and_rebuilds_when_ahead(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path)
    entries = _entries(10)
    _grow(log, 0, entries[:3])
    _grow(log, 3, entries[3:6])
    index = HeadIndex.open(log, 6)
    assert index.size == 6
    head = index.get(entries[5].process_key)
    assert head is not None
    assert (head.seq, head.index) == (2, 5)
    index.close()
    _grow(log, 6, entries[6:])
    index = HeadIndex.open(log, 10)  # a crash after the checkpoint: replayed from bundles
    head = index.get(entries[9].process_key)
    assert head is not None
    assert (head.seq, head.event_hash, head.index) == (4, entries[9].event_hash, 9)
    index.close()
    index = HeadIndex.open(log, 3)  # a directory restored to an older size: rebuilt
    assert index.size == 3
    head = index.get(entries[9].process_key)
    assert head is not None
    assert head.index == 0
    index.close()
