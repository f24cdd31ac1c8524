"""C2SP tlog-tiles: tile paths, which tiles a tree has, tile contents and a hash reader.

Tiles have height 8: a tile at level L holds up to 256 consecutive hashes of tree level
8·L, each the root of a complete subtree of 256**L leaves. Paths are
`tile/<L>/<N>[.p/<W>]` for hashes and `tile/entries/<N>[.p/<W>]` for the entries, where
N is written in 3-digit groups, all but the last prefixed by `x` (1234067 →
`x001/x234/067`). Entry bundles are big-endian uint16-length-prefixed entries.

Nothing here touches a file system: a tile store is any `Mapping[path, bytes]`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from charter.core.errors.log import (
    LogProofInvalid,
    MalformedTile,
    MalformedTilePath,
    ProofRange,
    TileMissing,
)
from charter.tlog.merkle import HASH_SIZE, HashReader, MemoryTree, leaf_hash, node_hash

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_LEVEL = 63
MAX_ENTRY_SIZE = 0xFFFF

# At most 7 groups of 3 digits (a tile index below 2**64) and a width of at most 3 digits:
# a path's numbers are bounded by the pattern before int() sees them.
_PATH = re.compile(
    r"tile/(entries|0|[1-9][0-9]?)/((?:x[0-9]{3}/){0,6}[0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?"
)


@dataclass(frozen=True, slots=True, order=True)
class Tile:
    """A hash tile (or, with `entries`, the entry bundle beside level-0 tile `index`)."""

    level: int
    index: int
    width: int = TILE_WIDTH
    entries: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.level <= MAX_LEVEL or (self.entries and self.level != 0):
            raise MalformedTilePath(f"invalid tile level {self.level}")
        if self.index < 0:
            raise MalformedTilePath(f"invalid tile index {self.index}")
        if not 1 <= self.width <= TILE_WIDTH:
            raise MalformedTilePath(f"invalid tile width {self.width}")

    @property
    def partial(self) -> bool:
        return self.width < TILE_WIDTH

    def path(self) -> str:
        """The tile's path under the log prefix."""
        kind = "entries" if self.entries else str(self.level)
        suffix = f".p/{self.width}" if self.partial else ""
        return f"tile/{kind}/{encode_index(self.index)}{suffix}"

    def full(self) -> Tile:
        """The full tile this partial tile grows into."""
        return Tile(self.level, self.index, TILE_WIDTH, self.entries)


def encode_index(n: int) -> str:
    """N in zero-padded 3-digit path elements, all but the last prefixed with `x`."""
    if n < 0:
        raise MalformedTilePath(f"invalid tile index {n}")
    groups = [f"{n % 1000:03d}"]
    n //= 1000
    while n:
        groups.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(groups))


def parse_tile_path(path: str) -> Tile:
    """The tile of a canonical tile path; anything else raises `MalformedTilePath`."""
    match = _PATH.fullmatch(path) if isinstance(path, str) else None
    if match is None:
        raise MalformedTilePath(f"not a tile path: {path!r}")
    kind, digits, width = match.groups()
    index = int(digits.replace("x", "").replace("/", ""))
    entries = kind == "entries"
    tile = Tile(0 if entries else int(kind), index, int(width) if width else TILE_WIDTH, entries)
    if tile.path() != path:  # e.g. "x000/001" or ".p/256": one path per tile
        raise MalformedTilePath(f"not a canonical tile path: {path!r}")
    return tile


def _hash_count(size: int, level: int) -> int:
    """How many hashes tile level `level` holds for a tree of `size` leaves."""
    return size >> (TILE_HEIGHT * level)


def new_tiles(old_size: int, new_size: int) -> list[Tile]:
    """The hash tiles written when the tree grows from `old_size` to `new_size` leaves.

    Full tiles are written once; the rightmost tiles are partial (`.p/<W>`). Entry
    bundles follow the level-0 tiles (`entry_bundle`).
    """
    if not 0 <= old_size <= new_size:
        raise ProofRange(f"the tree cannot go from size {old_size} to {new_size}")
    tiles: list[Tile] = []
    level = 0
    while (count := _hash_count(new_size, level)) > 0:
        old_count = _hash_count(old_size, level)
        for index in range(old_count // TILE_WIDTH, -(-count // TILE_WIDTH)):
            width = min(TILE_WIDTH, count - index * TILE_WIDTH)
            if index * TILE_WIDTH + width > old_count:
                tiles.append(Tile(level, index, width))
        level += 1
    return tiles


def tiles_for_size(size: int) -> list[Tile]:
    """Every hash tile of a tree of `size` leaves (e.g. 70,000: 273 full level-0 tiles…)."""
    return new_tiles(0, size)


def entry_bundle(tile: Tile) -> Tile:
    """The entry bundle that goes with a level-0 hash tile."""
    if tile.level != 0 or tile.entries:
        raise MalformedTilePath("only level-0 tiles have entry bundles")
    return Tile(0, tile.index, tile.width, entries=True)


def encode_bundle(entries: Sequence[bytes]) -> bytes:
    """Entries as big-endian uint16-length-prefixed records."""
    if not 1 <= len(entries) <= TILE_WIDTH:
        raise MalformedTile("an entry bundle holds 1 to 256 entries")
    out = bytearray()
    for entry in entries:
        if len(entry) > MAX_ENTRY_SIZE:
            raise MalformedTile("an entry is at most 65535 bytes")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def decode_bundle(tile: Tile, data: bytes) -> list[bytes]:
    """The entries of an entry bundle; exactly `tile.width` of them, nothing after."""
    if not tile.entries:
        raise MalformedTile("not an entry bundle")
    entries: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise MalformedTile("truncated entry length")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise MalformedTile("truncated entry")
        entries.append(bytes(data[at + 2 : at + 2 + length]))
        at += 2 + length
    if len(entries) != tile.width:
        raise MalformedTile(f"the bundle holds {len(entries)} entries, not {tile.width}")
    return entries


def decode_tile(tile: Tile, data: bytes) -> list[bytes]:
    """The hashes of a hash tile: exactly `tile.width` 32-byte hashes."""
    if tile.entries:
        raise MalformedTile("an entry bundle is not a hash tile")
    if len(data) != tile.width * HASH_SIZE:
        raise MalformedTile(f"{tile.path()} must be {tile.width * HASH_SIZE} bytes")
    return [bytes(data[i : i + HASH_SIZE]) for i in range(0, len(data), HASH_SIZE)]


def tile_data(tile: Tile, read: HashReader) -> bytes:
    """The contents of a hash tile: its hashes of tree level 8·L, concatenated."""
    if tile.entries:
        raise MalformedTile("an entry bundle is not a hash tile")
    first = tile.index * TILE_WIDTH
    return b"".join(read(TILE_HEIGHT * tile.level, first + i) for i in range(tile.width))


def build_tiles(entries: Sequence[bytes]) -> dict[str, bytes]:
    """Every tile and entry bundle of the log holding `entries`, by path (for rebuilds/tests)."""
    tree = MemoryTree([leaf_hash(e) for e in entries])
    out: dict[str, bytes] = {}
    for tile in tiles_for_size(len(entries)):
        out[tile.path()] = tile_data(tile, tree.read)
        if tile.level == 0:
            first = tile.index * TILE_WIDTH
            bundle = entry_bundle(tile)
            out[bundle.path()] = encode_bundle(entries[first : first + tile.width])
    return out


class TileHashReader:
    """A `merkle.HashReader` over a tile store for a tree of `size` leaves.

    Hashes between tile levels are recomputed from the tile below. A partial tile that
    is gone may be read from its full tile (tlog-tiles allows deleting partial tiles
    once full), and a missing tile above level 0 from the tiles under it. The reader
    trusts the store: proofs built from it are checked against a signed root by whoever
    verifies them.
    """

    def __init__(
        self, store: Mapping[str, bytes], size: int, nodes: NodeCache | None = None
    ) -> None:
        """`nodes`: hashes between tile levels computed before, from this same store, kept
        and extended (see NodeCache)."""
        if size < 0:
            raise ProofRange(f"negative tree size {size}")
        self._store = store
        self._size = size
        self._cache: dict[Tile, list[bytes]] = {}
        self._nodes = nodes

    def __call__(self, level: int, n: int) -> bytes:
        tile_level, height = divmod(level, TILE_HEIGHT)
        span = 1 << height
        first = n << height
        count = _hash_count(self._size, tile_level)
        if n < 0 or first + span > count:
            raise ProofRange(f"no complete subtree at level {level} index {n} in size {self._size}")
        nodes = self._nodes
        if height and nodes is not None:
            known = nodes.get(level, n)
            if known is not None:
                return known
            left, right = nodes.get(level - 1, 2 * n), nodes.get(level - 1, 2 * n + 1)
            if left is not None and right is not None:
                known = node_hash(left, right)
                nodes.keep(level, n, known)
                return known
        index, offset = divmod(first, TILE_WIDTH)
        width = min(TILE_WIDTH, count - index * TILE_WIDTH)
        try:
            hashes = self._tile(Tile(tile_level, index, width))[offset : offset + span]
        except TileMissing:
            if tile_level == 0:
                raise
            # Any hash above level 0 is also the node over the two below it, so a
            # missing upper tile (say a partial one already superseded) is recomputed.
            return node_hash(self(level - 1, 2 * n), self(level - 1, 2 * n + 1))
        below = level - height
        while len(hashes) > 1:
            hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
            below += 1
            if nodes is not None:  # each level of the subtree, for the next reads
                start = n << (level - below)
                for i, digest in enumerate(hashes):
                    nodes.keep(below, start + i, digest)
        return hashes[0]

    def _tile(self, tile: Tile) -> list[bytes]:
        if tile in self._cache:
            return self._cache[tile]
        data = self._store.get(tile.path())
        if data is not None:
            hashes = decode_tile(tile, data)
        elif tile.partial and (full := self._store.get(tile.full().path())) is not None:
            hashes = decode_tile(tile.full(), full)[: tile.width]
        else:
            raise TileMissing(f"missing tile {tile.path()}", path=tile.path())
        self._cache[tile] = hashes
        return hashes


NODE_CACHE_LIMIT = 1 << 16  # hashes (about 10 MB); a full cache starts again empty


class NodeCache:
    """Hashes of complete subtrees between tile levels, computed once and kept.

    A log only grows, so the hash of a complete subtree never changes: the sequencer's
    tree roots and the consistency proofs it sends to witnesses, tick after tick, need
    the same right-edge hashes, which a fresh `TileHashReader` would recompute from the
    tiles each time (up to 255 hashes per partial tile). Only for readers of one log
    directory, and cleared whenever the directory may have changed under its writer."""

    def __init__(self, limit: int = NODE_CACHE_LIMIT) -> None:
        self._hashes: dict[tuple[int, int], bytes] = {}
        self._limit = limit

    def node(self, level: int, n: int, read: HashReader) -> bytes:
        """The hash at (level, n) > 0: kept, or the node over the two below it."""
        known = self._hashes.get((level, n))
        if known is None:
            known = node_hash(read(level - 1, 2 * n), read(level - 1, 2 * n + 1))
            self.keep(level, n, known)
        return known

    def get(self, level: int, n: int) -> bytes | None:
        return self._hashes.get((level, n))

    def keep(self, level: int, n: int, digest: bytes) -> None:
        if len(self._hashes) >= self._limit:
            self._hashes.clear()
        self._hashes[(level, n)] = digest

    def clear(self) -> None:
        self._hashes.clear()

    def __len__(self) -> int:
        return len(self._hashes)


class _GrowingReader:
    """Hashes of a tree grown by `leaves` past `old_size`: old subtrees from the tiles,
    new ones computed (each once) from the new leaf hashes."""

    def __init__(
        self, old: TileHashReader, old_size: int, leaves: Sequence[bytes], nodes: NodeCache
    ) -> None:
        self._old = old
        self._old_size = old_size
        self._leaves = leaves
        self._nodes = nodes

    def __call__(self, level: int, n: int) -> bytes:
        if (n + 1) << level <= self._old_size:
            return self._old(level, n)
        if level == 0:
            return self._leaves[n - self._old_size]
        return self._nodes.node(level, n, self)


def append_tiles(
    store: Mapping[str, bytes],
    old_size: int,
    entries: Sequence[bytes],
    nodes: NodeCache | None = None,
) -> dict[str, bytes]:
    """The tiles and entry bundles to write when `entries` are appended to a log of
    `old_size` entries stored in `store`, by path; the new subtrees' hashes are kept in
    `nodes` (the cache of the readers of this store) when given.

    It reads only the old partial tiles and bundles on the right edge; full tiles never
    change. About two hashes per new leaf: the sequencer's integration step, minus I/O.
    """
    if not entries:
        return {}
    new_size = old_size + len(entries)
    nodes = NodeCache() if nodes is None else nodes
    read = _GrowingReader(
        TileHashReader(store, old_size, nodes),
        old_size,
        [leaf_hash(e) for e in entries],
        nodes,
    )
    out: dict[str, bytes] = {}
    for tile in new_tiles(old_size, new_size):
        out[tile.path()] = tile_data(tile, read)
        if tile.level == 0:
            out[entry_bundle(tile).path()] = _grown_bundle(store, old_size, tile, entries)
    return out


def _grown_bundle(
    store: Mapping[str, bytes], old_size: int, tile: Tile, entries: Sequence[bytes]
) -> bytes:
    first = tile.index * TILE_WIDTH
    old_width = max(0, min(old_size - first, TILE_WIDTH))
    kept: list[bytes] = []
    if old_width:
        old = Tile(0, tile.index, old_width, entries=True)
        data = store.get(old.path())
        if data is None:
            raise TileMissing(f"missing entry bundle {old.path()}", path=old.path())
        kept = decode_bundle(old, data)
    start = first + old_width - old_size
    return encode_bundle([*kept, *entries[start : start + tile.width - old_width]])


def verify_tiles(store: Mapping[str, bytes], size: int, root: bytes) -> list[bytes]:
    """Check a whole tile store against a signed tree head and return its entries.

    Every entry bundle must hash to its level-0 tile, every tile must hold the hashes
    recomputed from the level below, and the root must be the checkpoint's: what a
    mirror checks before it trusts a copied log. Raises `LogProofInvalid` on a mismatch.
    """
    entries: list[bytes] = []
    tiles = tiles_for_size(size)
    for tile in tiles:
        if tile.level == 0:
            bundle = entry_bundle(tile)
            data = store.get(bundle.path())
            if data is None:
                raise TileMissing(f"missing entry bundle {bundle.path()}", path=bundle.path())
            entries += decode_bundle(bundle, data)
    tree = MemoryTree([leaf_hash(e) for e in entries])
    for tile in tiles:
        data = store.get(tile.path())
        if data is None:
            raise TileMissing(f"missing tile {tile.path()}", path=tile.path())
        if decode_tile(tile, data) != decode_tile(tile, tile_data(tile, tree.read)):
            raise LogProofInvalid(f"{tile.path()} does not match the entries below it")
    if tree.root() != root:
        raise LogProofInvalid(f"the tiles of size {size} do not lead to the checkpoint root")
    return entries
