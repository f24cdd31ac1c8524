"""tlog-tiles paths, tile sets, contents and the tile hash reader.

Path vectors: C2SP tlog-tiles.md (1234067 → x001/x234/067; size 70,000; size 256) and
golang/mod sumdb/tlog tlog_test.go's tilePaths, with Go's height element dropped.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.core.errors.log import (
    LogProofInvalid,
    MalformedTile,
    MalformedTilePath,
    ProofRange,
    TileMissing,
)
from charter.tlog.merkle import (
    MemoryTree,
    leaf_hash,
    prove_consistency,
    prove_inclusion,
    tree_root,
    verify_consistency,
    verify_inclusion,
)
from charter.tlog.tiles import (
    NodeCache,
    Tile,
    TileHashReader,
    append_tiles,
    build_tiles,
    decode_bundle,
    decode_tile,
    encode_bundle,
    encode_index,
    new_tiles,
    parse_tile_path,
    tiles_for_size,
    verify_tiles,
)


@pytest.mark.parametrize(
    ("path", "tile"),
    [
        ("tile/0/x001/x234/067", Tile(0, 1234067)),
        ("tile/0/001", Tile(0, 1)),
        ("tile/0/001.p/5", Tile(0, 1, 5)),
        ("tile/5/x123/x456/078", Tile(5, 123456078)),
        ("tile/5/x123/x456/078.p/2", Tile(5, 123456078, 2)),
        ("tile/0/x003/x057/500", Tile(0, 3057500)),
        ("tile/63/000", Tile(63, 0)),
        ("tile/entries/x001/x234/067", Tile(0, 1234067, entries=True)),
        ("tile/entries/000.p/255", Tile(0, 0, 255, entries=True)),
    ],
)
def test_tile_paths(path: str, tile: Tile) -> None:
    assert tile.path() == path
    assert parse_tile_path(path) == tile


@pytest.mark.parametrize(
    "path",
    [
        "tile/3/123/456/078",  # all but the last element need an x
        "tile/3/-1/123/456/078",
        "tile/data/x003/x057/500",
        "tile/01/000",
        "tile/64/000",
        "tile/0/x000/001",  # not canonical
        "tile/0/1",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/05",
        "tile/0/000/",
        "tile/0/x001",
        "/tile/0/000",
        "tile/entries/000.p/",
    ],
)
def test_bad_tile_paths_are_refused(path: str) -> None:
    with pytest.raises(MalformedTilePath):
        parse_tile_path(path)


def test_index_encoding() -> None:
    assert encode_index(0) == "000"
    assert encode_index(999) == "999"
    assert encode_index(1000) == "x001/000"
    assert encode_index(1234067) == "x001/x234/067"


def test_tiles_of_a_tree_of_70000() -> None:
    tiles = tiles_for_size(70_000)
    level0 = [t for t in tiles if t.level == 0]
    assert len([t for t in level0 if not t.partial]) == 273
    assert [t.width for t in level0 if t.partial] == [112]
    assert [(t.index, t.width) for t in tiles if t.level == 1] == [(0, 256), (1, 17)]
    assert [(t.index, t.width) for t in tiles if t.level == 2] == [(0, 1)]
    assert max(t.level for t in tiles) == 2
    assert Tile(1, 1, 17).path() == "tile/1/001.p/17"


def test_tiles_of_a_tree_of_256() -> None:
    assert tiles_for_size(256) == [Tile(0, 0), Tile(1, 0, 1)]
    assert tiles_for_size(0) == []


def test_new_tiles_are_the_ones_that_changed() -> None:
    assert new_tiles(1, 1) == []
    assert new_tiles(100, 101) == [Tile(0, 0, 101)]
    assert new_tiles(255, 256) == [Tile(0, 0), Tile(1, 0, 1)]
    assert new_tiles(256, 257) == [Tile(0, 1, 1)]
    assert new_tiles(256, 512) == [Tile(0, 1), Tile(1, 0, 2)]
    with pytest.raises(ProofRange):
        new_tiles(2, 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=0, max_value=5000))
def test_new_tiles_compose_to_the_final_set(a: int, b: int) -> None:
    old, new = min(a, b), max(a, b)
    final = {t.path() for t in tiles_for_size(new)}
    grown = {t.path() for t in tiles_for_size(old)} | {t.path() for t in new_tiles(old, new)}
    # Everything the new tree needs was either written before or is new now.
    assert final <= grown
    assert {t.path() for t in new_tiles(old, new)} <= final


def test_entry_bundles_round_trip() -> None:
    entries = [b"", b"a", b"x" * 65535]
    bundle = Tile(0, 0, 3, entries=True)
    data = encode_bundle(entries)
    assert data[:2] == b"\x00\x00"
    assert data[2:5] == b"\x00\x01a"
    assert decode_bundle(bundle, data) == entries
    with pytest.raises(MalformedTile):
        decode_bundle(bundle, data[:-1])
    with pytest.raises(MalformedTile):
        decode_bundle(bundle, data + b"\x00")
    with pytest.raises(MalformedTile):
        decode_bundle(Tile(0, 0, 4, entries=True), data)
    with pytest.raises(MalformedTile):
        encode_bundle([b"x" * 65536])
    with pytest.raises(MalformedTile):
        encode_bundle([])


def _entries(n: int) -> list[bytes]:
    return [f"leaf {i}".encode() for i in range(n)]


def test_tile_contents_are_the_level_hashes() -> None:
    entries = _entries(600)
    store = build_tiles(entries)
    tree = MemoryTree([leaf_hash(e) for e in entries])
    assert decode_tile(Tile(0, 2, 88), store["tile/0/002.p/88"]) == tree.levels[0][512:600]
    level1 = decode_tile(Tile(1, 0, 2), store["tile/1/000.p/2"])
    assert level1 == [tree.read(8, 0), tree.read(8, 1)]
    assert decode_bundle(Tile(0, 1, entries=True), store["tile/entries/001"]) == entries[256:512]
    with pytest.raises(MalformedTile):
        decode_tile(Tile(0, 0), store["tile/0/000"][:-1])


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(min_value=1, max_value=3000))
def test_proofs_from_tiles_match_proofs_from_memory(data: st.DataObject, size: int) -> None:
    entries = _entries(size)
    tree = MemoryTree([leaf_hash(e) for e in entries])
    reader = TileHashReader(build_tiles(entries), size)
    root = tree.root()
    assert tree_root(size, reader) == root
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = prove_inclusion(index, size, reader)
    assert proof == prove_inclusion(index, size, tree.read)
    verify_inclusion(index, size, leaf_hash(entries[index]), proof, root)
    old = data.draw(st.integers(min_value=1, max_value=size))
    consistency = prove_consistency(old, size, reader)
    assert consistency == prove_consistency(old, size, tree.read)
    verify_consistency(old, size, consistency, tree_root(old, reader), root)


def test_reader_on_a_grown_store_serves_older_sizes() -> None:
    # Tiles of size 600 also answer for size 300 (partials of 300 removed, full tiles
    # read instead), as a mirror that only keeps the latest tiles would.
    store = build_tiles(_entries(600))
    old = MemoryTree([leaf_hash(e) for e in _entries(300)])
    reader = TileHashReader(store, 300)
    assert tree_root(300, reader) == old.root()


def test_reader_reports_missing_tiles_and_ranges() -> None:
    store = build_tiles(_entries(300))
    del store["tile/0/001.p/44"]
    reader = TileHashReader(store, 300)
    with pytest.raises(TileMissing) as caught:
        reader(0, 299)
    assert caught.value.context == {"path": "tile/0/001.p/44"}
    with pytest.raises(ProofRange):
        reader(0, 300)
    with pytest.raises(ProofRange):
        reader(9, 0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=6))
def test_appending_in_batches_builds_the_same_tiles(batches: list[int]) -> None:
    store: dict[str, bytes] = {}
    size = 0
    for count in batches:
        batch = [f"leaf {i}".encode() for i in range(size, size + count)]
        before = set(store)
        written = append_tiles(store, size, batch)
        store.update(written)
        size += count
        expected = build_tiles(_entries(size))
        # Every tile of the new tree is now in the store, with the same contents.
        assert {p: store[p] for p in expected} == expected
        # Full tiles are immutable: a path already stored is only rewritten if partial.
        assert all(parse_tile_path(p).partial for p in written if p in before)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=6),
    st.sampled_from([3, 50, 1 << 16]),
    st.data(),
)
def test_a_node_cache_kept_across_batches_changes_no_hash(
    batches: list[int], limit: int, data: st.DataObject
) -> None:
    """What the sequencer does: one cache for the tiles, the roots and the proofs of a
    growing log, batch after batch (a small limit clears it mid-way)."""
    store: dict[str, bytes] = {}
    nodes = NodeCache(limit)
    size = 0
    for count in batches:
        batch = [f"leaf {i}".encode() for i in range(size, size + count)]
        store.update(append_tiles(store, size, batch, nodes))
        old, size = size, size + count
        assert len(nodes) <= limit
        tree = MemoryTree([leaf_hash(e) for e in _entries(size)])
        reader = TileHashReader(store, size, nodes)
        expected = build_tiles(_entries(size))
        assert {p: store[p] for p in expected} == expected
        assert tree_root(size, reader) == tree.root()
        if old:
            assert prove_consistency(old, size, reader) == prove_consistency(old, size, tree.read)
        index = data.draw(st.integers(min_value=0, max_value=size - 1))
        assert prove_inclusion(index, size, reader) == prove_inclusion(index, size, tree.read)


def test_a_cached_reader_still_refuses_incomplete_subtrees() -> None:
    nodes = NodeCache()
    reader = TileHashReader(build_tiles(_entries(300)), 300, nodes)
    tree_root(300, reader)
    with pytest.raises(ProofRange):
        reader(3, 38)  # leaves 304..311: past the tree
    with pytest.raises(ProofRange):
        TileHashReader(build_tiles(_entries(300)), 200, nodes)(6, 3)  # 192..255 > 200


def test_append_needs_the_old_partial_bundle() -> None:
    store = build_tiles(_entries(10))
    del store["tile/entries/000.p/10"]
    with pytest.raises(TileMissing):
        append_tiles(store, 10, [b"x"])
    assert append_tiles(store, 10, []) == {}


def test_verify_tiles_checks_every_tile_against_the_root() -> None:
    entries = _entries(700)
    store = build_tiles(entries)
    root = MemoryTree([leaf_hash(e) for e in entries]).root()
    assert verify_tiles(store, 700, root) == entries
    assert verify_tiles({}, 0, tree_root(0, TileHashReader({}, 0))) == []
    with pytest.raises(LogProofInvalid):
        verify_tiles(store, 700, bytes(32))
    # A level-1 tile that lies about the level-0 tile below it.
    bad = dict(store)
    bad["tile/1/000.p/2"] = bytes(32) + store["tile/1/000.p/2"][32:]
    with pytest.raises(LogProofInvalid):
        verify_tiles(bad, 700, root)
    # An entry swapped in a bundle no longer matches its level-0 tile.
    swapped = dict(store)
    swapped["tile/entries/000"] = encode_bundle([b"other", *entries[1:256]])
    with pytest.raises(LogProofInvalid):
        verify_tiles(swapped, 700, root)
    missing = dict(store)
    del missing["tile/entries/002.p/188"]
    with pytest.raises(TileMissing):
        verify_tiles(missing, 700, root)
