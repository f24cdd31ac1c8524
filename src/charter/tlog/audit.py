"""Checking chains against a log mirror (design §1b.7, steps 1, 2, 4 and 5).

A mirror is a log directory (the sequencer's own, or a copy). Its checkpoint must satisfy
the policy; its tiles must lead to the checkpoint root (so every entry is the one the
signed tree holds). Then, for each process (its key is HMAC(salt, id)), the last entry
the log holds gives `(seq_L, hash_L)`: a chain ending below seq_L was truncated
(`log_truncated`), a chain whose event at a logged seq differs was forked (`log_fork`),
and events above seq_L are unlogged (`not_logged` once older than the grace period).

The verifier keeps the newest checkpoint it accepted per origin (`trust/<sha256(origin)>/
latest`, as Go's sumdb client does): a mirror older than it is `log_rollback`, one of the
same size with another root, or not consistent with it, `checkpoint_equivocation`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from charter.engine.evidence import Problem
from charter.tlog.checkpoint import Checkpoint, open_checkpoint
from charter.tlog.entry import LogEntry, process_key
from charter.tlog.errors import LogNotConfigured, LogProofInvalid, TlogError, WitnessUnreachable
from charter.tlog.logdir import LogDirectory, write_atomically
from charter.tlog.merkle import prove_consistency, verify_consistency
from charter.tlog.note import parse_note
from charter.tlog.policy import Policy
from charter.tlog.tiles import TileHashReader, verify_tiles


@dataclass(frozen=True, slots=True)
class ChainEvent:
    seq: int
    hash: str
    received_at: datetime | None


@dataclass
class LogMirror:
    """A verified mirror: its trusted checkpoint and every entry by process key and seq."""

    checkpoint: Checkpoint
    witnesses: tuple[str, ...]
    salt: bytes
    entries: dict[bytes, dict[int, tuple[str, int]]] = field(default_factory=dict)
    equivocations: dict[bytes, set[int]] = field(default_factory=dict)

    def key(self, process_id: str) -> bytes:
        return process_key(self.salt, process_id)

    def check(
        self,
        process_id: str,
        chain: Iterable[ChainEvent],
        *,
        now: datetime,
        grace_s: float,
        require: bool,
    ) -> tuple[list[Problem], dict[str, object]]:
        """The log problems of one chain, and the report's `log` object."""
        key = self.key(process_id)
        logged = self.entries.get(key, {})
        events = list(chain)
        problems: list[Problem] = []
        for seq in sorted(self.equivocations.get(key, ())):
            problems.append(
                Problem(None, "log_equivocation", f"the log holds two entries for seq {seq}")
            )
        seq_l = max(logged, default=0)
        end = events[-1].seq if events else 0
        size = self.checkpoint.size
        if end < seq_l:
            problems.append(
                Problem(
                    None,
                    "log_truncated",
                    f"the log at size {size} holds seq {seq_l} of this process (index"
                    f" {logged[seq_l][1]}); the stored chain ends at seq {end}",
                )
            )
        unlogged: list[ChainEvent] = []
        for event in events:
            entry = logged.get(event.seq)
            if entry is not None and entry[0] != event.hash:
                problems.append(
                    Problem(
                        event.seq,
                        "log_fork",
                        f"the log holds event {entry[0]} at this seq (index {entry[1]}),"
                        f" not {event.hash}",
                    )
                )
            elif entry is None and event.seq > seq_l:
                unlogged.append(event)
        overdue = [
            e
            for e in unlogged
            if e.received_at is None or (now - e.received_at).total_seconds() > grace_s
        ]
        if require:
            problems += [
                Problem(e.seq, "not_logged", f"not in the log at size {size}") for e in overdue
            ]
        latest = logged.get(seq_l)
        report: dict[str, object] = {
            "origin": self.checkpoint.origin,
            "checkpoint_size": size,
            "witnesses": list(self.witnesses),
            "latest_in_log": (
                None if latest is None else {"seq": seq_l, "hash": latest[0], "index": latest[1]}
            ),
            "unlogged": len(unlogged),
            "not_logged": len(overdue),
            "completeness": "checked",
        }
        return problems, report


def open_mirror(directory: Path, policy: Policy, salt: bytes) -> LogMirror:
    """Verify a mirror's checkpoint against the policy and its tiles against the checkpoint.

    Raises `CheckpointUntrusted`, `LogProofInvalid` or `TileMissing` (all `TlogError`s).
    """
    log = LogDirectory(directory)
    note = log.checkpoint_note()
    if note is None:
        raise LogNotConfigured(f"no checkpoint in {directory}")
    trusted = policy.verify_checkpoint(note)
    checkpoint = trusted.checkpoint
    raw = verify_tiles(log.tiles, checkpoint.size, checkpoint.root)
    mirror = LogMirror(checkpoint, trusted.witnesses, salt)
    for index, data in enumerate(raw):
        entry = LogEntry.decode(data)
        seqs = mirror.entries.setdefault(entry.process_key, {})
        if entry.seq in seqs:
            mirror.equivocations.setdefault(entry.process_key, set()).add(entry.seq)
            continue
        seqs[entry.seq] = (entry.event_hash.hex(), index)
    return mirror


def trust_path(trust_dir: Path, origin: str) -> Path:
    return trust_dir / hashlib.sha256(origin.encode()).hexdigest() / "latest"


def check_trusted(trust_dir: Path, directory: Path, policy: Policy) -> Problem | None:
    """Compare the mirror's checkpoint with the newest this verifier accepted, and keep the
    newer one. A problem (`log_rollback`, `checkpoint_equivocation`) or None."""
    log = LogDirectory(directory)
    note = log.checkpoint_note()
    if note is None:
        return None
    current = policy.verify_checkpoint(note).checkpoint
    path = trust_path(trust_dir, current.origin)
    try:
        stored_note = path.read_bytes()
    except FileNotFoundError:
        write_atomically(path, note)
        return None
    stored = Checkpoint.parse(parse_note(stored_note).text)
    problem = _compare(log, note, current, stored_note, stored, f"this verifier ({path}) accepted")
    if problem is None and current.size > stored.size:
        write_atomically(path, note)
    return problem


def check_witness(
    url: str, directory: Path, policy: Policy, *, client: httpx.Client | None = None
) -> Problem | None:
    """Compare the mirror's checkpoint with the latest one a witness holds for its origin
    (C2SP tlog-witness's monitoring endpoint, `<url>/<sha256(origin)>/checkpoint`): a
    witness that cosigned a larger tree than the mirror offers is `log_rollback`, one of
    the same size with another root, or not a prefix of the mirror's tree,
    `checkpoint_equivocation`. Only the log's signature is required on the witness's copy:
    it proves the log reached that size. A witness holding nothing for the origin: None.
    Raises `WitnessUnreachable` when the witness cannot be read."""
    log = LogDirectory(directory)
    note = log.checkpoint_note()
    if note is None:
        return None
    current = policy.verify_checkpoint(note).checkpoint
    digest = hashlib.sha256(current.origin.encode()).hexdigest()
    address = f"{url.rstrip('/')}/{digest}/checkpoint"
    try:
        if client is None:
            with httpx.Client(timeout=10.0) as own:
                answer = own.get(address)
        else:
            answer = client.get(address)
    except httpx.HTTPError as exc:
        raise WitnessUnreachable(f"cannot read {address}: {exc}") from None
    if answer.status_code == 404:
        return None
    if answer.status_code != 200:
        raise WitnessUnreachable(f"{address} answered {answer.status_code}")
    held_note = answer.content
    try:
        held = open_checkpoint(held_note, [entry.verifier for entry in policy.logs]).checkpoint
    except TlogError as exc:
        return Problem(
            None,
            "checkpoint_untrusted",
            f"the witness {url} serves a checkpoint the log did not sign: {exc.message}",
        )
    if held.origin != current.origin:
        return Problem(
            None, "checkpoint_untrusted", f"the witness {url} serves another origin, {held.origin}"
        )
    return _compare(log, note, current, held_note, held, f"the witness {url} cosigned")


def _compare(
    log: LogDirectory,
    note: bytes,
    current: Checkpoint,
    other_note: bytes,
    other: Checkpoint,
    who: str,
) -> Problem | None:
    """`current` (the mirror's) against the checkpoint `who` saw: rollback, equivocation
    (with both notes as evidence), or None when `current` extends it."""
    if other.size > current.size:
        return Problem(
            None,
            "log_rollback",
            f"the log offers size {current.size}, but {who} size {other.size}",
        )
    try:
        if other.size == current.size:
            if other.root != current.root:
                raise LogProofInvalid("equal sizes with different roots")
        elif other.size > 0:
            read = TileHashReader(log.tiles, current.size)
            proof = prove_consistency(other.size, current.size, read)
            verify_consistency(other.size, current.size, proof, other.root, current.root)
    except TlogError as exc:
        return Problem(
            None,
            "checkpoint_equivocation",
            f"the log's checkpoint (size {current.size}) is not consistent with the one"
            f" {who} (size {other.size}): {exc.message}\n"
            f"{other_note.decode(errors='replace')}\n{note.decode(errors='replace')}",
        )
    return None
