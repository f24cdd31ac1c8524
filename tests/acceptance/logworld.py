"""A database, a log and writers for the transparency-log tests (real processes, real
PostgreSQL): events are appended as the engine appends them, under the process row lock."""

from __future__ import annotations

import hashlib
import random
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from charter.core.ed25519 import SecretKey
from charter.db.database import Conn, Role, connect
from charter.tlog.checkpoint import open_checkpoint
from charter.tlog.config import LogSettings
from charter.tlog.entry import LogEntry
from charter.tlog.logdir import LogDirectory
from charter.tlog.merkle import root_of
from charter.tlog.note import Ed25519Verifier
from charter.tlog.tiles import verify_tiles
from tests.acceptance.processes import charter_env, run_charter, start_charter
from tests.conftest import create_database, drop_database, unique_name
from tests.integration import rows


@dataclass
class LogWorld:
    """One database and one log home (key, salt and log directory under `home`)."""

    url: str
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        settings = {
            "CHARTER_DATABASE_URL": self.url,
            "CHARTER_HOME": str(self.home),
            "CHARTER_LOG_BATCH_MS": "20",
        }
        return charter_env(**(settings | extra))

    @property
    def settings(self) -> LogSettings:
        return LogSettings.from_env({"CHARTER_HOME": str(self.home)})

    @property
    def log(self) -> LogDirectory:
        return self.settings.log_directory()

    def init(self) -> None:
        done = run_charter("log", "init", "--origin", "charter.test/log", env=self.env())
        assert done.returncode == 0, done.stderr
        # As a sequencer's first lead does: from now on every accepted event is queued,
        # so a test can tamper with the queue before any sequencer runs.
        with connect(self.url) as conn:
            conn.execute("SELECT charter.enable_log_queue_v1()")
            conn.commit()

    def sequencer(self, **extra: str) -> subprocess.Popen[str]:
        return start_charter("log", "sequence", env=self.env(**extra))

    def seed(self, processes: int) -> tuple[SecretKey, str, list[str]]:
        """An actor (its secret key), a workflow version and `processes` empty processes."""
        actor = SecretKey.generate()
        with connect(self.url) as conn:
            conn.execute(
                "INSERT INTO actors (id, roles) VALUES (%s, '{user}')",
                (f"a-{actor.public_key_hex[:12]}",),
            )
            conn.execute(
                "INSERT INTO actor_keys (public_key, actor_id) VALUES (%s, %s)",
                (actor.public_key_hex, f"a-{actor.public_key_hex[:12]}"),
            )
            version = rows.add_definition(conn)
            ids = [rows.add_process(conn) for _ in range(processes)]
            conn.commit()
        return actor, version, ids

    def pending(self) -> int:
        with connect(self.url) as conn:
            row = conn.execute("SELECT count(*) FROM log_pending").fetchone()
            assert row is not None
            return cast(int, row[0])

    def queue_on(self) -> bool:
        """Whether a sequencer has led once: only then are events queued."""
        with connect(self.url) as conn:
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM log_queue_on)").fetchone()
            return bool(row and row[0])

    def wait_drained(self, process: subprocess.Popen[str] | None, timeout: float = 180) -> None:
        """Until the queue is on and empty and the database recorded all the log holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise AssertionError(f"the sequencer exited: {process.communicate()}")
            if self.queue_on() and self.pending() == 0 and self.log.size() == self.recorded():
                return
            time.sleep(0.1)
        raise AssertionError(f"not drained: {self.pending()} pending, log {self.log.size()}")

    def recorded(self) -> int:
        with connect(self.url) as conn:
            row = conn.execute("SELECT count(*) FROM log_entries").fetchone()
            assert row is not None
            return cast(int, row[0])

    def check_consistent(self) -> list[LogEntry]:
        """Every event logged once, seqs contiguous per process in log order, tiles and root
        equal to a recomputation from the database, checkpoint signed by the log key."""
        log = self.log
        note = log.checkpoint_note()
        assert note is not None
        vkey = (self.settings.key_file.parent / "log.vkey").read_text().strip()
        opened = open_checkpoint(note, [Ed25519Verifier.from_vkey(vkey)])
        size, root = opened.checkpoint.size, opened.checkpoint.root
        entries = [LogEntry.decode(e) for e in verify_tiles(log.tiles, size, root)]
        hashes = [e.event_hash.hex() for e in entries]
        assert len(set(hashes)) == len(hashes), "an event was logged twice"
        salt = self.settings.salt()
        with connect(self.url) as conn:
            events = conn.execute("SELECT process_id, seq, hash FROM events").fetchall()
            recorded = conn.execute(
                "SELECT process_id, seq, event_hash FROM log_entries ORDER BY idx"
            ).fetchall()
        assert {str(e[2]) for e in events} == set(hashes)
        last: dict[bytes, int] = {}
        for entry in entries:
            assert entry.seq == last.get(entry.process_key, 0) + 1, "a gap or reorder"
            last[entry.process_key] = entry.seq
        from_db = [
            LogEntry.for_event(
                log_salt=salt, process_id=str(p), seq=cast(int, s), event_hash_hex=str(h)
            )
            for p, s, h in recorded
        ]
        assert root_of([e.leaf_hash() for e in from_db]) == opened.checkpoint.root
        return entries


@contextmanager
def scratch_world(
    pg_admin_url: str, template_database: str, home: Path, prefix: str
) -> Iterator[LogWorld]:
    """A LogWorld on a new database (named from `prefix`), its log initialised under
    `home`; the database is dropped afterwards."""
    name = unique_name(prefix)
    url = create_database(pg_admin_url, name, template=template_database)
    try:
        world = LogWorld(url, home)
        world.init()
        yield world
    finally:
        drop_database(pg_admin_url, name)


def append_events(
    url: str, actor: SecretKey, version: str, process_ids: list[str], count: int, seed: int
) -> None:
    """`count` events on random processes, each in its own transaction under the process
    row lock (as the engine does), with random commit delays."""
    chance = random.Random(seed)
    with connect(url, Role.ENGINE) as conn:
        for _ in range(count):
            append_one(conn, actor, version, chance.choice(process_ids))
            if chance.random() < 0.3:
                time.sleep(chance.random() / 100)
            conn.commit()


def append_one(conn: Conn, actor: SecretKey, version: str, process_id: str) -> str:
    """The next event of a process, signed by `actor`, under the process row lock."""
    row = conn.execute(
        "SELECT seq, head_hash FROM processes WHERE id = %s FOR UPDATE", (process_id,)
    ).fetchone()
    assert row is not None
    seq, prev = cast(int, row[0]), cast("str | None", row[1])
    return insert_signed(conn, actor, version, process_id, seq=seq + 1, prev=prev)


def insert_signed(
    conn: Conn, actor: SecretKey, version: str, process_id: str, *, seq: int, prev: str | None
) -> str:
    """Insert a genuine event (canonical text, real signature) and move the head onto it."""
    text = rows.event_text(process_id, prev, actor.public_key_hex)
    digest = hashlib.sha256(text.encode()).hexdigest()
    conn.execute(
        """
        INSERT INTO events (process_id, seq, hash, prev_hash, kind, envelope, signature,
                            actor, actor_id, actor_roles, action, workflow_path, workflow_version)
        VALUES (%s, %s, %s, %s, 'action', %s::json, %s, %s,
                (SELECT actor_id FROM actor_keys WHERE public_key = %s), '{user}',
                'touch', %s, %s)
        """,
        (process_id, seq, digest, prev, text, actor.sign(text.encode()), actor.public_key_hex,
         actor.public_key_hex, rows.WORKFLOW, version),
    )  # fmt: skip
    conn.execute(
        "UPDATE processes SET seq = %s, head_hash = %s, updated_at = now() WHERE id = %s",
        (seq, digest, process_id),
    )
    return digest
