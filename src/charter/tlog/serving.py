"""Proofs served from the log directory: what the HTTP routes and `charter log` answer."""

from __future__ import annotations

from charter.core.errors.log import NotLogged, ProofRange
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import prove_consistency, prove_inclusion
from charter.tlog.note import b64encode, parse_note
from charter.tlog.proof import build_proof
from charter.tlog.tiles import TileHashReader


def inclusion_proof(
    log: LogDirectory, index: int | None, event_hash: str, note: bytes | None = None
) -> str:
    """The tlog-proof@v1 text of the event at `index` against the latest checkpoint, or
    against `note` (an earlier checkpoint of this log, e.g. one a witness cosigned).

    `index` comes from a cache (the database's `log_entries`): the entry bundle must hold
    `event_hash` there, or the event is `not_logged` as far as the published log goes.
    """
    latest = log.checkpoint()
    note = note or log.checkpoint_note()
    if index is None or note is None or latest is None:
        raise NotLogged(f"the event {event_hash} is not in the log yet")
    size = Checkpoint.parse(parse_note(note).text).size
    if size > latest.size:
        raise ProofRange(f"the log has no checkpoint of size {size} yet")
    logged = index < size and log.entries(index, index + 1, latest.size)[0].event_hash
    if not logged or logged.hex() != event_hash:
        raise NotLogged(f"the event {event_hash} is not in the log at size {size}")
    # Complete subtrees of the smaller tree are the same in the current one.
    path = prove_inclusion(index, size, TileHashReader(log.tiles, latest.size))
    return build_proof(index, path, note).encode()


def consistency_proof(log: LogDirectory, old_size: int, new_size: int) -> str:
    """RFC 6962 consistency proof lines (base64, one per line) between two tree sizes."""
    size = log.size()
    if not 0 <= old_size <= new_size <= size:
        raise ProofRange(f"no consistency proof from {old_size} to {new_size} (log size {size})")
    # Complete subtrees below new_size are the same in the current tree, whose tiles exist.
    proof = prove_consistency(old_size, new_size, TileHashReader(log.tiles, size))
    return "".join(b64encode(h) + "\n" for h in proof)
