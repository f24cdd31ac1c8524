"""The `log` member of a `charter-export/2` bundle (docs/transparency-log.md, "Bundles") and its
offline check, without a mirror.

    "log": {"origin", "process_key": <64 hex>|null, "seq": n, "proof": <tlog-proof>|null,
            "unlogged": k}

`proof` is a C2SP tlog-proof@v1 of the last event of the bundle that is in the published
log, `seq` that event's seq (0 and `proof` null when none is yet), `unlogged` how many
events follow it. `process_key` is the leaf's pseudonym, HMAC(log salt, process id): the
bundle carries it, so an auditor needs no salt; one who holds the salt also checks it.
Because every event links to its predecessor, one proof commits to the chain up to
`seq`: a lower bound only, as nothing here says the log holds no later event of the
process (that needs a mirror: `charter verify --log`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import cast

from charter.audit.evidence import EventRow, Evidence, Problem
from charter.core.errors import Malformed
from charter.core.errors.log import (
    CheckpointUntrusted,
    LogProofInvalid,
    MalformedCheckpoint,
    MalformedNote,
    NotLogged,
    TileMissing,
    TlogError,
)
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.db.database import Conn
from charter.db.queries import query
from charter.tlog.checkpoint import Checkpoint, open_checkpoint
from charter.tlog.entry import LogEntry, process_key
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import verify_inclusion
from charter.tlog.note import parse_note
from charter.tlog.policy import Policy
from charter.tlog.proof import TlogProof
from charter.tlog.serving import inclusion_proof

_HEX64 = re.compile("[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class BundleLog:
    """What a bundle says about its process in the log."""

    origin: str
    process_key: bytes | None
    seq: int
    proof: str | None
    unlogged: int

    def to_json(self) -> JsonObject:
        return {
            "origin": self.origin,
            "process_key": None if self.process_key is None else self.process_key.hex(),
            "seq": self.seq,
            "proof": self.proof,
            "unlogged": self.unlogged,
        }

    @classmethod
    def from_json(cls, value: JsonValue) -> BundleLog | None:
        """The member as a bundle carries it (null: no log); Malformed names what is wrong."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise Malformed("bundle.log must be an object or null")
        origin, key, seq, proof, unlogged = (
            value.get(name) for name in ("origin", "process_key", "seq", "proof", "unlogged")
        )
        if not isinstance(origin, str) or not origin:
            raise Malformed("bundle.log.origin must be a non-empty string")
        if type(seq) is not int or seq < 0:
            raise Malformed("bundle.log.seq must be an integer from 0")
        if type(unlogged) is not int or unlogged < 0:
            raise Malformed("bundle.log.unlogged must be an integer from 0")
        if (key is None) != (proof is None) or (proof is None) != (seq == 0):
            raise Malformed("bundle.log: process_key, proof and seq > 0 go together")
        if key is not None and (not isinstance(key, str) or not _HEX64.fullmatch(key)):
            raise Malformed("bundle.log.process_key must be 64 lowercase hex characters")
        if proof is not None and not isinstance(proof, str):
            raise Malformed("bundle.log.proof must be a string or null")
        return cls(origin, None if key is None else bytes.fromhex(key), seq, proof, unlogged)


def logged_member(conn: Conn, log: LogDirectory, evidence: Evidence) -> BundleLog:
    """The `log` member for `evidence`: the proof of its last event in the published log.

    The database's `log_entries` only says where to look (a cache); each candidate is
    checked against the entry bundle before it is proven, and the proof against the
    signed root is the verifier's to check.
    """
    checkpoint = log.checkpoint()
    if checkpoint is None:
        raise NotLogged("the log has no checkpoint yet")
    hashes = {event.seq: event.hash for event in evidence.events}
    head = max(hashes, default=0)
    rows = conn.execute(query("log_entries_of"), {"process_id": evidence.process.id}).fetchall()
    for row in rows:  # newest first
        seq, event_hash, index = cast(int, row[0]), str(row[1]), cast(int, row[2])
        if hashes.get(seq) != event_hash or index >= checkpoint.size:
            continue
        try:
            proof = inclusion_proof(log, index, event_hash)
            entry = log.entries(index, index + 1, checkpoint.size)[0]
        except (NotLogged, TileMissing):
            continue
        return BundleLog(checkpoint.origin, entry.process_key, seq, proof, head - seq)
    return BundleLog(checkpoint.origin, None, 0, None, head)


@dataclass(frozen=True, slots=True)
class BundleTrust:
    """What an offline verifier brings: the policy, optionally the salt and its trust
    directory (the newest checkpoint it accepted per origin), and how strict to be."""

    policy: Policy | None
    salt: bytes | None = None
    trust_dir: Path | None = None
    require: bool = False
    grace_s: float = 600.0


def check_bundle_log(
    bundle: JsonValue,
    events: Sequence[EventRow],
    process_id: str,
    trust: BundleTrust,
    now: datetime,
) -> tuple[list[Problem], JsonObject | None]:
    """The log problems of a bundle and the report's `log` object, None
    for a bundle without a log (`charter-export/1`, or a deployment without one)."""
    member = _member(bundle)
    if member is None or member.proof is None or member.process_key is None:
        problems = []
        if trust.require:
            what = "no log proof" if member is None else "no proof: nothing was logged yet"
            problems.append(Problem(None, "not_logged", f"the bundle carries {what}"))
        if member is None:
            return problems, None
        return problems, {"origin": member.origin, "proven": False, "unlogged": len(events)}
    report: JsonObject = {"origin": member.origin, "seq": member.seq, "proven": False}
    try:
        proven_by = _Claim(member.origin, member.process_key, member.seq, member.proof)
        problems, proven = _check_proof(proven_by, events, process_id, trust)
    except CheckpointUntrusted as exc:
        return [Problem(None, "checkpoint_untrusted", exc.message)], report
    except TlogError as exc:  # a malformed proof, note or checkpoint, or a path that fails
        return [Problem(None, "log_proof_invalid", exc.message)], report
    report |= proven
    unlogged = [e for e in events if e.seq > member.seq]
    report["unlogged"] = len(unlogged)
    if trust.require:
        problems += [
            Problem(e.seq, "not_logged", f"not in the log at size {report.get('checkpoint_size')}")
            for e in unlogged
            if _overdue(e, now, trust.grace_s)
        ]
    return problems, report


@dataclass(frozen=True, slots=True)
class _Claim:
    """A bundle's claim that its event at `seq` is in the log: what gets checked."""

    origin: str
    process_key: bytes
    seq: int
    proof: str


def _check_proof(
    member: _Claim,
    events: Sequence[EventRow],
    process_id: str,
    trust: BundleTrust,
) -> tuple[list[Problem], JsonObject]:
    """Checkpoint against the policy, leaf against the checkpoint root, process key
    against the salt; raises on the first failure, returns any trust-store problem."""
    key = member.process_key
    proof = TlogProof.parse(member.proof)
    if trust.policy is None:
        raise CheckpointUntrusted("no tlog-policy to check the checkpoint against")
    trusted = trust.policy.verify_checkpoint(proof.checkpoint)
    checkpoint = trusted.checkpoint
    if checkpoint.origin != member.origin:
        raise LogProofInvalid(
            f"the proof's checkpoint is of {checkpoint.origin!r}, not {member.origin!r}"
        )
    event = next((e for e in events if e.seq == member.seq), None)
    if event is None or not _HEX64.fullmatch(event.hash):
        raise LogProofInvalid(f"the bundle has no event at the logged seq {member.seq}")
    # The leaf recomputed from the bundle: its event at `seq` under the process key.
    leaf = LogEntry(key, member.seq, bytes.fromhex(event.hash)).leaf_hash()
    verify_inclusion(proof.index, checkpoint.size, leaf, proof.path, checkpoint.root)
    if trust.salt is not None and not hmac.compare_digest(process_key(trust.salt, process_id), key):
        raise LogProofInvalid("the process key is not HMAC(salt, process id) under your salt")
    problems = (
        [] if trust.trust_dir is None else _against_trusted(trust.trust_dir, proof, checkpoint)
    )
    report: JsonObject = {
        "origin": checkpoint.origin,
        "checkpoint_size": checkpoint.size,
        "witnesses": list(trusted.witnesses),
        "head_index": proof.index,
        "seq": member.seq,
        "proven": True,
        "completeness": "lower_bound_only",
    }
    return problems, report


def _against_trusted(trust_dir: Path, proof: TlogProof, checkpoint: Checkpoint) -> list[Problem]:
    """Offline, a checkpoint can only be compared with a trusted one of the same size
    (no tiles for a consistency proof): a different root there is a fork of the log."""
    path = trust_dir / hashlib.sha256(checkpoint.origin.encode()).hexdigest() / "latest"
    try:
        stored_note = path.read_bytes()
        stored = Checkpoint.parse(parse_note(stored_note).text)
    except (FileNotFoundError, MalformedNote, MalformedCheckpoint):
        return []
    if stored.size != checkpoint.size or stored.root == checkpoint.root:
        return []
    return [
        Problem(
            None,
            "checkpoint_equivocation",
            f"the bundle's checkpoint (size {checkpoint.size}) has another root than the one"
            f" this verifier accepted ({path})\n{stored_note.decode(errors='replace')}\n"
            f"{proof.checkpoint.decode(errors='replace')}",
        )
    ]


def bundle_checkpoint(bundle: JsonValue) -> bytes:
    """The checkpoint note the bundle's log proof is against (the proof must parse)."""
    member = _member(bundle)
    if member is None or member.proof is None:
        raise LogProofInvalid("the bundle carries no log proof")
    return TlogProof.parse(member.proof).checkpoint


def compare_bundle_with_witness(
    url: str, held_note: bytes, policy: Policy, note: bytes
) -> Problem | None:
    """A bundle's checkpoint (`note`, already trusted) against the latest one a witness
    holds: the same size with another root is a fork of the log itself
    (`checkpoint_equivocation`). A larger tree is the log moving on; whether it extends
    the bundle's needs the tiles (`charter verify --log` against a mirror)."""
    bundled = Checkpoint.parse(parse_note(note).text)
    try:
        held = open_checkpoint(held_note, [log.verifier for log in policy.logs]).checkpoint
    except TlogError as exc:
        return Problem(
            None,
            "checkpoint_untrusted",
            f"the witness {url} serves a checkpoint the log did not sign: {exc.message}",
        )
    if held.origin != bundled.origin:
        return Problem(
            None, "checkpoint_untrusted", f"the witness {url} serves another origin, {held.origin}"
        )
    if held.size == bundled.size and held.root != bundled.root:
        return Problem(
            None,
            "checkpoint_equivocation",
            f"the bundle's checkpoint (size {bundled.size}) has another root than the one the"
            f" witness {url} cosigned\n{held_note.decode(errors='replace')}\n"
            f"{note.decode(errors='replace')}",
        )
    return None


def _member(bundle: JsonValue) -> BundleLog | None:
    if not isinstance(bundle, dict):
        return None
    return BundleLog.from_json(bundle.get("log"))


def _overdue(event: EventRow, now: datetime, grace_s: float) -> bool:
    try:
        received = parse_rfc3339(event.received_at) if event.received_at else None
    except TimeFormatError:
        return True
    return received is None or (now - received).total_seconds() > grace_s
