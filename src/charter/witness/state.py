"""The witness's memory: the latest cosigned checkpoint per origin, and refused evidence.

    logs/<sha256 hex(origin)>/checkpoint   the latest cosigned note: the checkpoint, the
                                           log signature(s) verified and this witness's
                                           cosignature (what the monitoring URL serves)
    logs/<sha256 hex(origin)>/lock         the lock file of that origin
    refused/<sha256 hex(origin)>/<reason>-<sha256 hex(request)[:16]>.json
                                           a refused, validly signed checkpoint

tlog-witness requires the check of the old size and the update to be one atomic step, or
two racing requests can roll the size back. `locked(origin)` holds an exclusive `flock`
on the origin's lock file for that whole step: it excludes other threads (each call opens
its own file description) and other processes (`charter witness cosign` beside a running
server) alike. The update writes a temporary file, fsyncs it, renames it over the old one
and fsyncs the directory, so a reader or a crash sees either the old or the new record.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from charter.tlog.checkpoint import Checkpoint, cosignature_time
from charter.tlog.note import Signature, parse_note
from charter.tlog.witness_protocol import origin_hash

EVIDENCE_FORMAT = "charter-witness-evidence/1"


@dataclass(frozen=True, slots=True)
class Latest:
    """The latest checkpoint this witness cosigned for one origin."""

    checkpoint: Checkpoint
    note: bytes
    cosigned_at: int | None  # the cosignature's POSIX time, if the note carries it


@dataclass(frozen=True, slots=True)
class Evidence:
    """A validly signed checkpoint the witness refused, and why."""

    reason: str  # rollback | equivocation | inconsistent
    message: str
    old_size: int
    proof: tuple[str, ...]  # base64 hashes, as sent
    submitted: bytes  # the checkpoint note, as sent
    latest: bytes | None  # what the witness held when it refused


class WitnessState:
    """The files under one state directory. `cosigner` (name, key ID) finds the
    witness's own cosignature in stored notes."""

    def __init__(self, directory: Path, cosigner: tuple[str, int] | None = None) -> None:
        self.directory = directory
        self._cosigner = cosigner

    def _origin_dir(self, origin: str) -> Path:
        return self.directory / "logs" / origin_hash(origin)

    def locked(self, origin: str) -> contextlib.AbstractContextManager[None]:
        """Hold the origin's exclusive lock (blocking until it is free)."""
        folder = self._origin_dir(origin)
        _durable_mkdir(folder)
        return self._locked_folder(folder)

    @staticmethod
    @contextlib.contextmanager
    def _locked_folder(folder: Path) -> Iterator[None]:
        fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    def latest(self, origin: str) -> Latest | None:
        """The record of `origin`, or None if this witness never cosigned for it."""
        return self._read(self._origin_dir(origin) / "checkpoint")

    def latest_by_hash(self, hex_hash: str) -> Latest | None:
        """The record under a monitoring path's origin hash (64 lowercase hex)."""
        if len(hex_hash) != 64 or any(c not in "0123456789abcdef" for c in hex_hash):
            return None
        return self._read(self.directory / "logs" / hex_hash / "checkpoint")

    def all_latest(self) -> list[Latest]:
        """Every origin's record, by origin."""
        root = self.directory / "logs"
        folders = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
        found = [self._read(d / "checkpoint") for d in folders]
        return sorted((x for x in found if x is not None), key=lambda x: x.checkpoint.origin)

    def _read(self, path: Path) -> Latest | None:
        try:
            note = path.read_bytes()
        except FileNotFoundError:
            return None
        parsed = parse_note(note)
        checkpoint = Checkpoint.parse(parsed.text)
        return Latest(checkpoint, note, self._cosigned_at(parsed.signatures))

    def _cosigned_at(self, signatures: tuple[Signature, ...]) -> int | None:
        for sig in signatures:
            if (sig.name, sig.key_id) == self._cosigner:
                return cosignature_time(sig)
        return None

    def replace(self, origin: str, note: bytes) -> None:
        """Make `note` the origin's record, durably (call it holding `locked(origin)`)."""
        _write_atomically(self._origin_dir(origin) / "checkpoint", note)

    def keep_evidence(self, origin: str, evidence: Evidence, now: datetime) -> Path:
        """Write `evidence` once: the same refused request is recorded a single time, so
        a log retrying it cannot fill the disk (and only the log key can make new ones)."""
        digest = hashlib.sha256(
            f"{evidence.old_size}\n{','.join(evidence.proof)}\n".encode() + evidence.submitted
        ).hexdigest()
        folder = self.directory / "refused" / origin_hash(origin)
        _durable_mkdir(folder)
        path = folder / f"{evidence.reason}-{digest[:16]}.json"
        record = {
            "format": EVIDENCE_FORMAT,
            "reason": evidence.reason,
            "message": evidence.message,
            "origin": origin,
            "refused_at": now.isoformat().replace("+00:00", "Z"),
            "old_size": evidence.old_size,
            "proof": list(evidence.proof),
            "submitted": evidence.submitted.decode("utf-8"),
            "latest": evidence.latest.decode("utf-8") if evidence.latest else None,
        }
        data = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        with contextlib.suppress(FileExistsError):
            _write_atomically(path, data, replace=False)
        return path

    def sweep_temporaries(self) -> int:
        """Delete temporary files a crash left behind (each under its origin's lock, so
        never one another process is about to rename). Returns how many."""
        root = self.directory / "logs"
        swept = 0
        for folder in sorted(root.iterdir()) if root.is_dir() else []:
            if not folder.is_dir():
                continue
            with self._locked_folder(folder):
                refused = self.directory / "refused" / folder.name
                for stale in [*folder.glob(".checkpoint.*"), *refused.glob(".*.json.*")]:
                    stale.unlink(missing_ok=True)
                    swept += 1
        return swept

    def evidence_files(self) -> list[Path]:
        root = self.directory / "refused"
        return sorted(root.glob("*/*.json")) if root.is_dir() else []


def _durable_mkdir(path: Path) -> None:
    """mkdir -p, fsyncing the parent of each directory created: a new origin's folder
    must survive a power cut as surely as the record written into it."""
    if path.is_dir():
        return
    _durable_mkdir(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        return
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Temporary file, fsync, rename (or link, which fails if `path` exists), fsync dir."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    _fsync_dir(path.parent)
