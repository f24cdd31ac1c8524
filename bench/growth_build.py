"""Build a database of many valid signed events fast, for bench/growth.py.

Events are generated in a process pool (Ed25519 via `cryptography`, the canonical RFC 8785
bytes written directly for this one fixed envelope shape and checked against `rfc8785`
on a sample) and COPYed in as the owner with triggers off. What the triggers would have
done is reproduced: each process row carries its last event as head, and the indexes and
keys that hang on events are rebuilt after the load, so the schema ends identical to a
migrated one (checked). A random sample of chains is then verified by Charter itself.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg import sql

from charter.audit.verify_stored import verify_process
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, Submission, verify_submission
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.db.migrate import migrate
from charter.db.snapshot import render_schema
from charter.engine import actors
from charter.engine.registry import Registry

WORKFLOW = "bench/growth"
DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["user"],
    "actions": {
        "open": {"type": "create", "role": "user", "to": "open"},
        "bump": {
            "type": "update",
            "role": "user",
            "from": "*",
            "input": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "mutate": {"$inc": {"count": 1}},
        },
    },
}
ACTORS = 200  # keys the events are spread over (process i is driven by actor i % ACTORS)
CHUNK = 200  # processes per pool task: ~20 MB of COPY text at 100 events each
SEED = hashlib.sha256(b"charter growth bench").digest()
# Events lie in the past, one millisecond apart (a `received_at` as real as any).
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

EVENT_COLUMNS = (
    "process_id", "seq", "hash", "prev_hash", "kind", "envelope", "signature", "actor",
    "actor_id", "actor_roles", "action", "workflow_path", "workflow_version", "received_at",
)  # fmt: skip
PROCESS_COLUMNS = (
    "id", "workflow_path", "state", "data", "head_hash", "seq", "created_at", "updated_at",
)  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """How many processes of how many events each."""

    processes: int
    events_per_process: int

    @property
    def events(self) -> int:
        return self.processes * self.events_per_process


def actor_key(index: int) -> SecretKey:
    """The deterministic key of actor `index`: a later run signs appends with it."""
    return SecretKey(hashlib.sha256(SEED + index.to_bytes(4, "big")).digest())


def actor_id(index: int) -> str:
    return f"growth-{index:04d}"


def process_id(index: int) -> str:
    return f"g{index:08d}"


def canonical_envelope(
    process: str, action: str, actor: str, at: str, n: int | None, prev: str | None
) -> bytes:
    """RFC 8785 bytes of this benchmark's envelope shape: keys in code-unit order, and no
    value needs escaping (names, hex and timestamps only). `check_canonical` proves it."""
    body = "{}" if n is None else f'{{"n":{n}}}'
    prev_text = "null" if prev is None else f'"{prev}"'
    return (
        f'{{"action":"{action}","actor":"{actor}","at":"{at}","input":{body},'
        f'"prev":{prev_text},"process":"{process}","v":1,"workflow":"{WORKFLOW}"}}'
    ).encode()


@dataclass(frozen=True)
class Chunk:
    """One pool task: processes [first, first + count)."""

    first: int
    count: int
    events_per_process: int
    version: str


_KEYS: dict[int, tuple[Ed25519PrivateKey, str]] = {}


def _key(index: int) -> tuple[Ed25519PrivateKey, str]:
    found = _KEYS.get(index)
    if found is None:
        secret = actor_key(index)
        found = _KEYS[index] = (
            Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret.hex())),
            secret.public_key_hex,
        )
    return found


def generate(chunk: Chunk) -> tuple[bytes, bytes]:
    """COPY text (events, processes) of one chunk; runs in a pool worker."""
    events: list[str] = []
    processes: list[str] = []
    per = chunk.events_per_process
    for index in range(chunk.first, chunk.first + chunk.count):
        private, public = _key(index % ACTORS)
        pid = process_id(index)
        prev: str | None = None
        start = EPOCH + timedelta(milliseconds=index * per)
        for seq in range(1, per + 1):
            at = format_rfc3339(start + timedelta(milliseconds=seq - 1))
            action = "open" if seq == 1 else "bump"
            message = canonical_envelope(pid, action, public, at, None if seq == 1 else seq, prev)
            digest = hashlib.sha256(message).hexdigest()
            signature = private.sign(message).hex()
            events.append(
                f"{pid}\t{seq}\t{digest}\t{prev or chr(92) + 'N'}\taction\t{message.decode()}\t"
                f"{signature}\t{public}\t{actor_id(index % ACTORS)}\t{{user}}\t{action}\t"
                f"{WORKFLOW}\t{chunk.version}\t{at}\n"
            )
            prev = digest
        created = format_rfc3339(start)
        processes.append(
            f'{pid}\t{WORKFLOW}\topen\t{{"count": {per - 1}}}\t{prev}\t{per}\t{created}\t{at}\n'
        )
    return "".join(events).encode(), "".join(processes).encode()


def check_canonical(events_text: bytes) -> None:
    """Re-encode a sample of generated envelopes with `rfc8785` (through `Envelope`) and
    require the same bytes, hash and a valid signature."""
    rows = events_text.decode().splitlines()
    for row in random.sample(rows, min(50, len(rows))) + rows[:2]:
        fields = row.split("\t")
        text = fields[5]
        parsed: dict[str, Any] = json.loads(text)
        envelope = Envelope(**parsed)
        assert envelope.message() == text.encode(), (envelope.message(), text)
        assert envelope.hash() == fields[2], row
        verify_submission(Submission(envelope, fields[6]))


def chunks(shape: Shape, version: str) -> Iterator[Chunk]:
    for first in range(0, shape.processes, CHUNK):
        count = min(CHUNK, shape.processes - first)
        yield Chunk(first, count, shape.events_per_process, version)


def _bounded(
    pool: ProcessPoolExecutor, tasks: Iterator[Chunk], *, ahead: int
) -> Iterator[tuple[bytes, bytes]]:
    """`pool.map` in order, with at most `ahead` results waiting: COPY text is large."""
    pending: deque[Future[tuple[bytes, bytes]]] = deque()
    for task in tasks:
        pending.append(pool.submit(generate, task))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def build(admin: str, url: str, shape: Shape, *, workers: int) -> None:
    """Migrate the (empty) database at `url`, register the actors and the workflow, and
    load `shape` events; `admin` is a superuser conninfo for the same database."""
    with psycopg.connect(url) as conn:
        migrate(conn)
    with Database(url, max_size=2) as database, database.connection(Role.ENGINE) as conn:
        version = Registry().deploy(conn, WORKFLOW, DEFINITION).version
        for index in range(min(ACTORS, shape.processes)):
            actors.add_actor(conn, actor_id(index), actor_key(index).public_key_hex, ["user"])
        conn.commit()
    with psycopg.connect(admin) as conn:
        before = render_schema(conn)
        dropped = _drop_event_keys(conn)
        conn.commit()
        with phase("generate, sign and COPY"):
            _load(conn, shape, version, workers)
        with phase("rebuild indexes and keys"):
            _restore_event_keys(conn, dropped)
            conn.commit()
        after = render_schema(conn)
        assert after == before, "the rebuilt schema differs from the migrated one"
        conn.commit()
        conn.autocommit = True
        with phase("VACUUM (ANALYZE)"):
            conn.execute("VACUUM (ANALYZE) charter.events, charter.processes")
    with phase("verify a sample of chains"):
        verify_sample(url, shape)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Print how long a step of the build took (it takes minutes at 10 M events)."""
    started = time.perf_counter()
    yield
    print(f"  {name}: {time.perf_counter() - started:.1f} s", flush=True)


def _load(conn: psycopg.Connection[Any], shape: Shape, version: str, workers: int) -> None:
    # As the owner with user triggers and foreign-key triggers off: the rows are valid by
    # construction, and the head trigger's effect (the process row's head) is in the data.
    conn.execute("SET session_replication_role = replica")
    processes: list[bytes] = []
    with (
        ProcessPoolExecutor(workers) as pool,
        conn.cursor().copy(
            sql.SQL("COPY charter.events ({}) FROM STDIN").format(
                sql.SQL(", ").join(map(sql.Identifier, EVENT_COLUMNS))
            )
        ) as copy,
    ):
        for number, (events_text, processes_text) in enumerate(
            _bounded(pool, chunks(shape, version), ahead=2 * workers)
        ):
            if number == 0:
                check_canonical(events_text)
            copy.write(events_text)
            processes.append(processes_text)
    with conn.cursor().copy(
        sql.SQL("COPY charter.processes ({}) FROM STDIN").format(
            sql.SQL(", ").join(map(sql.Identifier, PROCESS_COLUMNS))
        )
    ) as copy:
        for block in processes:
            copy.write(block)
    conn.execute("SET session_replication_role = origin")


# Constraints and indexes rebuilt after the load (a sorted build instead of 10 M random
# inserts): events' own keys and indexes, then the foreign keys that depend on them.
_INDEX_DEFS = """
SELECT c.relname, pg_get_indexdef(i.indexrelid), con.conname, pg_get_constraintdef(con.oid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
LEFT JOIN pg_constraint con
    ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid AND con.contype IN ('p', 'u', 'x')
WHERE i.indrelid = 'charter.events'::regclass
"""
_DEPENDENT_FKS = """
SELECT format('%I.%I', n.nspname, c.relname), con.conname, pg_get_constraintdef(con.oid)
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE con.contype = 'f' AND con.confrelid = 'charter.events'::regclass
ORDER BY con.conname
"""


@dataclass(frozen=True)
class Dropped:
    indexes: list[tuple[str, str, str | None, str | None]]
    foreign_keys: list[tuple[str, str, str]]


def _drop_event_keys(conn: psycopg.Connection[Any]) -> Dropped:
    foreign_keys = [tuple(row) for row in conn.execute(_DEPENDENT_FKS)]
    indexes = [tuple(row) for row in conn.execute(_INDEX_DEFS)]
    for table, name, _ in foreign_keys:
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                sql.SQL(table), sql.Identifier(name)
            )
        )
    for index, _, constraint, _ in indexes:
        if constraint is not None:
            conn.execute(
                sql.SQL("ALTER TABLE charter.events DROP CONSTRAINT {}").format(
                    sql.Identifier(constraint)
                )
            )
        else:
            conn.execute(sql.SQL("DROP INDEX charter.{}").format(sql.Identifier(index)))
    return Dropped(indexes, foreign_keys)


def _restore_event_keys(conn: psycopg.Connection[Any], dropped: Dropped) -> None:
    conn.execute("SET maintenance_work_mem = '1GB'")
    for _, definition, constraint, constraint_def in dropped.indexes:
        if constraint is not None and constraint_def is not None:
            conn.execute(
                sql.SQL("ALTER TABLE charter.events ADD CONSTRAINT {} {}").format(
                    sql.Identifier(constraint), sql.SQL(constraint_def)
                )
            )
        else:
            conn.execute(sql.SQL(definition))
    for table, name, definition in dropped.foreign_keys:
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                sql.SQL(table), sql.Identifier(name), sql.SQL(definition)
            )
        )


def verify_sample(url: str, shape: Shape, *, count: int = 20) -> None:
    """Charter's own verification (with state replay) of random chains, the first and the
    last included."""
    picks = {
        0,
        shape.processes - 1,
        *random.sample(range(shape.processes), min(count, shape.processes)),
    }
    with Database(url, max_size=2) as database:
        for index in sorted(picks):
            report = verify_process(database, process_id(index), replay=True)
            assert report.ok, report.to_json()
            assert report.events == shape.events_per_process, report.to_json()
