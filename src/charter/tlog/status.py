"""The log's status as its directory shows it (no database: the files are the truth)."""

from __future__ import annotations

from pathlib import Path

from charter.tlog.logdir import LogDirectory
from charter.tlog.note import parse_note


def log_status(directory: Path) -> dict[str, object]:
    """`{"origin", "size", "cosignatures", "halted", "halt_message"}` of a log directory."""
    log = LogDirectory(directory)
    note = log.checkpoint_note()
    checkpoint = log.checkpoint()
    halted = log.halted()
    return {
        "origin": checkpoint.origin if checkpoint else None,
        "size": checkpoint.size if checkpoint else 0,
        # Signature lines beyond the log's own: witness cosignatures (checked by verifiers).
        "cosignatures": max(0, len(parse_note(note).signatures) - 1) if note else 0,
        "halted": halted.get("code") if halted else None,
        "halt_message": halted.get("message") if halted else None,
    }
