"""C2SP tlog-policy: which logs and witnesses a verifier trusts, and the quorum.

    log <vkey> [<url>]
    witness <name> <vkey> [<url>]
    group <name> all|any|<k> <member>...
    quorum <name>|none

A checkpoint is trusted when a listed log named as its origin signed it and the
witnesses that validly cosigned it satisfy the quorum. Names (witnesses and groups share
one namespace) are opaque octets; a group only names members defined before it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from charter.core.errors.log import (
    BadNoteSignature,
    CheckpointUntrusted,
    MalformedKey,
    MalformedPolicy,
)
from charter.tlog.checkpoint import (
    Checkpoint,
    CosignatureVerifier,
    OpenedCheckpoint,
    open_checkpoint,
)
from charter.tlog.note import Ed25519Verifier, UnverifiedNote

NONE = "none"
LOCAL_WITNESS_SCHEME = "file:"
"""A witness URL of this scheme names a witness's state directory on this host: reached
in process (`charter.witness.local`), and not independent of the log."""
_SEPARATORS = re.compile(r"[ \t]+")
_THRESHOLD = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class PolicyLog:
    verifier: Ed25519Verifier
    url: str | None


@dataclass(frozen=True, slots=True)
class PolicyWitness:
    name: str
    verifier: CosignatureVerifier
    url: str | None

    @property
    def local(self) -> bool:
        return self.url is not None and self.url.startswith(LOCAL_WITNESS_SCHEME)


@dataclass(frozen=True, slots=True)
class PolicyGroup:
    name: str
    threshold: int
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TrustedCheckpoint:
    """A checkpoint that satisfied the policy, with the witnesses (policy names) behind it."""

    checkpoint: Checkpoint
    witnesses: tuple[str, ...]
    opened: OpenedCheckpoint


@dataclass(frozen=True, slots=True)
class Policy:
    logs: tuple[PolicyLog, ...]
    witnesses: Mapping[str, PolicyWitness]
    groups: Mapping[str, PolicyGroup]
    quorum: str

    def satisfied(self, cosigned: Collection[str]) -> bool:
        """Whether witnesses `cosigned` (policy names) meet the quorum."""
        return self.quorum == NONE or self._witnessed(self.quorum, cosigned)

    def _witnessed(self, name: str, cosigned: Collection[str]) -> bool:
        if name in self.witnesses:
            return name in cosigned
        group = self.groups[name]
        done = sum(1 for m in group.members if self._witnessed(m, cosigned))
        return done >= group.threshold

    def verify_checkpoint(self, msg: bytes) -> TrustedCheckpoint:
        """Check a checkpoint note against the policy, or raise `CheckpointUntrusted`."""
        by_key = {(w.verifier.name, w.verifier.key_id): w.name for w in self.witnesses.values()}
        try:
            opened = open_checkpoint(
                msg,
                [log.verifier for log in self.logs],
                [w.verifier for w in self.witnesses.values()],
            )
        except (UnverifiedNote, BadNoteSignature) as exc:
            raise CheckpointUntrusted(f"checkpoint not trusted: {exc.message}") from None
        names = tuple(sorted(by_key[key] for key in opened.cosigned))
        if not self.satisfied(names):
            raise CheckpointUntrusted(
                f"the witness quorum {self.quorum} is not met (cosigned by: "
                f"{', '.join(names) or 'nobody'})"
            )
        return TrustedCheckpoint(opened.checkpoint, names, opened)


def _check_octets(data: bytes) -> None:
    for byte in data:
        if (byte < 0x20 and byte not in (0x09, 0x0A)) or byte == 0x7F:
            raise MalformedPolicy("a policy may contain no control characters but tab and newline")


def parse_policy(data: bytes | str) -> Policy:
    """Parse a tlog-policy file; any violation of tlog-policy raises `MalformedPolicy`."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    _check_octets(raw)
    text = raw.decode("utf-8", "surrogateescape")  # non-ASCII stays opaque octets
    logs: list[PolicyLog] = []
    witnesses: dict[str, PolicyWitness] = {}
    groups: dict[str, PolicyGroup] = {}
    quorum: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        words = [w for w in _SEPARATORS.split(line.strip(" \t")) if w]
        if not words or words[0].startswith("#"):
            continue
        try:
            keyword, args = words[0], words[1:]
            if keyword == "log":
                logs.append(_log(args, logs))
            elif keyword == "witness":
                witness = _witness(args, witnesses, groups)
                witnesses[witness.name] = witness
            elif keyword == "group":
                group = _group(args, witnesses, groups)
                groups[group.name] = group
            elif keyword == "quorum":
                if quorum is not None:
                    raise MalformedPolicy("a policy has exactly one quorum line")
                if len(args) != 1:
                    raise MalformedPolicy("quorum takes one name")
                if args[0] != NONE and args[0] not in witnesses and args[0] not in groups:
                    raise MalformedPolicy(f"the quorum {args[0]} is not defined before it")
                quorum = args[0]
            else:
                raise MalformedPolicy(f"unknown keyword {keyword}")
        except (MalformedPolicy, MalformedKey) as exc:
            raise MalformedPolicy(f"line {number}: {exc.message}") from None
    if quorum is None:
        raise MalformedPolicy("a policy needs a quorum line")
    return Policy(tuple(logs), witnesses, groups, quorum)


def _log(args: list[str], logs: list[PolicyLog]) -> PolicyLog:
    if len(args) not in (1, 2):
        raise MalformedPolicy("log takes a vkey and an optional URL")
    verifier = Ed25519Verifier.from_vkey(args[0])
    if any(log.verifier.public_key == verifier.public_key for log in logs):
        raise MalformedPolicy("duplicate log key")
    return PolicyLog(verifier, args[1] if len(args) == 2 else None)


def _witness(
    args: list[str], witnesses: Mapping[str, PolicyWitness], groups: Mapping[str, PolicyGroup]
) -> PolicyWitness:
    if len(args) not in (2, 3):
        raise MalformedPolicy("witness takes a name, a vkey and an optional URL")
    name = args[0]
    _new_name(name, witnesses, groups)
    verifier = CosignatureVerifier.from_vkey(args[1])
    if any(w.verifier.public_key == verifier.public_key for w in witnesses.values()):
        raise MalformedPolicy("duplicate witness key")
    return PolicyWitness(name, verifier, args[2] if len(args) == 3 else None)


def _group(
    args: list[str], witnesses: Mapping[str, PolicyWitness], groups: Mapping[str, PolicyGroup]
) -> PolicyGroup:
    if len(args) < 3:
        raise MalformedPolicy("group takes a name, a threshold and at least one member")
    name, threshold_text, members = args[0], args[1], tuple(args[2:])
    _new_name(name, witnesses, groups)
    for member in members:
        if member not in witnesses and member not in groups:
            raise MalformedPolicy(f"group member {member} is not defined before the group")
    if len(set(members)) != len(members):
        raise MalformedPolicy("a name may be a group member only once")
    if threshold_text == "all":
        threshold = len(members)
    elif threshold_text == "any":
        threshold = 1
    elif _THRESHOLD.fullmatch(threshold_text) and int(threshold_text) <= len(members):
        threshold = int(threshold_text)
    else:
        raise MalformedPolicy("a group threshold is all, any or a number from 1 to n")
    return PolicyGroup(name, threshold, members)


def _new_name(
    name: str, witnesses: Mapping[str, PolicyWitness], groups: Mapping[str, PolicyGroup]
) -> None:
    if name == NONE:
        raise MalformedPolicy("the name none is reserved")
    if name in witnesses or name in groups:
        raise MalformedPolicy(f"the name {name} is already defined")
