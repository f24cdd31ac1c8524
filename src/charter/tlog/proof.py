"""C2SP tlog-proof@v1: an offline-verifiable proof that an entry is in a witnessed log.

    c2sp.org/tlog-proof@v1
    [extra <base64>]
    index <n>
    <base64 audit path hash>...
    <empty line>
    <the cosigned checkpoint note, verbatim>

Verification: the checkpoint must satisfy the policy (log signature and witness quorum),
then the audit path must lead from the leaf hash to its root (RFC 9162 §2.1.3.2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors.log import MalformedProof
from charter.tlog.merkle import HASH_SIZE, verify_inclusion
from charter.tlog.note import b64decode, b64encode
from charter.tlog.policy import Policy, TrustedCheckpoint

HEADER = "c2sp.org/tlog-proof@v1"
_INDEX = re.compile(r"index ([0-9]+)")


@dataclass(frozen=True, slots=True)
class TlogProof:
    """An entry's index, its audit path and the cosigned checkpoint it is proven against."""

    index: int
    path: tuple[bytes, ...]
    checkpoint: bytes  # the signed checkpoint note, verbatim
    extra: bytes | None = None  # opaque, unauthenticated application data

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not 0 <= self.index <= UINT64_MAX:
            raise MalformedProof("the index must fit in 64 bits")
        if any(len(h) != HASH_SIZE for h in self.path):
            raise MalformedProof("audit path hashes are 32 bytes")
        try:
            self.checkpoint.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedProof("the checkpoint must be UTF-8") from None

    def encode(self) -> str:
        """The proof text."""
        lines = [HEADER]
        if self.extra is not None:
            lines.append(f"extra {b64encode(self.extra)}")
        lines.append(f"index {self.index}")
        lines.extend(b64encode(h) for h in self.path)
        return "\n".join(lines) + "\n\n" + self.checkpoint.decode("utf-8")

    @classmethod
    def parse(cls, text: str) -> TlogProof:
        """Parse a proof text; the checkpoint part is kept verbatim, checked on verify."""
        head, sep, checkpoint = text.partition("\n\n") if isinstance(text, str) else ("", "", "")
        if not sep:
            raise MalformedProof("a proof needs an empty line before its checkpoint")
        lines = head.split("\n")
        if lines[0] != HEADER:
            raise MalformedProof(f"a proof starts with {HEADER}")
        rest = lines[1:]
        extra = None
        if rest and rest[0].startswith("extra "):
            extra = _b64(rest[0][len("extra ") :], "extra data")
            rest = rest[1:]
        match = _INDEX.fullmatch(rest[0]) if rest else None
        index = None if match is None else parse_decimal(match.group(1), UINT64_MAX)
        if index is None:
            raise MalformedProof("expected an index line (a decimal below 2**64)")
        path = tuple(_b64(line, "audit path hash") for line in rest[1:])
        return cls(index, path, checkpoint.encode("utf-8"), extra)


def _b64(text: str, what: str) -> bytes:
    try:
        value = b64decode(text)
    except ValueError:
        raise MalformedProof(f"the {what} is not base64") from None
    if b64encode(value) != text:
        raise MalformedProof(f"the {what} is not canonical base64")
    return value


def build_proof(
    index: int, path: Sequence[bytes], checkpoint: bytes, extra: bytes | None = None
) -> TlogProof:
    """A proof from an audit path (e.g. `merkle.prove_inclusion`) and a cosigned checkpoint."""
    return TlogProof(index, tuple(path), checkpoint, extra)


def verify_proof(proof: TlogProof, leaf_hash: bytes, policy: Policy) -> TrustedCheckpoint:
    """Check the checkpoint against the policy, then the leaf's inclusion in it.

    Raises `CheckpointUntrusted` (signature or quorum) or `LogProofInvalid` (path).
    """
    trusted = policy.verify_checkpoint(proof.checkpoint)
    cp = trusted.checkpoint
    verify_inclusion(proof.index, cp.size, leaf_hash, proof.path, cp.root)
    return trusted
