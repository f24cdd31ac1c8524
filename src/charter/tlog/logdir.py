"""The log directory (`CHARTER_LOG_DIR`): tlog-tiles files on disk, written crash-safely.

    checkpoint                     the latest signed checkpoint (written last, atomically)
    tile/<L>/<N>[.p/<W>]           hash tiles
    tile/entries/<N>[.p/<W>]       entry bundles (88-byte charter-event/1 entries)

That directory is what gets published and mirrored, so it holds nothing else. The
sequencer's own files live in a state directory beside it (`CHARTER_LOG_STATE_DIR`,
default `<log directory>-state`), never copied by a mirror:

    heads.sqlite[-wal,-shm]        the sequencer's head index (`charter.tlog.heads`)
    halted                         why the sequencer halted, if it did (JSON)
    unpublished                    a signed checkpoint still lacking its witness quorum
    witness-sizes.json             the size each witness holds

Earlier versions kept these under `state/` inside the log directory; the sequencer moves
them out when it starts (`adopt_legacy_state`).

Every file is written to a temporary name, fsynced, renamed into place and its directory
fsynced, so a crash leaves either the old or the new file, never half of one. The
directory is the truth: the database only caches what it holds.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from charter.core.errors.log import TileMissing
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.entry import LogEntry
from charter.tlog.note import parse_note
from charter.tlog.tiles import TILE_WIDTH, NodeCache, Tile, decode_bundle

CHECKPOINT = "checkpoint"
HALTED = "halted"
HEADS = "heads.sqlite"
UNPUBLISHED = "unpublished"
WITNESS_SIZES = "witness-sizes.json"
LEGACY_STATE = "state"  # the state's old place, inside the published directory
logger = logging.getLogger("charter.log")


def default_state_directory(root: Path) -> Path:
    """Where a log directory's state lives unless configured: a sibling, `<root>-state`."""
    return root.with_name(f"{root.name}-state")


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write `data` to `path` so that a crash leaves the old file or the new one.
    `durable=False` skips the fsyncs: after a power loss the file may be the old one,
    or empty (for a cache whose loss costs nothing but a round trip)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)  # published: mirrors and the HTTP routes read it
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    if durable:
        _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TileFiles(Mapping[str, bytes]):
    """The tiles of a log directory as the `Mapping[path, bytes]` `charter.tlog.tiles` reads."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def __getitem__(self, key: str) -> bytes:
        if not key.startswith("tile/") or ".." in key.split("/"):
            raise KeyError(key)
        try:
            return (self._root / key).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        tiles = self._root / "tile"
        for path in sorted(tiles.rglob("*")) if tiles.is_dir() else []:
            if path.is_file() and not path.name.startswith("."):
                yield path.relative_to(self._root).as_posix()

    def __len__(self) -> int:
        return sum(1 for _ in self)


class LogDirectory:
    """One log directory: read its checkpoint and entries, write tiles and checkpoints."""

    def __init__(self, root: Path, state: Path | None = None) -> None:
        self.root = root
        self.state = state or default_state_directory(root)
        self.tiles = TileFiles(root)
        # Subtree hashes computed from these tiles: the sequencer clears it on each start.
        self.nodes = NodeCache()

    def exists(self) -> bool:
        return (self.root / CHECKPOINT).is_file()

    def checkpoint_note(self) -> bytes | None:
        """The signed checkpoint note, or None before the first one."""
        try:
            return (self.root / CHECKPOINT).read_bytes()
        except FileNotFoundError:
            return None

    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint body (its signature is the reader's to check against a policy)."""
        note = self.checkpoint_note()
        return None if note is None else Checkpoint.parse(parse_note(note).text)

    def size(self) -> int:
        """The size of the latest checkpoint (0 before any)."""
        checkpoint = self.checkpoint()
        return 0 if checkpoint is None else checkpoint.size

    def write_tiles(self, files: Mapping[str, bytes]) -> None:
        """Write tiles and entry bundles (each atomically); the checkpoint comes after."""
        for path, data in files.items():
            write_atomically(self.root / path, data)

    def write_checkpoint(self, note: bytes) -> None:
        write_atomically(self.root / CHECKPOINT, note)

    def entries(self, start: int, end: int, size: int | None = None) -> list[LogEntry]:
        """Entries `[start, end)`, read from the entry bundles of a tree of `size` leaves
        (default `end`: the bundles' widths depend on the tree they were written for)."""
        size = end if size is None else size
        out: list[LogEntry] = []
        for index in range(start // TILE_WIDTH, -(-end // TILE_WIDTH)):
            first = index * TILE_WIDTH
            raw = self._bundle(index, min(TILE_WIDTH, size - first))
            out += [LogEntry.decode(e) for e in raw[max(0, start - first) : end - first]]
        return out

    def _bundle(self, index: int, width: int) -> list[bytes]:
        bundle = Tile(0, index, width, entries=True)
        data = self.tiles.get(bundle.path())
        if data is not None:
            return decode_bundle(bundle, data)
        # A partial bundle may be gone once the full one exists (tlog-tiles allows it).
        full = bundle.full()
        data = self.tiles.get(full.path()) if bundle.partial else None
        if data is None:
            raise TileMissing(f"missing entry bundle {bundle.path()}", path=bundle.path())
        return decode_bundle(full, data)[:width]

    def halted(self) -> dict[str, str] | None:
        """The halt the sequencer recorded ({"code", "message"}), or None."""
        try:
            loaded = json.loads((self.state / HALTED).read_text("utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else None

    def record_halt(self, code: str, message: str) -> None:
        data = json.dumps({"code": code, "message": message}).encode()
        write_atomically(self.state / HALTED, data)

    def clear_halt(self) -> None:
        (self.state / HALTED).unlink(missing_ok=True)

    @property
    def heads_path(self) -> Path:
        return self.state / HEADS

    def adopt_legacy_state(self) -> int:
        """Move the state an earlier version kept in `<root>/state/` to the state directory
        (before anything opens it); returns how many files moved. File by file, skipping
        names the state directory already has, so a crash halfway is finished next time."""
        legacy = self.root / LEGACY_STATE
        if not legacy.is_dir():
            return 0
        self.state.mkdir(parents=True, exist_ok=True)
        moved = 0
        for path in sorted(legacy.iterdir()):
            target = self.state / path.name
            if path.is_file() and not path.name.startswith(".") and not target.exists():
                shutil.move(path, target)  # a rename, or a copy across file systems
                moved += 1
        shutil.rmtree(legacy)
        if moved:
            logger.info(
                "moved %d state file(s) from %s to %s (outside the published directory)",
                moved,
                legacy,
                self.state,
                extra={"action": "log.state_moved"},
            )
        return moved
