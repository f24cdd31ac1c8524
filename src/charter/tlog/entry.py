"""The log entry: 88 bytes naming a process (by pseudonym), a seq and an event hash.

    struct {
        opaque label[16] = "charter-event/1\n";
        opaque process_key[32];      // HMAC-SHA256(log_salt, UTF-8(process_id))
        uint64 seq;                  // big-endian, 1..
        opaque event_hash[32];       // SHA-256 of the JCS envelope (docs/wire-format.md)
    } LogEntry;

Naming the stream and position in every leaf is what lets a monitor compute each
process's latest logged head from the log alone (docs/transparency-log.md, "Formats").
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from charter.core.errors.log import InvalidSalt, MalformedEntry
from charter.tlog.merkle import leaf_hash

LABEL = b"charter-event/1\n"
ENTRY_SIZE = 88
SALT_SIZE = 32
_MAX_SEQ = 2**64 - 1
_HEX64 = re.compile("[0-9a-f]{64}")


def process_key(log_salt: bytes, process_id: str) -> bytes:
    """The process pseudonym: HMAC-SHA256(key=log_salt, msg=UTF-8(process_id))."""
    if not isinstance(log_salt, bytes) or len(log_salt) != SALT_SIZE:
        raise InvalidSalt()
    return hmac.new(log_salt, process_id.encode("utf-8"), hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One leaf of the log."""

    process_key: bytes
    seq: int
    event_hash: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.process_key, bytes) or len(self.process_key) != 32:
            raise MalformedEntry("process_key must be 32 bytes")
        if not isinstance(self.event_hash, bytes) or len(self.event_hash) != 32:
            raise MalformedEntry("event_hash must be 32 bytes")
        if isinstance(self.seq, bool) or not isinstance(self.seq, int):
            raise MalformedEntry("seq must be an integer")
        if not 1 <= self.seq <= _MAX_SEQ:
            raise MalformedEntry("seq must be between 1 and 2**64 - 1")

    @classmethod
    def for_event(
        cls, *, log_salt: bytes, process_id: str, seq: int, event_hash_hex: str
    ) -> LogEntry:
        """The entry of an event as the database stores it (hash as 64 lowercase hex)."""
        if not isinstance(event_hash_hex, str) or not _HEX64.fullmatch(event_hash_hex):
            raise MalformedEntry("event_hash must be 64 lowercase hex characters")
        return cls(process_key(log_salt, process_id), seq, bytes.fromhex(event_hash_hex))

    def encode(self) -> bytes:
        """The 88 bytes of the entry."""
        return LABEL + self.process_key + self.seq.to_bytes(8, "big") + self.event_hash

    @classmethod
    def decode(cls, data: bytes) -> LogEntry:
        """Parse 88 bytes; anything else raises `MalformedEntry`."""
        if not isinstance(data, bytes) or len(data) != ENTRY_SIZE:
            raise MalformedEntry(f"a log entry is {ENTRY_SIZE} bytes")
        if data[:16] != LABEL:
            raise MalformedEntry("the entry label is not charter-event/1")
        return cls(data[16:48], int.from_bytes(data[48:56], "big"), data[56:88])

    def leaf_hash(self) -> bytes:
        """SHA-256(0x00 ‖ entry), the entry's leaf in the Merkle tree."""
        return leaf_hash(self.encode())
