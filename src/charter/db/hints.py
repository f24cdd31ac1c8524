"""Wake-up hints (NOTIFY), sent right after the commit of the writes they announce.

PostgreSQL queues notifications at commit under one global lock, held until the commit
record is flushed, so transactions that notify cannot share a WAL flush (group commit)
with one another: under concurrency a NOTIFY in each small write transaction costs a
large part of the commit rate (bench/notify.py; figures in bench/RESULTS.md). So the
engine collects its hints while it writes and sends them after the COMMIT, in a
transaction of their own that writes nothing and so needs no flush.

Hints are hints (docs/automation.md): the tables are the truth. One lost between the COMMIT and
its hint (a crash, the connection dropping) costs latency, not work — the worker's safety
sweep and its DB-derived wake-up find the row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject
from charter.db.database import Conn, pipelined_transaction
from charter.db.errors import translated
from charter.db.queries import query

log = logging.getLogger(__name__)

Hint = tuple[str, str]  # (channel, payload)


def hint(channel: str, payload: JsonObject) -> Hint:
    """A hint: ids only, far below NOTIFY's 8000-byte limit."""
    return channel, json.dumps(payload, separators=(",", ":"), sort_keys=True)


def send_hints(conn: Conn, hints: Sequence[Hint]) -> bool:
    """Send `hints` (duplicates once) in a transaction of their own, after the commit of
    what they announce; a failure is logged, never raised: the work is committed.
    False if the database refused them."""
    unique = list(dict.fromkeys(hints))
    if not unique:
        return True
    try:
        with translated(), pipelined_transaction(conn):  # one round trip
            conn.execute(
                query("send_hints"),
                {"channels": [c for c, _ in unique], "payloads": [p for _, p in unique]},
            )
    except CharterError as exc:
        log.warning("could not send %d wake-up hint(s): %s", len(unique), exc.message)
        return False
    return True
