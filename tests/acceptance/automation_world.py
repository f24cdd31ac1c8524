"""Worlds of automation work for the worker fault tests: two small workflows, actors
with real keys, many processes made through the engine, real `charter worker` child
processes, the counts that prove exactly-once, and a TCP proxy that can wedge the
worker's LISTEN connection (a half-open connection: the notification is lost)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.errors import Duplicate
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from tests.acceptance.processes import charter_env

SCHEDULED = "tests/faults/scheduled"
AUTOMATIC = "tests/faults/automatic"
WORKER_EXIT_TIMEOUT = 60.0

# `open` schedules one `tick` at the instant its input names: the test decides when
# every row is due. Firing `tick` queues nothing (no auto action in this workflow).
SCHEDULED_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "tick", "action": "tick", "at": "{{ input.due }}",
                               "data": {"n": "{{ input.n }}"}}]},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
    },
}  # fmt: skip

# `open` makes `touch` available at once: one queue row per process. Firing `touch`
# does not queue it again (no recursion), so each process has exactly one work row.
AUTOMATIC_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open"},
        "touch": {"type": "update", "role": "AUTOMATION", "from": "*", "auto": True},
    },
}  # fmt: skip


@dataclass(frozen=True)
class Keys:
    """The customer who opens processes and the automation actor's secret."""

    customer: SecretKey
    automation: SecretKey


def setup_world(url: str, keys: Keys | None = None) -> Keys:
    """Deploy both workflows and register the actors (public keys only) in `url`."""
    keys = keys or Keys(SecretKey.generate(), SecretKey.generate())
    with Database(url, max_size=2) as database:
        engine = Engine(database)
        with database.connection(Role.ENGINE) as conn:
            engine.registry.deploy(conn, SCHEDULED, SCHEDULED_DEFINITION)
            engine.registry.deploy(conn, AUTOMATIC, AUTOMATIC_DEFINITION)
            actors.add_actor(conn, "ada", keys.customer.public_key_hex, ["customer"])
            actors.add_actor(conn, "automation", keys.automation.public_key_hex, ["AUTOMATION"])
            conn.commit()
    return keys


def open_processes(
    url: str,
    keys: Keys,
    *,
    scheduled: Sequence[datetime] = (),
    automatic: int = 0,
    threads: int = 4,
    prefix: str = "p",
) -> list[str]:
    """Open one process per `scheduled` due time (its `tick` runs then) and `automatic`
    processes (each queues one `touch`), through the engine, in a few threads."""
    tag = secrets.token_hex(3)
    jobs: list[tuple[str, str, JsonObject]] = [
        (f"{prefix}-s{tag}-{i}", SCHEDULED, {"due": format_rfc3339(due), "n": i})
        for i, due in enumerate(scheduled)
    ]
    jobs += [(f"{prefix}-a{tag}-{i}", AUTOMATIC, {}) for i in range(automatic)]
    with Database(url, max_size=threads + 1) as database:
        engine = Engine(database)

        def submit(job: tuple[str, str, JsonObject]) -> str:
            process_id, workflow, input_ = job
            envelope = Envelope(
                v=1,
                process=process_id,
                workflow=workflow,
                action="open",
                input=input_,
                prev=None,
                actor=keys.customer.public_key_hex,
                at=format_rfc3339(datetime.now(UTC)),
            )
            with contextlib.suppress(Duplicate):  # a retried create that had committed
                engine.process_event(sign(envelope, keys.customer))
            return process_id

        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(submit, jobs))


def due_times(count: int, *, start: datetime, spread_seconds: float) -> list[datetime]:
    """`count` instants from `start`, evenly over `spread_seconds`."""
    step = spread_seconds / max(1, count)
    return [start + timedelta(seconds=i * step) for i in range(count)]


# --- the database, as its owner sees it ------------------------------------------------


def owner(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(url, autocommit=True, connect_timeout=10)


@dataclass(frozen=True)
class WorkRowState:
    kind: str
    id: str
    process_id: str
    status: str
    claimed_by: str | None
    fired_event_hash: str | None
    attempts: int
    fire_count: int


def work_rows(url: str) -> list[WorkRowState]:
    with owner(url) as conn:
        rows = conn.execute(
            "SELECT 'scheduled_action', id::text, process_id, status, claimed_by,"
            "       last_fired_event_hash, attempts, fire_count"
            " FROM charter.scheduled_actions"
            " UNION ALL"
            " SELECT 'auto_action', id::text, process_id, status, claimed_by,"
            "        fired_event_hash, attempts, CASE WHEN status = 'completed' THEN 1 ELSE 0 END"
            " FROM charter.automation_queue"
        ).fetchall()
    return [WorkRowState(*row) for row in rows]


@dataclass(frozen=True)
class AutomationEvent:
    hash: str
    process_id: str
    action: str
    work_id: str | None
    worker: str | None


def automation_events(url: str) -> list[AutomationEvent]:
    """Every event the automation actor signed, with the work row its provenance names."""
    with owner(url) as conn:
        rows = conn.execute(
            "SELECT hash, process_id, action,"
            "       envelope::jsonb #>> '{input,meta,automation,work_id}',"
            "       envelope::jsonb #>> '{input,meta,automation,worker}'"
            " FROM charter.events WHERE actor_id = 'automation'"
        ).fetchall()
    return [AutomationEvent(*row) for row in rows]


def firings(url: str) -> Counter[str]:
    """How many automation_firings rows each work row has."""
    with owner(url) as conn:
        rows = conn.execute(
            "SELECT work_id::text, count(*) FROM charter.automation_firings GROUP BY 1"
        ).fetchall()
    return Counter({work_id: int(count) for work_id, count in rows})


def system_log(url: str, where: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
    with owner(url) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(
            f"SELECT * FROM charter.system_log WHERE {where} ORDER BY id",
            params,
        ).fetchall()


def unfinished(url: str) -> int:
    """Work rows not yet in a final state (active, pending or claimed)."""
    with owner(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM charter.scheduled_actions"
            "        WHERE status IN ('active', 'claimed'))"
            "     + (SELECT count(*) FROM charter.automation_queue"
            "        WHERE status IN ('pending', 'claimed'))"
        ).fetchone()
    assert row is not None
    return int(row[0])


def assert_fired_exactly_once(url: str, *, expected_rows: int) -> list[WorkRowState]:
    """Every work row fired once: one automation event and one firing per row, each row
    completed or exhausted with that event's hash, none left claimed."""
    rows = work_rows(url)
    events = automation_events(url)
    assert len(rows) == expected_rows
    per_work = Counter(e.work_id for e in events)
    doubles = {w: n for w, n in per_work.items() if n != 1}
    assert not doubles, f"work rows fired more than once: {list(doubles.items())[:5]}"
    assert len(events) == expected_rows, (len(events), expected_rows)
    assert set(per_work) == {r.id for r in rows}
    by_action = Counter(e.action for e in events)
    kinds = Counter(r.kind for r in rows)
    expected = Counter({"tick": kinds["scheduled_action"], "touch": kinds["auto_action"]})
    assert by_action == +expected  # unary plus drops zero counts
    fired = firings(url)
    assert fired == Counter({r.id: 1 for r in rows})
    hashes = {e.work_id: e.hash for e in events}
    not_done = [r for r in rows if r.status not in ("completed", "exhausted")]
    assert not not_done, f"{len(not_done)} rows not completed, e.g. {not_done[:3]}"
    assert all(r.claimed_by is None for r in rows)
    wrong_hash = [r for r in rows if r.fired_event_hash != hashes[r.id]]
    assert not wrong_hash, f"rows recorded with another hash: {wrong_hash[:3]}"
    return rows


# --- child workers ------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """One `charter worker` child; its output goes to files (a full pipe would block it)."""

    name: str
    popen: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def terminate(self, timeout: float = WORKER_EXIT_TIMEOUT) -> int:
        """SIGTERM (a graceful stop) and the exit code."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)  # a stopped process must be able to die
            self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)

    def stopped(self) -> bool:
        """True while the process is stopped (SIGSTOP)."""
        try:
            return psutil.Process(self.pid).status() == psutil.STATUS_STOPPED
        except psutil.NoSuchProcess:
            return False


@dataclass
class Workers:
    """Starts `charter worker` children and kills whatever is left at the end."""

    directory: Path
    env: dict[str, str]
    started: list[WorkerProcess] = field(default_factory=list)

    def start(
        self,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        prelude: str | None = None,
    ) -> WorkerProcess:
        """Start `charter worker --worker-id NAME ARGS`; `prelude` is Python run first in the
        child (a test-only hook, e.g. to pause at a crash point instead of dying)."""
        stdout_path = self.directory / f"{name}.out"
        stderr_path = self.directory / f"{name}.err"
        if prelude is None:
            command = [sys.executable, "-m", "charter"]
        else:
            script = f"{prelude}\nfrom charter.cli.main import main\nmain()"
            command = [sys.executable, "-c", script]
        command += ["worker", "--worker-id", name, *args]
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            popen = subprocess.Popen(command, stdout=out, stderr=err, env=env or self.env)
        worker = WorkerProcess(name, popen, stdout_path, stderr_path)
        self.started.append(worker)
        return worker

    def kill_all(self) -> None:
        for worker in self.started:
            worker.kill()


@contextlib.contextmanager
def worker_pool(directory: Path, url: str, keys: Keys) -> Iterator[Workers]:
    workers = Workers(directory, worker_env(url, keys))
    try:
        yield workers
    finally:
        workers.kill_all()


def worker_env(url: str, keys: Keys, **extra: str | None) -> dict[str, str]:
    return charter_env(CHARTER_DATABASE_URL=url, AUTOMATION_ACTOR_SK=keys.automation.hex(),
                       **extra)  # fmt: skip


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float,
    what: str | Callable[[], str],
    alive: Sequence[WorkerProcess] = (),
    interval: float = 0.2,
) -> None:
    """Poll `condition` until true; fail after `timeout` or as soon as a worker that
    should stay alive has exited."""
    deadline = time.monotonic() + timeout
    describe = what if callable(what) else (lambda: str(what))
    while True:
        if condition():
            return
        for worker in alive:
            if not worker.alive():
                raise AssertionError(
                    f"worker {worker.name} exited ({worker.popen.returncode}) while waiting "
                    f"for {describe()}:\n{worker.stderr()[-3000:]}"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {describe()}")
        time.sleep(interval)


# --- a proxy that can wedge the LISTEN connection -----------------------------------------


class WedgingProxy:
    """A TCP proxy in front of PostgreSQL. `wedge_listener()` makes every connection whose
    startup message names the worker's listener stop receiving: the server's bytes (the
    NOTIFY messages) are read and dropped, the socket stays open, nothing errors. That is
    a half-open connection as a network partition leaves it: the listener waits forever
    and only the worker's safety sweep can find new work."""

    LISTENER_NAME = b"charter-worker-listener"

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._wedged = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.listener_connections = 0
        self.withheld_bytes = 0
        self._closing = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def url(self, database_url: str) -> str:
        """`database_url` through this proxy, in plain text (the proxy reads the startup)."""
        return make_conninfo(
            database_url, host="127.0.0.1", port=str(self.port),
            sslmode="disable", gssencmode="disable",
        )  # fmt: skip

    def wedge_listener(self) -> None:
        self._wedged.set()

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            is_listener = threading.Event()
            threading.Thread(
                target=self._client_to_server, args=(client, server, is_listener), daemon=True
            ).start()
            threading.Thread(
                target=self._server_to_client, args=(server, client, is_listener), daemon=True
            ).start()

    def _client_to_server(
        self, client: socket.socket, server: socket.socket, is_listener: threading.Event
    ) -> None:
        seen = b""
        try:
            while data := client.recv(65536):
                if len(seen) < 4096 and not is_listener.is_set():
                    seen += data
                    if self.LISTENER_NAME in seen:
                        is_listener.set()
                        with self._lock:
                            self.listener_connections += 1
                server.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_WR)

    def _server_to_client(
        self, server: socket.socket, client: socket.socket, is_listener: threading.Event
    ) -> None:
        try:
            while data := server.recv(65536):
                if is_listener.is_set() and self._wedged.is_set():
                    with self._lock:
                        self.withheld_bytes += len(data)
                    continue
                client.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_WR)


def host_and_port(url: str) -> tuple[str, int]:
    parts = conninfo_to_dict(url)
    return str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432)
