"""RFC 6962 / RFC 9162 Merkle tree hashing, proof generation and proof verification.

Hashes are read through a `HashReader`: `read(level, n)` returns the hash of the
complete subtree of `2**level` leaves starting at leaf `n * 2**level` (level 0 = leaf
hashes). That is exactly what tlog-tiles store, so proofs are generated the same way
from memory (`MemoryTree`) or from tiles (`charter.tlog.tiles.TileHashReader`).

Verification follows RFC 9162 §2.1.3.2 (inclusion) and §2.1.4.2 (consistency) step by
step; any failure raises `LogProofInvalid` (code `log_proof_invalid`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from charter.core.errors.log import LogProofInvalid, ProofRange

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

HashReader = Callable[[int, int], bytes]
"""`read(level, n)`: the hash of leaves `[n * 2**level, (n + 1) * 2**level)`."""


def leaf_hash(data: bytes) -> bytes:
    """The RFC 6962 leaf hash, SHA-256(0x00 ‖ data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The RFC 6962 interior node hash, SHA-256(0x01 ‖ left ‖ right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2): RFC 6962's k."""
    return 1 << ((n - 1).bit_length() - 1)


class MemoryTree:
    """Every complete-subtree hash of a list of leaf hashes, kept in memory.

    Building it costs one node hash per interior node; `read` is then a lookup.
    """

    def __init__(self, leaf_hashes: Sequence[bytes]) -> None:
        level = [bytes(h) for h in leaf_hashes]
        for h in level:
            _check_hash(h, "leaf hash")
        self.size = len(level)
        self.levels: list[list[bytes]] = [level]
        while len(level) > 1:
            level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            self.levels.append(level)

    def read(self, level: int, n: int) -> bytes:
        """`HashReader` over the stored levels."""
        if level < 0 or level >= len(self.levels) or not 0 <= n < len(self.levels[level]):
            raise ProofRange(f"no complete subtree at level {level} index {n}")
        return self.levels[level][n]

    def root(self) -> bytes:
        """The tree head of all the leaves."""
        return tree_root(self.size, self.read)


def subtree_hash(lo: int, hi: int, read: HashReader) -> bytes:
    """MTH(D[lo:hi]) as RFC 6962 §2.1 defines it, reading complete subtrees when aligned."""
    n = hi - lo
    if n <= 0:
        raise ProofRange(f"empty range [{lo}, {hi})")
    if n & (n - 1) == 0 and lo % n == 0:
        return read(n.bit_length() - 1, lo // n)
    k = _split(n)
    return node_hash(subtree_hash(lo, lo + k, read), subtree_hash(lo + k, hi, read))


def tree_root(size: int, read: HashReader) -> bytes:
    """The root hash of the tree of `size` leaves (SHA-256("") when empty)."""
    if size < 0:
        raise ProofRange(f"negative tree size {size}")
    return EMPTY_ROOT if size == 0 else subtree_hash(0, size, read)


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """The root hash of a list of leaf hashes."""
    return MemoryTree(leaf_hashes).root()


def prove_inclusion(index: int, size: int, read: HashReader) -> list[bytes]:
    """The RFC 6962 §2.1.1 audit path of leaf `index` in the tree of `size` leaves."""
    if not 0 <= index < size:
        raise ProofRange(f"leaf {index} is not in a tree of size {size}")
    out: list[bytes] = []
    _path(index, 0, size, read, out)
    return out


def _path(m: int, lo: int, hi: int, read: HashReader, out: list[bytes]) -> None:
    if hi - lo == 1:
        return
    k = _split(hi - lo)
    if m < lo + k:
        _path(m, lo, lo + k, read, out)
        out.append(subtree_hash(lo + k, hi, read))
    else:
        _path(m, lo + k, hi, read, out)
        out.append(subtree_hash(lo, lo + k, read))


def prove_consistency(old_size: int, new_size: int, read: HashReader) -> list[bytes]:
    """The RFC 6962 §2.1.2 consistency proof from `old_size` to `new_size`.

    Empty when the sizes are equal or the old tree is empty (nothing to prove).
    """
    if not 0 <= old_size <= new_size:
        raise ProofRange(f"no consistency proof from size {old_size} to {new_size}")
    out: list[bytes] = []
    if 0 < old_size < new_size:
        _subproof(old_size, 0, new_size, True, read, out)
    return out


def _subproof(m: int, lo: int, hi: int, whole: bool, read: HashReader, out: list[bytes]) -> None:
    if m == hi:
        if not whole:
            out.append(subtree_hash(lo, hi, read))
        return
    k = _split(hi - lo)
    if m - lo <= k:
        _subproof(m, lo, lo + k, whole, read, out)
        out.append(subtree_hash(lo + k, hi, read))
    else:
        _subproof(m, lo + k, hi, False, read, out)
        out.append(subtree_hash(lo, lo + k, read))


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise LogProofInvalid(f"the {what} is not a {HASH_SIZE}-byte hash")


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Check an inclusion proof (RFC 9162 §2.1.3.2); raise `LogProofInvalid` if it fails."""
    _check_hash(leaf, "leaf hash")
    _check_hash(root, "root hash")
    for p in proof:
        _check_hash(p, "proof hash")
    if not 0 <= index < size:
        raise LogProofInvalid(f"leaf {index} is not in a tree of size {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise LogProofInvalid("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise LogProofInvalid("the inclusion proof is too short")
    if r != root:
        raise LogProofInvalid("the inclusion proof does not lead to the root hash")


def verify_consistency(
    old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes
) -> None:
    """Check a consistency proof (RFC 9162 §2.1.4.2); raise `LogProofInvalid` if it fails.

    As in transparency-dev/merkle, a proof from the empty tree is refused as meaningless:
    every tree extends it, so callers (a witness at size 0) skip the check instead.
    """
    _check_hash(old_root, "old root hash")
    _check_hash(new_root, "new root hash")
    for p in proof:
        _check_hash(p, "proof hash")
    if not 0 < old_size <= new_size:
        raise LogProofInvalid(f"no consistency proof from size {old_size} to {new_size}")
    if old_size == new_size:
        if proof:
            raise LogProofInvalid("equal sizes need an empty consistency proof")
        if old_root != new_root:
            raise LogProofInvalid("equal sizes with different root hashes")
        return
    if not proof:
        raise LogProofInvalid("the consistency proof is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise LogProofInvalid("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise LogProofInvalid("the consistency proof is too short")
    if fr != old_root:
        raise LogProofInvalid("the consistency proof does not lead to the old root hash")
    if sr != new_root:
        raise LogProofInvalid("the consistency proof does not lead to the new root hash")
