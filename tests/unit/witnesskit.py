"""A small in-memory log for witness tests: signed checkpoints and proofs of any size."""

from __future__ import annotations

import hashlib
from pathlib import Path

from charter.tlog.checkpoint import Checkpoint, Cosigner, sign_checkpoint
from charter.tlog.merkle import MemoryTree, leaf_hash, prove_consistency, tree_root
from charter.tlog.note import Ed25519Signer
from charter.tlog.witness_protocol import encode_request
from charter.witness.config import KnownLogs, write_cosigner_key
from charter.witness.core import Witness
from charter.witness.state import WitnessState

ORIGIN = "charter.example.com/test"


class TestLog:
    """A log of `capacity` leaves, derived from `seed`: two logs with different seeds are
    forks of each other (same sizes, different roots)."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        origin: str = ORIGIN,
        seed: str = "main",
        capacity: int = 300,
        key: Ed25519Signer | None = None,
    ) -> None:
        self.origin = origin
        self.key = key or Ed25519Signer.generate(origin)
        leaves = [
            leaf_hash(hashlib.sha256(f"{seed}/{i}".encode()).digest()) for i in range(capacity)
        ]
        self._leaves = leaves
        self._trees: dict[int, MemoryTree] = {}

    def tree(self, size: int) -> MemoryTree:
        if size not in self._trees:
            self._trees[size] = MemoryTree(self._leaves[:size])
        return self._trees[size]

    def checkpoint(self, size: int) -> Checkpoint:
        return Checkpoint(self.origin, size, tree_root(size, self.tree(size).read))

    def note(self, size: int) -> bytes:
        return sign_checkpoint(self.checkpoint(size), self.key)

    def proof(self, old: int, new: int) -> list[bytes]:
        return prove_consistency(old, new, self.tree(new).read)

    def request(self, old: int, new: int) -> bytes:
        """An add-checkpoint body from size `old` to `new` with the right proof."""
        proof = self.proof(old, new) if 0 < old < new else []
        return encode_request(old, proof, self.note(new))

    @property
    def vkey(self) -> str:
        return self.key.verifier().vkey


def make_witness(directory: Path, *logs: TestLog, name: str = "witness.example.org/w1") -> Witness:
    cosigner = Cosigner.generate(name)
    state = WitnessState(directory, (cosigner.name, cosigner.key_id))
    return Witness(cosigner, KnownLogs.of(log.key.verifier() for log in logs), state)


def init_witness_dir(
    directory: Path, *logs: TestLog, name: str = "witness.example.org/w1"
) -> Cosigner:
    """What `charter witness init --log …` writes, for tests that start `serve` directly."""
    from charter.witness.config import LOGS_FILE, logs_policy_text

    directory.mkdir(parents=True, exist_ok=True)
    cosigner = Cosigner.generate(name)
    write_cosigner_key(directory / "witness.skey", cosigner)
    (directory / LOGS_FILE).write_text(logs_policy_text(log.vkey for log in logs))
    return cosigner
