"""The three sides of the automation benchmark and their worker processes.

Each side: what it installs in the template database, how its client makes work (due
now, due at given instants, a backlog), the command of one worker process, and which
rows show what it fired. A fired row's `xmin` is the transaction that made the work
visible; a cause's `xmin` (or the xid the client saw) is the transaction that created
the work. Tags name the work on every side: Charter's process ids, the others' job
argument.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, LiteralString
from urllib.parse import quote

import procrastinate
import psycopg
from psycopg.conninfo import conninfo_to_dict

import automation_tasks
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from charter.firing.worker import WorkerSettings

Conn = psycopg.Connection[tuple[Any, ...]]
CHARTER_DEFAULTS = WorkerSettings()
# The others run as many jobs at once as Charter runs batches (their default is 1).
CONCURRENCY = CHARTER_DEFAULTS.concurrency
GRAPHILE_VERSION = "0.17.3"  # the newest that runs on Node 20 (0.18 needs Node >= 22.18)
BENCH_TABLE = "CREATE TABLE public.bench_fired (tag text NOT NULL)"


@dataclass(frozen=True)
class Command:
    argv: list[str]
    env: dict[str, str]
    cwd: Path | None = None


class Client(ABC):
    """Makes work on one side, in one trial database; each call has committed when it
    returns."""

    @abstractmethod
    def enqueue_now(self, tag: str) -> None: ...

    @abstractmethod
    def enqueue_due(self, tags: Sequence[str], dues: Sequence[datetime]) -> None: ...

    @abstractmethod
    def enqueue_backlog(self, count: int) -> None: ...

    @abstractmethod
    def causes(self, conn: Conn) -> dict[str, int]:
        """The xid of the transaction that created each tag's work."""

    def close(self) -> None:
        return None


class Side(ABC):
    name: str
    version: str
    how: str  # how its workers run, for the notes
    fired_sql: LiteralString  # (tag, xid) of every fired row
    count_sql: LiteralString  # how many have fired
    claim_tables: tuple[str, ...]  # what a worker's claim reads (schema, table)

    @abstractmethod
    def install(self, url: str) -> None:
        """Install the side's schema and definitions into the (template) database."""

    @abstractmethod
    def command(self, url: str, index: int) -> Command: ...

    @abstractmethod
    def client(self, url: str) -> Client: ...

    def fired(self, conn: Conn) -> dict[str, int]:
        return {str(tag): int(xid) for tag, xid in conn.execute(self.fired_sql).fetchall()}

    def count(self, conn: Conn) -> int:
        row = conn.execute(self.count_sql).fetchone()
        return int(row[0]) if row else 0


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CHARTER_", "PROCRASTINATE_", "GRAPHILE_"))}  # fmt: skip
    env.pop("AUTOMATION_ACTOR_SK", None)
    return env | extra


# --- Charter ------------------------------------------------------------------------------

SCHEDULED = "bench/scheduled"
AUTOMATIC = "bench/automatic"
SCHEDULED_DEFINITION: JsonObject = {
    "dsl": 2, "states": ["open"], "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "tick", "action": "tick", "at": "{{ input.due }}",
                               "data": {}}]},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
    },
}  # fmt: skip
AUTOMATIC_DEFINITION: JsonObject = {
    "dsl": 2, "states": ["open"], "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open"},
        "touch": {"type": "update", "role": "AUTOMATION", "from": "*", "auto": True},
    },
}  # fmt: skip


class CharterSide(Side):
    name = "Charter"
    fired_sql = "SELECT process_id, xmin::text FROM charter.events WHERE actor_id = 'automation'"
    count_sql = "SELECT count(*) FROM charter.events WHERE actor_id = 'automation'"
    claim_tables = ("charter.scheduled_actions", "charter.automation_queue")

    def __init__(self) -> None:
        self.version = version("charter")
        self.how = (
            f"`python -m charter worker` with its defaults: --concurrency "
            f"{CHARTER_DEFAULTS.concurrency} (batches in flight), --batch-size "
            f"{CHARTER_DEFAULTS.batch_size} (rows per transaction), cron admission on"
        )
        self.customer = SecretKey.generate()
        self.automation = SecretKey.generate()

    def install(self, url: str) -> None:
        with Database(url, max_size=1) as database:
            registry = Engine(database).registry
            with database.connection(Role.ENGINE) as conn:
                registry.deploy(conn, SCHEDULED, SCHEDULED_DEFINITION)
                registry.deploy(conn, AUTOMATIC, AUTOMATIC_DEFINITION)
                actors.add_actor(conn, "customer", self.customer.public_key_hex, ["customer"])
                actors.add_actor(conn, "automation", self.automation.public_key_hex, ["AUTOMATION"])
                conn.commit()

    def command(self, url: str, index: int) -> Command:
        argv = [sys.executable, "-m", "charter", "worker", "--worker-id", f"bench-{index}"]
        env = _env(CHARTER_DATABASE_URL=url, AUTOMATION_ACTOR_SK=self.automation.hex(),
                   PYTHONPATH=os.pathsep.join(sys.path))  # fmt: skip
        return Command(argv, env)

    def client(self, url: str) -> Client:
        return CharterClient(url, self.customer)


class CharterClient(Client):
    """Opens processes through the engine, as the customer: the causing event."""

    THREADS = 4

    def __init__(self, url: str, customer: SecretKey) -> None:
        self.customer = customer
        self.database = Database(url, max_size=self.THREADS + 1)
        self.engine = Engine(self.database)

    def _open(self, process_id: str, workflow: str, input_: JsonObject) -> None:
        envelope = Envelope(
            v=1, process=process_id, workflow=workflow, action="open", input=input_,
            prev=None, actor=self.customer.public_key_hex, at=format_rfc3339(datetime.now(UTC)),
        )  # fmt: skip
        self.engine.process_event(sign(envelope, self.customer))

    def _open_many(self, jobs: Sequence[tuple[str, str, JsonObject]]) -> None:
        with ThreadPoolExecutor(self.THREADS) as pool:
            list(pool.map(lambda job: self._open(*job), jobs))

    def enqueue_now(self, tag: str) -> None:
        self._open(tag, AUTOMATIC, {})

    def enqueue_due(self, tags: Sequence[str], dues: Sequence[datetime]) -> None:
        self._open_many([(tag, SCHEDULED, {"due": format_rfc3339(due)})
                         for tag, due in zip(tags, dues, strict=True)])  # fmt: skip

    def enqueue_backlog(self, count: int) -> None:
        self._open_many([(f"backlog-{i}", AUTOMATIC, {}) for i in range(count)])

    def causes(self, conn: Conn) -> dict[str, int]:
        rows = conn.execute(
            "SELECT process_id, xmin::text FROM charter.events WHERE action = 'open'"
        ).fetchall()
        return {str(tag): int(xid) for tag, xid in rows}

    def close(self) -> None:
        self.database.close()


# --- Procrastinate ------------------------------------------------------------------------


class ProcrastinateSide(Side):
    name = "Procrastinate"
    version = procrastinate.__version__
    how = (
        "`python -m procrastinate --app automation_tasks.app worker --concurrency "
        f"{CONCURRENCY}`, other settings default (LISTEN/NOTIFY on, polling every 5 s, "
        "a log line per job at its default INFO level)"
    )
    fired_sql = "SELECT tag, xmin::text FROM public.bench_fired"
    count_sql = "SELECT count(*) FROM public.bench_fired"
    claim_tables = ("public.procrastinate_jobs",)

    def install(self, url: str) -> None:
        app = _procrastinate_app(url)
        with app.open():
            app.schema_manager.apply_schema()

    def command(self, url: str, index: int) -> Command:
        argv = [sys.executable, "-m", "procrastinate", "--app", "automation_tasks.app", "worker",
                "--name", f"bench-{index}", "--concurrency", str(CONCURRENCY)]  # fmt: skip
        here = str(Path(__file__).resolve().parent)
        env = _env(CHARTER_BENCH_PROCRASTINATE_URL=url,
                   PYTHONPATH=os.pathsep.join([here, *sys.path]))  # fmt: skip
        return Command(argv, env)

    def client(self, url: str) -> Client:
        return ProcrastinateClient(url)


def _procrastinate_app(url: str) -> procrastinate.App:
    """An app of this process on `url`: it defers the task by name, as another service
    would (the workers hold its code)."""
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))


class ProcrastinateClient(Client):
    """Defers jobs through Procrastinate's API; the 'deferred' event row is written in
    the deferring transaction."""

    def __init__(self, url: str) -> None:
        self.app = _procrastinate_app(url)
        self.app.open()
        self.task = self.app.configure_task(automation_tasks.TASK)

    def enqueue_now(self, tag: str) -> None:
        self.task.defer(tag=tag)

    def enqueue_due(self, tags: Sequence[str], dues: Sequence[datetime]) -> None:
        for tag, due in zip(tags, dues, strict=True):
            self.app.configure_task(automation_tasks.TASK, schedule_at=due).defer(tag=tag)

    def enqueue_backlog(self, count: int) -> None:
        for start in range(0, count, 1000):
            batch: list[dict[str, JsonValue]] = [
                {"tag": f"backlog-{i}"} for i in range(start, min(count, start + 1000))
            ]
            self.task.batch_defer(*batch)

    def causes(self, conn: Conn) -> dict[str, int]:
        rows = conn.execute(
            "SELECT j.args ->> 'tag', e.xmin::text FROM public.procrastinate_events e"
            " JOIN public.procrastinate_jobs j ON j.id = e.job_id WHERE e.type = 'deferred'"
        ).fetchall()
        return {str(tag): int(xid) for tag, xid in rows}

    def close(self) -> None:
        self.app.close()


# --- Graphile Worker ----------------------------------------------------------------------

GRAPHILE_TASK = """module.exports = async (payload, helpers) => {
  await helpers.query("INSERT INTO public.bench_fired (tag) VALUES ($1)", [payload.tag]);
};
"""


def graphile_install(root: Path) -> Path:
    """graphile-worker@GRAPHILE_VERSION under `root` (npm install if not there yet); the
    directory its workers run in (tasks/ holds the task). Raises RuntimeError."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError("node and npm are not on PATH")
    home = root / f"graphile-worker-{GRAPHILE_VERSION}"
    if not (home / "node_modules" / "graphile-worker" / "package.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="graphile-", dir=root))
        (staging / "package.json").write_text(json.dumps({"private": True}))
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--save-exact",
             f"graphile-worker@{GRAPHILE_VERSION}"],
            cwd=staging, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"npm install failed: {done.stderr.strip()[-800:]}")
        try:
            staging.rename(home)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    (home / "tasks").mkdir(exist_ok=True)
    (home / "tasks" / "bench_write.js").write_text(GRAPHILE_TASK)
    return home


def node_url(url: str) -> str:
    """A libpq conninfo as the postgres:// URL node-postgres reads."""
    parts = conninfo_to_dict(url)
    user = quote(str(parts.get("user") or "postgres"), safe="")
    password = parts.get("password")
    secret = f":{quote(str(password), safe='')}" if password else ""
    host, port = parts.get("host") or "127.0.0.1", parts.get("port") or 5432
    return f"postgresql://{user}{secret}@{host}:{port}/{quote(str(parts['dbname']), safe='')}"


class GraphileSide(Side):
    name = "Graphile"
    version = GRAPHILE_VERSION
    fired_sql = "SELECT tag, xmin::text FROM public.bench_fired"
    count_sql = "SELECT count(*) FROM public.bench_fired"
    claim_tables = ("graphile_worker._private_jobs",)

    def __init__(self, home: Path) -> None:
        self.home = home
        self.cli = str(home / "node_modules" / "graphile-worker" / "dist" / "cli.js")
        self.node = shutil.which("node") or "node"
        node_version = subprocess.run(
            [self.node, "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        self.how = (
            f"`node graphile-worker/dist/cli.js --jobs {CONCURRENCY}` (Node {node_version}),"
            " other settings default (LISTEN/NOTIFY on, polling every 2 s, a log line"
            " per job)"
        )

    def install(self, url: str) -> None:
        done = subprocess.run(
            [self.node, self.cli, "--connection", node_url(url), "--schema-only"],
            cwd=self.home, env=_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"graphile-worker --schema-only failed: {done.stderr[-800:]}")

    def command(self, url: str, index: int) -> Command:
        argv = [self.node, self.cli, "--connection", node_url(url), "--jobs", str(CONCURRENCY)]
        return Command(argv, _env(), self.home)

    def client(self, url: str) -> Client:
        return GraphileClient(url)


class GraphileClient(Client):
    """Adds jobs with Graphile Worker's SQL API, `graphile_worker.add_job`, and keeps the
    xid of each adding transaction."""

    ADD = (
        "SELECT pg_current_xact_id()::text FROM graphile_worker.add_job("
        "'bench_write', json_build_object('tag', %s::text), run_at => %s)"
    )

    def __init__(self, url: str) -> None:
        self.conn: Conn = psycopg.connect(url, autocommit=True)
        self._causes: dict[str, int] = {}

    def _add(self, tag: str, run_at: datetime | None) -> None:
        row = self.conn.execute(self.ADD, (tag, run_at)).fetchone()
        assert row is not None
        self._causes[tag] = int(row[0]) & 0xFFFFFFFF  # xid8 → the 32-bit xid of xmin

    def enqueue_now(self, tag: str) -> None:
        self._add(tag, None)

    def enqueue_due(self, tags: Sequence[str], dues: Sequence[datetime]) -> None:
        for tag, due in zip(tags, dues, strict=True):
            self._add(tag, due)

    def enqueue_backlog(self, count: int) -> None:
        self.conn.execute(
            "SELECT count(graphile_worker.add_job("
            "'bench_write', json_build_object('tag', 'backlog-' || g)))"
            " FROM generate_series(0, %s - 1) AS g",
            (count,),
        )

    def causes(self, conn: Conn) -> dict[str, int]:
        return dict(self._causes)

    def close(self) -> None:
        self.conn.close()


# --- worker processes ---------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """One worker child; its output goes to a file (a full pipe would block it)."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)


@contextlib.contextmanager
def running(side: Side, url: str, count: int, logs: Path) -> Iterator[list[WorkerProcess]]:
    """`count` worker processes of `side` on `url`, stopped (SIGTERM) on leaving."""
    started: list[WorkerProcess] = []
    try:
        for index in range(count):
            command = side.command(url, index)
            log = logs / f"{side.name.lower()}-{index}-{secrets.token_hex(3)}.log"
            with log.open("wb") as out:
                popen = subprocess.Popen(
                    command.argv, env=command.env, cwd=command.cwd,
                    stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            started.append(WorkerProcess(f"{side.name} worker {index}", popen, log))
        yield started
    finally:
        for worker in started:
            worker.stop()
