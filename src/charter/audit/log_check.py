"""Checking chains against a log mirror (docs/transparency-log.md, "Check chains against it").

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from charter.audit.evidence import Problem
from charter.core.errors.log import LogNotConfigured, LogProofInvalid, TlogError, WitnessUnreachable
from charter.core.jsontypes import JsonObject
from charter.tlog.checkpoint import Checkpoint, open_checkpoint
from charter.tlog.entry import LogEntry, process_key
from charter.tlog.logdir import LogDirectory, write_atomically
from charter.tlog.merkle import prove_consistency, verify_consistency
from charter.tlog.note import parse_note
from charter.tlog.policy import Policy
from charter.tlog.tiles import TileHashReader, verify_tiles
from charter.tlog.witness_protocol import checkpoint_path


@dataclass(frozen=True, slots=True)
class ChainEvent:
    seq: int
    hash: str
    received_at: datetime | None


@dataclass(frozen=True, slots=True)
class MissingProcess:
    """A process the log holds entries of that no stored process has: deleted outright,
    or created after the backup the database was restored from."""

    process_key: bytes
    first_index: int
    last_index: int
    last_seq: int
    last_hash: str
    entries: int

    def problem(self, size: int) -> Problem:
        return Problem(
            None,
            "process_missing",
            f"the log at size {size} holds {self.entries} event(s) of process key"
            f" {self.process_key.hex()} (indexes {self.first_index}..{self.last_index},"
            f" last logged seq {self.last_seq}, event {self.last_hash}) and no stored"
            " process has that key: it was deleted, or the database restored to before it",
        )

    def to_json(self) -> JsonObject:
        return {
            "process_key": self.process_key.hex(),
            "first_index": self.first_index,
            "last_index": self.last_index,
            "last_seq": self.last_seq,
            "last_hash": self.last_hash,
            "entries": self.entries,
        }


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

    def missing(self, stored: Iterable[str]) -> list[MissingProcess]:
        """Every process key of the log that none of the `stored` process ids hashes to,
        in log order (of its first entry)."""
        known = {self.key(process_id) for process_id in stored}
        gone = []
        for key, logged in self.entries.items():
            if key in known:
                continue
            indexes = [index for _, index in logged.values()]
            last_seq = max(logged)
            gone.append(
                MissingProcess(
                    key, min(indexes), max(indexes), last_seq, logged[last_seq][0], len(logged)
                )
            )
        return sorted(gone, key=lambda m: m.first_index)

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
    problem = _compare(
        log.tiles, note, current, stored_note, stored, f"this verifier ({path}) accepted"
    )
    if problem is None and current.size > stored.size:
        write_atomically(path, note)
    return problem


WitnessReader = Callable[[str, str], "bytes | None"]
"""`read(url, origin)`: the latest checkpoint note a witness holds for `origin` (None when
it holds none), or `WitnessUnreachable`."""


def read_witness_http(
    url: str, origin: str, *, client: httpx.Client | None = None, timeout: float = 10.0
) -> bytes | None:
    """GET C2SP tlog-witness's monitoring endpoint, `<url>/<sha256(origin)>/checkpoint`:
    the note (200), None (404: nothing for that origin), else `WitnessUnreachable`."""
    address = f"{url.rstrip('/')}/{checkpoint_path(origin)}"
    try:
        if client is None:
            with httpx.Client(timeout=timeout) as own:
                answer = own.get(address)
        else:
            answer = client.get(address)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise WitnessUnreachable(f"cannot read {address}: {exc}") from None
    if answer.status_code == 404:
        return None
    if answer.status_code != 200:
        raise WitnessUnreachable(f"{address} answered {answer.status_code}")
    return answer.content


def check_witness(
    url: str,
    directory: Path,
    policy: Policy,
    *,
    client: httpx.Client | None = None,
    read: WitnessReader | None = None,
) -> Problem | None:
    """Compare the mirror's checkpoint with the latest one a witness holds for its origin
    (read with `read`, by default over HTTP with `client`). None when the mirror extends
    it, or the witness holds nothing; see `compare_with_witness`. Raises
    `WitnessUnreachable` when the witness cannot be read."""
    log = LogDirectory(directory)
    note = log.checkpoint_note()
    if note is None:
        return None
    current = policy.verify_checkpoint(note).checkpoint
    reader = read or (lambda u, o: read_witness_http(u, o, client=client))
    held_note = reader(url, current.origin)
    if held_note is None:
        return None
    return compare_with_witness(url, held_note, policy, note, current, log.tiles)


def compare_with_witness(
    url: str,
    held_note: bytes,
    policy: Policy,
    note: bytes,
    current: Checkpoint,
    tiles: Mapping[str, bytes],
) -> Problem | None:
    """A log's checkpoint (`note`, trusted, with its `tiles`) against the one a witness
    holds: a witness that cosigned a larger tree than the log offers is `log_rollback`,
    one of the same size with another root, or not a prefix of the log's tree,
    `checkpoint_equivocation`. Only the log's signature is required on the witness's copy:
    it proves the log reached that size."""
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
    return _compare(tiles, note, current, held_note, held, f"the witness {url} cosigned")


def _compare(
    tiles: Mapping[str, bytes],
    note: bytes,
    current: Checkpoint,
    other_note: bytes,
    other: Checkpoint,
    who: str,
) -> Problem | None:
    """`current` (the log's) against the checkpoint `who` saw: rollback, equivocation
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
            read = TileHashReader(tiles, current.size)
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
