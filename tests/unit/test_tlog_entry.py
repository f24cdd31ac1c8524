"""The 88-byte charter-event/1 log entry and the process pseudonym."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from charter.core.errors.log import InvalidSalt, MalformedEntry
from charter.tlog.entry import ENTRY_SIZE, LABEL, LogEntry, process_key
from charter.tlog.merkle import leaf_hash

SALT = bytes(range(32))
KEY = hmac.new(SALT, b"customer-123", hashlib.sha256).digest()
EVENT = hashlib.sha256(b"envelope").digest()


def test_layout_is_label_key_seq_hash() -> None:
    entry = LogEntry(KEY, 7, EVENT)
    data = entry.encode()
    assert len(LABEL) == 16
    assert len(data) == ENTRY_SIZE == 88
    assert data == b"charter-event/1\n" + KEY + bytes([0, 0, 0, 0, 0, 0, 0, 7]) + EVENT
    assert LogEntry.decode(data) == entry
    assert entry.leaf_hash() == hashlib.sha256(b"\x00" + data).digest() == leaf_hash(data)


def test_process_key_is_hmac_of_the_utf8_id() -> None:
    assert process_key(SALT, "customer-123") == KEY
    assert process_key(SALT, "é") == hmac.new(SALT, "é".encode(), hashlib.sha256).digest()
    with pytest.raises(InvalidSalt):
        process_key(b"short", "p")


def test_for_event_takes_the_database_hex_hash() -> None:
    entry = LogEntry.for_event(
        log_salt=SALT, process_id="customer-123", seq=1, event_hash_hex=EVENT.hex()
    )
    assert entry == LogEntry(KEY, 1, EVENT)
    with pytest.raises(MalformedEntry):
        LogEntry.for_event(log_salt=SALT, process_id="p", seq=1, event_hash_hex=EVENT.hex().upper())


@pytest.mark.parametrize(
    "data",
    [
        b"",
        LogEntry(KEY, 1, EVENT).encode()[:-1],
        LogEntry(KEY, 1, EVENT).encode() + b"\x00",
        b"charter-event/2\n" + LogEntry(KEY, 1, EVENT).encode()[16:],
        LABEL + KEY + bytes(8) + EVENT,  # seq 0: seqs start at 1
    ],
)
def test_decode_refuses_bad_entries(data: bytes) -> None:
    with pytest.raises(MalformedEntry):
        LogEntry.decode(data)


def test_fields_are_validated() -> None:
    with pytest.raises(MalformedEntry):
        LogEntry(KEY[:31], 1, EVENT)
    with pytest.raises(MalformedEntry):
        LogEntry(KEY, 1, EVENT + b"x")
    with pytest.raises(MalformedEntry):
        LogEntry(KEY, 2**64, EVENT)
    with pytest.raises(MalformedEntry):
        LogEntry(KEY, True, EVENT)
    assert LogEntry.decode(LogEntry(KEY, 2**64 - 1, EVENT).encode()).seq == 2**64 - 1
