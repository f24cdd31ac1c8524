"""The C2SP tlog-witness wire texts (c2sp.org/tlog-witness), shared by witness and client.

    POST <submission prefix>/add-checkpoint      body: `old <size>`, proof lines, "", note
    409 Conflict, Content-Type text/x.tlog.size  body: `<latest size>\\n`
    GET <monitoring prefix>/<sha256 hex(origin)>/checkpoint

Pure: no I/O. Parsing is strict, as tlog-witness words it: every line ends in a newline, the
size is a decimal without leading zeros, at most 63 proof lines of one base64 hash each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors.log import TlogError
from charter.tlog.merkle import HASH_SIZE
from charter.tlog.note import b64decode, b64encode

ADD_CHECKPOINT = "add-checkpoint"
SIZE_CONTENT_TYPE = "text/x.tlog.size"
MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = 64 * 1024
"""A request is a size line, 63 hashes and a checkpoint of at most 100 signatures: far less."""


class MalformedWitnessRequest(TlogError):
    """The add-checkpoint request body is malformed."""

    code = "witness_request_malformed"


def origin_hash(origin: str) -> str:
    """The lowercase hex SHA-256 of the origin: the monitoring path's key."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


def checkpoint_path(origin: str) -> str:
    """The monitoring path, relative to the monitoring prefix: `<origin hash>/checkpoint`."""
    return f"{origin_hash(origin)}/checkpoint"


def parse_size(text: str) -> int:
    """A tree size as the wire writes it (decimal, no leading zeros, 64 bits)."""
    size = parse_decimal(text, UINT64_MAX)
    if size is None:
        raise MalformedWitnessRequest(f"not a tree size: {text[:40]!r}")
    return size


def size_body(size: int) -> bytes:
    """The body of a 409 answer: the latest size and a newline."""
    return f"{size}\n".encode("ascii")


def parse_size_body(body: bytes) -> int:
    """The size in a 409 answer's body."""
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        raise MalformedWitnessRequest("the size body is not ASCII") from None
    if not text.endswith("\n"):
        raise MalformedWitnessRequest("the size body ends with a newline")
    return parse_size(text[:-1])


@dataclass(frozen=True, slots=True)
class AddCheckpoint:
    """An add-checkpoint request: the size the client believes the witness holds, the
    consistency proof from it, and the signed checkpoint note."""

    old_size: int
    proof: tuple[bytes, ...]
    note: bytes

    def encode(self) -> bytes:
        """The request body."""
        if len(self.proof) > MAX_PROOF_LINES:
            raise MalformedWitnessRequest(f"at most {MAX_PROOF_LINES} proof lines")
        lines = [f"old {self.old_size}", *(b64encode(h) for h in self.proof), ""]
        return "".join(line + "\n" for line in lines).encode("ascii") + self.note

    @classmethod
    def parse(cls, body: bytes) -> AddCheckpoint:
        """Parse a request body; any deviation from tlog-witness raises `MalformedWitnessRequest`.
        The note itself is checked later, by whoever opens it."""
        head, sep, note = body.partition(b"\n\n")
        if not sep:
            raise MalformedWitnessRequest("the request needs an empty line before the checkpoint")
        try:
            lines = head.decode("ascii").split("\n")
        except UnicodeDecodeError:
            raise MalformedWitnessRequest("the size and proof lines are ASCII") from None
        old_line, proof_lines = lines[0], lines[1:]
        if not old_line.startswith("old "):
            raise MalformedWitnessRequest("the request starts with an `old <size>` line")
        old_size = parse_size(old_line[len("old ") :])
        if len(proof_lines) > MAX_PROOF_LINES:
            raise MalformedWitnessRequest(f"at most {MAX_PROOF_LINES} proof lines")
        return cls(old_size, tuple(_proof_hash(line) for line in proof_lines), note)


def _proof_hash(line: str) -> bytes:
    try:
        value = b64decode(line)
    except ValueError:
        raise MalformedWitnessRequest("a proof line is one base64 hash") from None
    if len(value) != HASH_SIZE:
        raise MalformedWitnessRequest(f"a proof hash is {HASH_SIZE} bytes")
    return value


def encode_request(old_size: int, proof: Sequence[bytes], note: bytes) -> bytes:
    """Shorthand for `AddCheckpoint(old_size, tuple(proof), note).encode()`."""
    return AddCheckpoint(old_size, tuple(proof), note).encode()
