"""The log's status as its directory and policy show it (no database: the files are the
truth), including how far its witnessing can be trusted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from charter.core.errors.log import MalformedPolicy
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import parse_note
from charter.tlog.policy import NONE, parse_policy

UNDETECTABLE = "no witness: a rollback or fork of the log is undetectable"
NOT_INDEPENDENT = "local witness only: not independent, a restore of the whole host is undetectable"


@dataclass(frozen=True, slots=True)
class Witnessing:
    """What publishes the log's checkpoints: `independent` witnesses, a `local` one on
    this host only, or `none` (no policy, or `quorum none`: published unwitnessed)."""

    mode: str
    witnesses: tuple[str, ...]
    warning: str | None

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "witnesses": list(self.witnesses), "warning": self.warning}


def witnessing(policy_path: Path) -> Witnessing:
    """How the sequencer's policy file witnesses the log."""
    try:
        policy = parse_policy(policy_path.read_bytes())
    except FileNotFoundError:
        return Witnessing(NONE, (), UNDETECTABLE)
    except (OSError, MalformedPolicy) as exc:
        return Witnessing(NONE, (), f"{UNDETECTABLE} (the policy {policy_path}: {exc})")
    asked = [w for w in policy.witnesses.values() if w.url]
    if policy.quorum == NONE or not asked:
        return Witnessing(NONE, (), UNDETECTABLE)
    names = tuple(sorted(w.name for w in asked))
    if all(w.local for w in asked):
        return Witnessing("local", names, NOT_INDEPENDENT)
    return Witnessing("independent", names, None)


def log_status(log: LogDirectory, policy_path: Path) -> dict[str, object]:
    """`{"origin", "size", "cosignatures", "halted", "halt_message", "witnessing"}` of a
    log directory and the policy it is published under."""
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
        "witnessing": witnessing(policy_path).to_json(),
    }
