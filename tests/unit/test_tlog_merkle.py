"""RFC 6962 hashing and proofs against published vectors, plus property tests.

Vectors: the RFC 6962 reference tree of transparency-dev/merkle (testonly/constants.go)
and the happy paths of its testdata/{inclusion,consistency}; Go sumdb's TestEmptyTree.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.core.errors.log import LogProofInvalid, ProofRange
from charter.tlog.merkle import (
    EMPTY_ROOT,
    MemoryTree,
    leaf_hash,
    prove_consistency,
    prove_inclusion,
    root_of,
    verify_consistency,
    verify_inclusion,
)

LEAF_INPUTS = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
LEAF_HASHES = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
    "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
]


def _b64(items: list[str]) -> list[bytes]:
    return [base64.b64decode(x) for x in items]


# (index, size, leaf hash, proof, root): transparency-dev/merkle testdata/inclusion/*/happy-path
INCLUSION = [
    (
        0,
        1,
        "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
        [],
        "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
    ),
    (
        0,
        8,
        "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
        [
            "lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=",
            "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
            "a0eq8p7jwq+a+Im8H7klTavTEXfxYjLdaqsDXKOb9uQ=",
        ],
        "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
    ),
    (
        5,
        8,
        "QnGia+DYqE8L1UyMMC58s6O10fpngKQLzOKHNHfatlg=",
        [
            "vBoGQ7EuTS18d5GPROD095qDi2z57FtcKD4fTYhZnms=",
            "yoVOoSjtBQtBs1/8G4e46yveRh6eO1WW7Oa51ZdaCuA=",
            "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc=",
        ],
        "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
    ),
    (
        2,
        3,
        "ApjRIpBtz8EIkstTpzmS/FufST6kybrbJ7eRtBJ6f+c=",
        ["+sVCA+fMaWzw38tCySodnbr3CtnmIfS9jZhmLwDjwSU="],
        "rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=",
    ),
    (
        1,
        5,
        "lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=",
        [
            "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
            "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
            "vBoGQ7EuTS18d5GPROD095qDi2z57FtcKD4fTYhZnms=",
        ],
        "Tju7H3tHjc/nH7YxYxUZo7yhLJrvyhYSv85ME6hiZNQ=",
    ),
]

# (size1, size2, root1, root2, proof): testdata/consistency/*/happy-path
CONSISTENCY = [
    (
        1,
        8,
        "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
        "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
        [
            "lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=",
            "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
            "a0eq8p7jwq+a+Im8H7klTavTEXfxYjLdaqsDXKOb9uQ=",
        ],
    ),
    (
        6,
        8,
        "duZ9rbzfHhDht03cYIq9L5jfsW+851J3tSMqEn8gh+8=",
        "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
        [
            "DrxdNDf74tsVi58Sah0RjjCBgQMdCpSfje3t68VY72o=",
            "yoVOoSjtBQtBs1/8G4e46yveRh6eO1WW7Oa51ZdaCuA=",
            "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc=",
        ],
    ),
    (
        2,
        5,
        "+sVCA+fMaWzw38tCySodnbr3CtnmIfS9jZhmLwDjwSU=",
        "Tju7H3tHjc/nH7YxYxUZo7yhLJrvyhYSv85ME6hiZNQ=",
        [
            "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
            "vBoGQ7EuTS18d5GPROD095qDi2z57FtcKD4fTYhZnms=",
        ],
    ),
    (
        6,
        7,
        "duZ9rbzfHhDht03cYIq9L5jfsW+851J3tSMqEn8gh+8=",
        "3bib5AOAnjJXUNPSY814kpwpQreUKjS3fhIslZSnTIw=",
        [
            "DrxdNDf74tsVi58Sah0RjjCBgQMdCpSfje3t68VY72o=",
            "sIaT7C5yFZcTBkHoIR5+7cy0wmQTlj7ubB4u0W/7Gl8=",
            "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc=",
        ],
    ),
]

REFERENCE = MemoryTree([leaf_hash(bytes.fromhex(x)) for x in LEAF_INPUTS])


def test_empty_root_is_sha256_of_nothing() -> None:
    assert hashlib.sha256(b"").digest() == EMPTY_ROOT
    assert EMPTY_ROOT.hex().startswith("e3b0c442")
    assert root_of([]) == EMPTY_ROOT


def test_leaf_hashes_match_the_reference_tree() -> None:
    assert [leaf_hash(bytes.fromhex(x)).hex() for x in LEAF_INPUTS] == LEAF_HASHES


@pytest.mark.parametrize("size", range(9))
def test_roots_of_the_reference_tree(size: int) -> None:
    leaves = [bytes.fromhex(h) for h in LEAF_HASHES[:size]]
    assert root_of(leaves).hex() == ROOTS[size]


@pytest.mark.parametrize(("index", "size", "leaf", "proof", "root"), INCLUSION)
def test_published_inclusion_proofs(
    index: int, size: int, leaf: str, proof: list[str], root: str
) -> None:
    verify_inclusion(index, size, base64.b64decode(leaf), _b64(proof), base64.b64decode(root))
    if size > 1:
        # The reference tree is the tree of these vectors: we generate the same path.
        tree = MemoryTree(REFERENCE.levels[0][:size])
        assert prove_inclusion(index, size, tree.read) == _b64(proof)
        with pytest.raises(LogProofInvalid):
            verify_inclusion(index, size, base64.b64decode(leaf), _b64(proof)[:-1], tree.root())


@pytest.mark.parametrize(("size1", "size2", "root1", "root2", "proof"), CONSISTENCY)
def test_published_consistency_proofs(
    size1: int, size2: int, root1: str, root2: str, proof: list[str]
) -> None:
    r1, r2 = base64.b64decode(root1), base64.b64decode(root2)
    verify_consistency(size1, size2, _b64(proof), r1, r2)
    assert prove_consistency(size1, size2, REFERENCE.read) == _b64(proof)
    with pytest.raises(LogProofInvalid):
        verify_consistency(size1, size2, _b64(proof), r2, r1)


def test_consistency_edge_cases() -> None:
    r1 = bytes.fromhex(ROOTS[1])
    verify_consistency(1, 1, [], r1, r1)
    with pytest.raises(LogProofInvalid, match="equal sizes with different"):
        verify_consistency(1, 1, [], r1, EMPTY_ROOT)
    with pytest.raises(LogProofInvalid, match="empty consistency proof"):
        verify_consistency(1, 1, [r1], r1, r1)
    with pytest.raises(LogProofInvalid):
        verify_consistency(0, 1, [], EMPTY_ROOT, r1)
    with pytest.raises(LogProofInvalid):
        verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    with pytest.raises(LogProofInvalid):
        verify_consistency(2, 1, [], r1, r1)
    with pytest.raises(LogProofInvalid, match="is empty"):
        verify_consistency(1, 2, [], r1, bytes.fromhex(ROOTS[2]))
    with pytest.raises(LogProofInvalid, match="32-byte"):
        verify_consistency(1, 1, [], b"don't care 1", r1)
    assert prove_consistency(0, 8, REFERENCE.read) == []
    assert prove_consistency(8, 8, REFERENCE.read) == []


def test_inclusion_edge_cases() -> None:
    leaf = bytes.fromhex(LEAF_HASHES[0])
    verify_inclusion(0, 1, leaf, [], leaf)
    with pytest.raises(LogProofInvalid):
        verify_inclusion(1, 1, leaf, [], leaf)
    with pytest.raises(LogProofInvalid):
        verify_inclusion(0, 0, leaf, [], EMPTY_ROOT)
    with pytest.raises(LogProofInvalid, match="too long"):
        verify_inclusion(0, 1, leaf, [leaf], leaf)
    with pytest.raises(ProofRange):
        prove_inclusion(8, 8, REFERENCE.read)
    with pytest.raises(ProofRange):
        prove_consistency(3, 2, REFERENCE.read)


def _leaves(n: int) -> list[bytes]:
    return [leaf_hash(i.to_bytes(8, "big")) for i in range(n)]


def _flip(proof: list[bytes], i: int, bit: int) -> list[bytes]:
    damaged = bytearray(proof[i])
    damaged[bit // 8] ^= 1 << (bit % 8)
    return [*proof[:i], bytes(damaged), *proof[i + 1 :]]


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(min_value=1, max_value=600))
def test_every_inclusion_proof_verifies_and_any_flipped_bit_fails(
    data: st.DataObject, size: int
) -> None:
    tree = MemoryTree(_leaves(size))
    root = tree.root()
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    leaf = tree.levels[0][index]
    proof = prove_inclusion(index, size, tree.read)
    verify_inclusion(index, size, leaf, proof, root)
    bit = data.draw(st.integers(min_value=0, max_value=255))
    for i in range(len(proof)):
        with pytest.raises(LogProofInvalid):
            verify_inclusion(index, size, leaf, _flip(proof, i, bit), root)
    with pytest.raises(LogProofInvalid):
        verify_inclusion(index, size, _flip([leaf], 0, bit)[0], proof, root)
    with pytest.raises(LogProofInvalid):
        verify_inclusion(index, size, leaf, proof, _flip([root], 0, bit)[0])


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(min_value=1, max_value=600))
def test_every_consistency_proof_verifies_and_any_flipped_bit_fails(
    data: st.DataObject, size2: int
) -> None:
    tree = MemoryTree(_leaves(size2))
    size1 = data.draw(st.integers(min_value=1, max_value=size2))
    root1, root2 = MemoryTree(tree.levels[0][:size1]).root(), tree.root()
    proof = prove_consistency(size1, size2, tree.read)
    verify_consistency(size1, size2, proof, root1, root2)
    bit = data.draw(st.integers(min_value=0, max_value=255))
    for i in range(len(proof)):
        with pytest.raises(LogProofInvalid):
            verify_consistency(size1, size2, _flip(proof, i, bit), root1, root2)
    with pytest.raises(LogProofInvalid):
        verify_consistency(size1, size2, proof, _flip([root1], 0, bit)[0], root2)
    with pytest.raises(LogProofInvalid):
        verify_consistency(size1, size2, proof, root1, _flip([root2], 0, bit)[0])


def _inclusion_probes(
    index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes
) -> list[tuple[int, int, bytes, list[bytes], bytes]]:
    """transparency-dev/merkle's corruptions of a valid inclusion proof (all must fail)."""
    garbage = hashlib.sha256(b"garbage").digest()
    probes = [
        (index + 1, size, leaf, proof, root),
        (index ^ 2, size, leaf, proof, root),
        (index, size * 2, leaf, proof, root),
        (index, size // 2, leaf, proof, root),
        (index, size, garbage, proof, root),
        (index, size, leaf, [garbage, *proof], root),
        (index, size, leaf, [*proof, garbage], root),
        (index, size, leaf, [*proof, root], root),
        (index, size, leaf, [root, *proof], root),
        (index, size, leaf, proof, EMPTY_ROOT),
    ]
    if index > 0:
        probes.append((index - 1, size, leaf, proof, root))
    return probes


@pytest.mark.parametrize(("index", "size", "leaf", "proof", "root"), INCLUSION)
def test_corrupted_published_inclusion_proofs_fail(
    index: int, size: int, leaf: str, proof: list[str], root: str
) -> None:
    probes = _inclusion_probes(
        index, size, base64.b64decode(leaf), _b64(proof), base64.b64decode(root)
    )
    for probe in probes:
        with pytest.raises(LogProofInvalid):
            verify_inclusion(*probe)


@pytest.mark.parametrize(("size1", "size2", "root1", "root2", "proof"), CONSISTENCY)
def test_corrupted_published_consistency_proofs_fail(
    size1: int, size2: int, root1: str, root2: str, proof: list[str]
) -> None:
    r1, r2, path = base64.b64decode(root1), base64.b64decode(root2), _b64(proof)
    garbage = hashlib.sha256(b"garbage").digest()
    probes = [
        (size1 + 1, size2, path, r1, r2),
        (size1 - 1, size2, path, r1, r2),
        (size1 ^ 2, size2, path, r1, r2),
        (size1, size2 * 2, path, r1, r2),
        (size1, size2 // 2, path, r1, r2),
        (size1, size2, [garbage, *path], r1, r2),
        (size1, size2, [*path, garbage], r1, r2),
        (size1, size2, [r1, *path], r1, r2),
        (size1, size2, [*path, r2], r1, r2),
        (size1, size2, path[:-1], r1, r2),
        (size1, size2, [], r1, r2),
        (size1, size2, path, r2, r1),
        (size1, size2, path, garbage, r2),
        (size1, size2, path, r1, garbage),
    ]
    for probe in probes:
        with pytest.raises(LogProofInvalid):
            verify_consistency(*probe)
