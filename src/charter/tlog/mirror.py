"""`charter log mirror SOURCE DIR`: copy a log, trusting nothing the copy does not prove.

The source is a log directory or the log's HTTP prefix (`…/v1/log/`). The source's
checkpoint must satisfy the policy; every tile and entry bundle of its tree is checked
against its root (tiles the mirror already holds are read locally: no tile path ever
changes); the mirror's own previous checkpoint must be a prefix of the new tree (same
root recomputed at the old size); no process key may have two entries for one seq; and
the caller's `witnessed` check (the source against what its witnesses cosigned) must
pass. Only then are the new tiles written, and the checkpoint last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from charter.core.errors.log import LogNotConfigured, LogProofInvalid, TlogError
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.entry import LogEntry
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import tree_root
from charter.tlog.note import parse_note
from charter.tlog.policy import Policy
from charter.tlog.tiles import TileHashReader, entry_bundle, tiles_for_size, verify_tiles


class MirrorRefused(TlogError):
    """The source log is not consistent with this mirror."""

    code = "checkpoint_equivocation"
    http_status = 409


class MirrorRollback(MirrorRefused):
    """The source log is smaller than this mirror."""

    code = "log_rollback"


class MirrorUntrusted(MirrorRefused):
    """A witness of the source serves a checkpoint the source's log did not sign."""

    code = "checkpoint_untrusted"


REFUSALS: dict[str, type[MirrorRefused]] = {
    "log_rollback": MirrorRollback,
    "checkpoint_untrusted": MirrorUntrusted,
}
"""A witness problem's code → the refusal it raises (else `MirrorRefused`)."""


class MirrorEquivocation(MirrorRefused):
    """The source log holds two entries for one seq of a process."""

    code = "log_equivocation"


class HttpTiles(Mapping[str, bytes]):
    """Tiles fetched from a log's HTTP prefix, each once."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client
        self._cache: dict[str, bytes | None] = {}

    def __getitem__(self, key: str) -> bytes:
        if key not in self._cache:
            answer = self._client.get(key)
            self._cache[key] = answer.content if answer.status_code == 200 else None
        data = self._cache[key]
        if data is None:
            raise KeyError(key)
        return data

    def __iter__(self) -> Iterator[str]:
        return iter([k for k, v in self._cache.items() if v is not None])

    def __len__(self) -> int:
        return sum(1 for v in self._cache.values() if v is not None)


class _Merged(Mapping[str, bytes]):
    """Tiles from the mirror when it has them (every tile path is immutable: a wider
    partial tile is another path), all else from the source."""

    def __init__(self, local: Mapping[str, bytes], source: Mapping[str, bytes]) -> None:
        self._local = local
        self._source = source

    def __getitem__(self, key: str) -> bytes:
        if key in self._local:
            return self._local[key]
        return self._source[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._source)

    def __len__(self) -> int:
        return len(self._source)


WitnessCheck = Callable[[bytes, Checkpoint, Mapping[str, bytes]], None]
"""`check(note, checkpoint, tiles)`: compare the source's trusted checkpoint (and its
tiles) with what witnesses cosigned; raise (a `MirrorRefused`, `WitnessUnreachable`) to
refuse the copy."""


@dataclass(frozen=True, slots=True)
class MirrorResult:
    old_size: int
    size: int
    written: int


def mirror(
    source: str,
    destination: Path,
    policy: Policy,
    token: str | None = None,
    witnessed: WitnessCheck | None = None,
) -> MirrorResult:
    """Bring `destination` up to the source's checkpoint, or raise (nothing written)."""
    target = LogDirectory(destination)
    if source.startswith(("http://", "https://")):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(base_url=source.rstrip("/") + "/", headers=headers, timeout=30) as client:
            answer = client.get("checkpoint")
            if answer.status_code != 200:
                raise LogNotConfigured(f"{source}checkpoint answered {answer.status_code}")
            return _mirror(answer.content, HttpTiles(client), target, policy, witnessed)
    origin = LogDirectory(Path(source))
    note = origin.checkpoint_note()
    if note is None:
        raise LogNotConfigured(f"no checkpoint in {source}")
    return _mirror(note, origin.tiles, target, policy, witnessed)


def _mirror(
    note: bytes,
    source: Mapping[str, bytes],
    target: LogDirectory,
    policy: Policy,
    witnessed: WitnessCheck | None,
) -> MirrorResult:
    checkpoint = policy.verify_checkpoint(note).checkpoint
    store = _Merged(target.tiles, source)
    old = _local_checkpoint(target)
    try:
        entries = verify_tiles(store, checkpoint.size, checkpoint.root)
    except LogProofInvalid as exc:
        if old is None:
            raise
        # The mirror's own full tiles are part of the tree checked: a source whose tree
        # differs inside them forked from what this mirror holds.
        raise MirrorRefused(
            f"the source's tree differs from this mirror's: {exc.message}"
        ) from None
    _check_no_equivocation(entries)
    if old is not None:
        _check_extends(old, checkpoint, store)
    if witnessed is not None:
        witnessed(note, checkpoint, store)
    files: dict[str, bytes] = {}
    for tile in tiles_for_size(checkpoint.size):
        paths = [tile.path()] + ([entry_bundle(tile).path()] if tile.level == 0 else [])
        for path in paths:
            if path not in target.tiles:
                files[path] = store[path]
    target.write_tiles(files)
    target.write_checkpoint(note)
    return MirrorResult(old.size if old else 0, checkpoint.size, len(files))


def _local_checkpoint(target: LogDirectory) -> Checkpoint | None:
    note = target.checkpoint_note()
    return None if note is None else Checkpoint.parse(parse_note(note).text)


def _check_extends(old: Checkpoint, new: Checkpoint, store: Mapping[str, bytes]) -> None:
    if old.origin != new.origin:
        raise MirrorRefused(f"this mirror holds {old.origin}, not {new.origin}")
    if old.size > new.size:
        raise MirrorRollback(
            f"the source is at size {new.size}, older than this mirror's {old.size}"
        )
    root = tree_root(old.size, TileHashReader(store, new.size))
    if root != old.root:
        raise MirrorRefused(
            f"the source's tree at size {old.size} does not have this mirror's root: the log forked"
        )


def _check_no_equivocation(entries: list[bytes]) -> None:
    seen: set[tuple[bytes, int]] = set()
    for index, data in enumerate(entries):
        entry = LogEntry.decode(data)
        key = (entry.process_key, entry.seq)
        if key in seen:
            raise MirrorEquivocation(
                f"entry {index} repeats seq {entry.seq} of process key {entry.process_key.hex()}"
            )
        seen.add(key)
