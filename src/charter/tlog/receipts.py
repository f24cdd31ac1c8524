"""`POST /v1/events?wait=log`: the answer waits until the event is in a published
checkpoint and carries its inclusion proof (docs/transparency-log.md, "Receipts").

A submitter that keeps the proof closes the window in which an attacker with the database
could delete an event that was committed but not yet logged. The wait polls: the
database for the leaf index the sequencer recorded, the log directory for the proof. On
timeout the answer is still the 201 of the accepted event, with `"log": null`.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from charter.core.errors import Malformed
from charter.core.errors.log import NotLogged
from charter.db.database import Database, Role
from charter.tlog import store
from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.serving import inclusion_proof

DEFAULT_TIMEOUT = 5.0
MAX_TIMEOUT = 30.0
POLL_SECONDS = 0.05

Receipt = dict[str, object]


def receipt_timeout(query_string: bytes) -> float | None:
    """The wait asked for by `?wait=log[&timeout=S]`, or None; checked before the event
    is submitted, so a bad query refuses the request instead of dropping the receipt."""
    if not query_string:
        return None
    params = parse_qs(query_string.decode("latin-1"), keep_blank_values=True)
    wait = params.get("wait")
    if wait is None:
        return None
    if wait != ["log"]:
        raise Malformed("wait takes one value: log")
    raw = params.get("timeout", [str(DEFAULT_TIMEOUT)])
    try:
        timeout = float(raw[-1])
    except ValueError:
        raise Malformed("timeout is a number of seconds") from None
    if not 0 <= timeout <= MAX_TIMEOUT:
        raise Malformed(f"timeout is between 0 and {MAX_TIMEOUT:g} seconds")
    return timeout


def _try_receipt(database: Database, log: LogDirectory, event_hash: str) -> Receipt | None:
    with database.connection(Role.READER) as conn:
        index = store.index_of(conn, event_hash)
    if index is None:
        return None
    try:
        return {"index": index, "proof": inclusion_proof(log, index, event_hash)}
    except NotLogged:  # recorded, but the checkpoint on disk is older: wait a little more
        return None


async def wait_for_receipt(database: Database, event_hash: str, timeout: float) -> Receipt | None:
    """The event's index and tlog-proof once it is published, or None after `timeout`."""
    log = LogSettings.from_env().log_directory()
    if not log.exists():
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        receipt = await asyncio.to_thread(_try_receipt, database, log, event_hash)
        if receipt is not None or loop.time() >= deadline:
            return receipt
        await asyncio.sleep(POLL_SECONDS)
