"""The transparency log's pure core: what the sequencer and verifiers will pay per
leaf, per proof and per checkpoint, with no I/O (tiles live in a dict).

- append: `append_tiles` for a batch of B 88-byte entries onto a log of N entries
  (leaf hashes, the tile hashes above them, the entry bundles), in entries/s;
- inclusion proof: `prove_inclusion` through a `TileHashReader` (fresh reader per proof,
  so tile decoding is counted) and `verify_inclusion`, per proof;
- checkpoint: the log signs, one witness cosigns, a verifier checks it against a policy.

Each figure is run R times (3 by default); the median and the min-max are printed.
Higher is better for every per-second figure; lower for every µs figure.

Run: python bench/tlog_core.py [--quick]   (--quick: smaller log, well under a minute)
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from charter.tlog.checkpoint import Checkpoint, Cosigner, sign_checkpoint
from charter.tlog.entry import LogEntry
from charter.tlog.merkle import prove_inclusion, tree_root, verify_inclusion
from charter.tlog.note import Ed25519Signer, add_signatures
from charter.tlog.policy import parse_policy
from charter.tlog.tiles import TileHashReader, append_tiles
from common import machine_summary


def _entries(start: int, count: int) -> list[bytes]:
    return [
        LogEntry((i % 997).to_bytes(32, "big"), i + 1, i.to_bytes(32, "big")).encode()
        for i in range(start, start + count)
    ]


def _grow(size: int, batch: int) -> dict[str, bytes]:
    store: dict[str, bytes] = {}
    for start in range(0, size, batch):
        count = min(batch, size - start)
        store.update(append_tiles(store, start, _entries(start, count)))
    return store


def _runs(label: str, unit: str, runs: int, once: Callable[[], float]) -> None:
    values = [once() for _ in range(runs)]
    print(
        f"{label:<48} median {statistics.median(values):>12,.1f} {unit}"
        f"   (min {min(values):,.1f} - max {max(values):,.1f}, {runs} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller log (under a minute)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    size = 20_000 if args.quick else 200_000
    batch = 256
    proofs = 200 if args.quick else 1000
    print(machine_summary())
    print(f"log of {size:,} entries, batches of {batch}, {proofs} proofs per run\n")

    def append_once() -> float:
        started = time.perf_counter()
        _grow(size, batch)
        return size / (time.perf_counter() - started)

    _runs(f"append_tiles, batches of {batch}", "entries/s", args.runs, append_once)

    store = _grow(size, batch)
    root = tree_root(size, TileHashReader(store, size))
    picks = random.Random(7)

    def proof_once() -> float:
        indexes = [picks.randrange(size) for _ in range(proofs)]
        leaves = [
            LogEntry.decode(_entries(i, 1)[0]).leaf_hash() for i in indexes
        ]  # outside the timed part below
        started = time.perf_counter()
        for index, leaf in zip(indexes, leaves, strict=True):
            path = prove_inclusion(index, size, TileHashReader(store, size))
            verify_inclusion(index, size, leaf, path, root)
        return (time.perf_counter() - started) / proofs * 1e6

    _runs("inclusion proof from tiles + verify", "µs/proof", args.runs, proof_once)

    log = Ed25519Signer.generate("charter.example.com/prod")
    witness = Cosigner.generate("audit.example.org/w1")
    policy = parse_policy(
        f"log {log.verifier().vkey}\nwitness w1 {witness.verifier().vkey}\nquorum w1\n"
    )
    checkpoint = Checkpoint(log.name, size, root)
    rounds = 200 if args.quick else 1000

    def checkpoint_once() -> float:
        started = time.perf_counter()
        for _ in range(rounds):
            note = add_signatures(sign_checkpoint(checkpoint, log), [witness.cosign(checkpoint)])
            policy.verify_checkpoint(note)
        return (time.perf_counter() - started) / rounds * 1e6

    _runs("sign + cosign + policy-verify a checkpoint", "µs/checkpoint", args.runs, checkpoint_once)


if __name__ == "__main__":
    main()
