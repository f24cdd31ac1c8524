"""What the automation benchmark observes, with nothing in the path of any worker.

- Commit instants from the server's write-ahead log. Every COMMIT record carries the
  instant the transaction committed (the value `pg_xact_commit_timestamp` would report
  with track_commit_timestamp on; the WAL has it without that setting). A temporary
  physical replication slot keeps the window's WAL segments from being recycled, and
  `pg_waldump` decodes them (in the server's pg_wal when this process can read it, else
  from copies read with `pg_read_binary_file`); a row's `xmin` names the transaction
  that wrote it. Needs a superuser admin URL and a
  pg_waldump of the server's major version.
- CPU: user+system seconds of the worker processes (and any children) from psutil, and
  of the PostgreSQL client backends connected to the trial database (from
  pg_stat_activity, read through /proc: the server must run on this machine).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg

Conn = psycopg.Connection[tuple[Any, ...]]

_COMMIT = re.compile(
    r"\btx:\s*(\d+), lsn: \S+, prev \S+, desc: COMMIT "
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) UTC(.*)$"
)
_SUBXACTS = re.compile(r"subxacts:((?: \d+)+)")


class WalUnavailable(Exception):
    """Commit instants cannot be read from this server's WAL."""


def find_waldump(server_major: int) -> str:
    """A pg_waldump of the server's major version: $PG_WALDUMP, the Debian layout,
    `pg_config --bindir`, then PATH."""
    candidates = [os.environ.get("PG_WALDUMP", ""),
                  f"/usr/lib/postgresql/{server_major}/bin/pg_waldump"]  # fmt: skip
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            bindir = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            candidates.append(str(Path(bindir) / "pg_waldump"))
    candidates.append(shutil.which("pg_waldump") or "")
    for candidate in filter(None, candidates):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            version = subprocess.run(
                [candidate, "--version"], capture_output=True, text=True, timeout=10
            ).stdout
            if re.search(rf"\b{server_major}(\.\d+)+\b", version):
                return candidate
    raise WalUnavailable(f"no pg_waldump of PostgreSQL {server_major} (set PG_WALDUMP)")


@dataclass
class CommitWindow:
    """The WAL from its opening on, kept by a temporary slot of this session."""

    conn: Conn
    start: str
    waldump: str
    scratch: Path

    def commit_times(self) -> dict[int, datetime]:
        """Commit instant of every transaction (and subtransaction) committed so far
        in the window, by 32-bit xid."""
        row = self.conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        assert row is not None
        end = str(row[0])
        with self._segments(end) as directory:
            dump = subprocess.run(
                [self.waldump, "-p", str(directory), "-s", self.start, "-e", end,
                 "-r", "Transaction"],
                capture_output=True, text=True, timeout=600, env={**os.environ, "TZ": "UTC"},
            )  # fmt: skip
        commits = parse_commits(dump.stdout.splitlines())
        if not commits and dump.returncode != 0:
            raise WalUnavailable(f"pg_waldump failed: {dump.stderr.strip()[-500:]}")
        return commits

    @contextlib.contextmanager
    def _segments(self, end: str) -> Iterator[Path]:
        """The server's pg_wal if this process can read it (same machine), else a copy
        of the window's segments read through SQL."""
        row = self.conn.execute("SELECT current_setting('data_directory')").fetchone()
        assert row is not None
        local = Path(str(row[0])) / "pg_wal"
        if os.access(local, os.R_OK | os.X_OK):
            yield local
            return
        directory = self.scratch / f"wal-{secrets.token_hex(4)}"
        directory.mkdir(parents=True)
        try:
            for (name,) in self.conn.execute(
                "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'"
                " AND name BETWEEN pg_walfile_name(%s::pg_lsn) AND pg_walfile_name(%s::pg_lsn)"
                " ORDER BY name",
                (self.start, end),
            ).fetchall():
                data = self.conn.execute(
                    "SELECT pg_read_binary_file('pg_wal/' || %s)", (name,)
                ).fetchone()
                assert data is not None
                (directory / name).write_bytes(data[0])
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def parse_commits(lines: Sequence[str]) -> dict[int, datetime]:
    commits: dict[int, datetime] = {}
    for line in lines:
        match = _COMMIT.search(line)
        if match is None:
            continue
        stamp = match.group(2)
        pattern = "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S"
        at = datetime.strptime(stamp, pattern).replace(tzinfo=UTC)
        commits[int(match.group(1))] = at
        sub = _SUBXACTS.search(match.group(3))
        for xid in sub.group(1).split() if sub else ():
            commits[int(xid)] = at
    return commits


@contextlib.contextmanager
def commit_window(admin_url: str, waldump: str, scratch: Path) -> Iterator[CommitWindow]:
    """Open a window on the WAL; read its commit instants before leaving the block."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        try:
            conn.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)",
                (f"charter_bench_{secrets.token_hex(6)}",),
            )
            row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        except psycopg.Error as exc:
            raise WalUnavailable(f"cannot hold the WAL ({exc}); needs a superuser") from exc
        assert row is not None
        yield CommitWindow(conn, str(row[0]), waldump, scratch)
    # The slot was temporary: it went with the session.


def check_commit_window(admin_url: str, waldump: str, scratch: Path) -> None:
    """Find a transaction of our own, and its commit instant, in the WAL; or raise
    WalUnavailable saying why not."""
    with commit_window(admin_url, waldump, scratch) as window, psycopg.connect(admin_url) as conn:
        conn.execute("SELECT pg_logical_emit_message(true, 'charter-bench', 'probe')")
        row = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
        conn.commit()
        assert row is not None
        instant(window.commit_times(), int(row[0]) & 0xFFFFFFFF, "the probe")


def instant(commits: dict[int, datetime], xid: int, what: str) -> datetime:
    try:
        return commits[xid]
    except KeyError:
        raise WalUnavailable(f"no COMMIT record for transaction {xid} ({what})") from None


# --- CPU ----------------------------------------------------------------------------------

BACKENDS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND backend_type = 'client backend' AND pid <> ALL(%s)"
)


@dataclass
class CpuMeter:
    """User+system CPU seconds spent between `start()` and the last `sample()` by the
    worker processes (their children included) and by the client backends of the trial
    database, except the observer's own and `exclude`. Sample often enough that a
    backend which disconnects loses little: its CPU counts up to its last sample."""

    workers: Sequence[int]
    observer: Conn
    exclude: Sequence[int] = ()
    backends_visible: bool = True
    _base: dict[tuple[str, int, float], float] = field(default_factory=dict)
    _last: dict[tuple[str, int, float], float] = field(default_factory=dict)

    def start(self) -> None:
        row = self.observer.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        self.exclude = [*self.exclude, int(row[0])]
        self.backends_visible = _is_postgres(int(row[0]))
        self._base = self._read()
        self._last = dict(self._base)

    def sample(self) -> None:
        self._last.update(self._read())

    def seconds(self) -> tuple[float, float | None]:
        """(workers, backends); backends None if this machine cannot see them."""
        spent = {"worker": 0.0, "backend": 0.0}
        for key, value in self._last.items():
            spent[key[0]] += value - self._base.get(key, 0.0)
        return spent["worker"], spent["backend"] if self.backends_visible else None

    def _read(self) -> dict[tuple[str, int, float], float]:
        readings: dict[tuple[str, int, float], float] = {}
        for pid in self.workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                parent = psutil.Process(pid)
                for process in [parent, *parent.children(recursive=True)]:
                    _read_one(readings, "worker", process)
        if self.backends_visible:
            for (pid,) in self.observer.execute(BACKENDS, (list(self.exclude),)).fetchall():
                with contextlib.suppress(psutil.NoSuchProcess):
                    _read_one(readings, "backend", psutil.Process(int(pid)))
        return readings


def _read_one(
    readings: dict[tuple[str, int, float], float], kind: str, process: psutil.Process
) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        times = process.cpu_times()
        readings[(kind, process.pid, process.create_time())] = times.user + times.system


def _is_postgres(pid: int) -> bool:
    """Whether `pid` is a PostgreSQL process on this machine (the server is local)."""
    try:
        return "postgres" in psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def waiting_on_locks(workers: Sequence[int], observer: Conn) -> bool:
    """Whether every worker process (or a child) has a connection whose backend waits
    for a lock: matched by the client's TCP port."""
    rows = observer.execute(
        "SELECT client_port FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchall()
    if any(port is None or port < 0 for (port,) in rows):  # Unix sockets: count them
        return len(rows) >= len(workers)
    ports = {int(port) for (port,) in rows}
    for pid in workers:
        try:
            parent = psutil.Process(pid)
            mine = {
                connection.laddr.port
                for process in [parent, *parent.children(recursive=True)]
                for connection in process.net_connections(kind="tcp")
            }
        except psutil.NoSuchProcess:
            return False
        if not mine & ports:
            return False
    return True


def peak_rss_mib(pid: int) -> float:
    """VmHWM of one process, MiB (0 if gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0
