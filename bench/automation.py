"""The automation worker next to Procrastinate, in one run on one database.

Charter fires governed events (signed by the automation actor, checked and chained by
the engine, recorded by the bookkeeping functions); Procrastinate runs a task that
writes one row. Each side runs as real worker processes with default settings (except
Procrastinate's concurrency, raised from 1 to Charter's 8), one side at a time:

- wake-up latency: causing commit → fired commit, for automatic actions / deferred jobs;
- lateness: fired commit - run_at, for schedules / scheduled jobs due within a window;
- fire throughput with 1 and 2 workers over a backlog of due work;
- worker RSS and time to first fire (process spawn → first fired commit) with an empty
  table and with 1,000,000 future schedules / scheduled jobs in it.

"Fired commit" is observed the same way on both sides: an AFTER INSERT trigger (added
here, in this throwaway database only) on charter.events for automation events and on
the Procrastinate task's table sends a NOTIFY, which PostgreSQL delivers at commit to
this process's listener. Run: python bench/automation.py [--help for sizes]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import procrastinate
import psutil
import psycopg
from psycopg import sql

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role, connect
from charter.db.migrate import migrate
from charter.engine import actors
from charter.engine.process_event import Engine
from common import percentiles, print_results, scratch_database

ADMIN_URL = os.environ.get(
    "CHARTER_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEDULED = "bench/scheduled"
AUTOMATIC = "bench/automatic"
CHANNEL = "bench_fired"
CONCURRENCY = 8  # Charter's default; Procrastinate's default is 1
TASK = "bench_write"

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

# The observation triggers: each fired commit sends `<side>:<id>` on CHANNEL.
OBSERVERS = [
    """CREATE TABLE public.bench_fired (
           tag text NOT NULL, fired_at timestamptz NOT NULL DEFAULT clock_timestamp())""",
    """CREATE FUNCTION public.bench_notify_task() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM pg_notify('bench_fired', 'p:' || NEW.tag); RETURN NEW; END $$""",
    """CREATE TRIGGER bench_task_fired AFTER INSERT ON public.bench_fired
       FOR EACH ROW EXECUTE FUNCTION public.bench_notify_task()""",
    """CREATE FUNCTION public.bench_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM pg_notify('bench_fired', 'c:' || NEW.process_id); RETURN NEW; END $$""",
    """CREATE TRIGGER bench_event_fired AFTER INSERT ON charter.events
       FOR EACH ROW WHEN (NEW.actor_id = 'automation')
       EXECUTE FUNCTION public.bench_notify_event()""",
    "GRANT INSERT ON public.bench_fired TO PUBLIC",
]


def procrastinate_app(url: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name=TASK)
    async def bench_write(tag: str) -> None:
        await app.connector.execute_query_async(
            "INSERT INTO public.bench_fired (tag) VALUES (%(tag)s)", tag=tag
        )

    return app


# --- observation --------------------------------------------------------------------------


class Fired:
    """Listens on CHANNEL and keeps the wall time each tag's fired commit arrived."""

    def __init__(self, url: str) -> None:
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
        self._seen: dict[str, float] = {}
        self._changed = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._listen, name="bench-listener", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop:
            for note in self._conn.notifies(timeout=0.5):
                at = time.time()
                with self._changed:
                    self._seen.setdefault(note.payload, at)
                    self._changed.notify_all()

    def wait(self, tags: Sequence[str], timeout: float) -> list[float]:
        """The arrival time of each tag; raises if some did not arrive in `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                missing = [t for t in tags if t not in self._seen]
                if not missing:
                    return [self._seen[t] for t in tags]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(missing)} of {len(tags)} never fired")
                self._changed.wait(min(left, 0.5))

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        self._conn.close()


# --- workers ------------------------------------------------------------------------------


@dataclass
class Worker:
    popen: subprocess.Popen[bytes]
    spawned: float  # wall time

    def rss_mib(self) -> tuple[float, float]:
        """(current, peak) resident set size in MiB."""
        process = psutil.Process(self.popen.pid)
        current = process.memory_info().rss / 2**20
        peak = current
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
        return current, peak

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)


@contextlib.contextmanager
def workers(side: str, url: str, key: SecretKey, count: int) -> Iterator[list[Worker]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env |= {"CHARTER_DATABASE_URL": url, "AUTOMATION_ACTOR_SK": key.hex(),
            "PYTHONPATH": os.pathsep.join(sys.path)}  # fmt: skip
    started: list[Worker] = []
    try:
        for index in range(count):
            if side == "charter":
                command = [sys.executable, "-m", "charter", "worker", "--worker-id",
                           f"bench-{index}", "--concurrency", str(CONCURRENCY)]  # fmt: skip
            else:
                command = [sys.executable, __file__, "procrastinate-worker", "--url", url]
            popen = subprocess.Popen(
                command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            started.append(Worker(popen, time.time()))
        yield started
    finally:
        for worker in started:
            worker.stop()


def run_procrastinate_worker(url: str) -> None:
    """The child process: a Procrastinate worker until SIGTERM."""
    procrastinate_app(url).run_worker(concurrency=CONCURRENCY, wait=True, delete_jobs="never")


# --- the two sides ------------------------------------------------------------------------


class CharterSide:
    def __init__(self, url: str) -> None:
        self.url = url
        self.database = Database(url, max_size=6)
        self.engine = Engine(self.database)
        self.customer = SecretKey.generate()
        self.automation = SecretKey.generate()
        with self.database.connection(Role.ENGINE) as conn:
            self.engine.registry.deploy(conn, SCHEDULED, SCHEDULED_DEFINITION)
            self.engine.registry.deploy(conn, AUTOMATIC, AUTOMATIC_DEFINITION)
            actors.add_actor(conn, "customer", self.customer.public_key_hex, ["customer"])
            actors.add_actor(conn, "automation", self.automation.public_key_hex, ["AUTOMATION"])
            conn.commit()

    def open(self, workflow: str, input_: JsonObject | None = None) -> str:
        """Open one process (its commit has happened when this returns); its id."""
        process_id = f"b-{secrets.token_hex(6)}"
        envelope = Envelope(
            v=1, process=process_id, workflow=workflow, action="open", input=input_ or {},
            prev=None, actor=self.customer.public_key_hex, at=format_rfc3339(datetime.now(UTC)),
        )  # fmt: skip
        self.engine.process_event(sign(envelope, self.customer))
        return process_id

    def open_many(self, workflow: str, inputs: Sequence[JsonObject]) -> list[str]:
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(lambda input_: self.open(workflow, input_), inputs))

    def close(self) -> None:
        self.database.close()


class ProcrastinateSide:
    def __init__(self, url: str) -> None:
        self.app = procrastinate_app(url)
        self.app.open()

    def defer(self, tag: str, at: datetime | None = None) -> None:
        task = self.app.tasks[TASK]
        if at is None:
            task.defer(tag=tag)
        else:
            task.configure(schedule_at=at).defer(tag=tag)

    def defer_many(self, tags: Sequence[str]) -> None:
        task = self.app.tasks[TASK]
        for start in range(0, len(tags), 1000):
            batch: list[dict[str, JsonValue]] = [{"tag": tag} for tag in tags[start : start + 1000]]
            task.batch_defer(*batch)

    def close(self) -> None:
        self.app.close()


# --- measurements -------------------------------------------------------------------------


def wake_up_latency(
    charter: CharterSide, tasks: ProcrastinateSide, fired: Fired, url: str, samples: int
) -> tuple[list[float], list[float]]:
    results: list[list[float]] = [[], []]
    for side in ("charter", "procrastinate"):
        with workers(side, url, charter.automation, 1):
            _warm_up(side, charter, tasks, fired)
            for _ in range(samples):
                time.sleep(random.uniform(0.005, 0.025))  # no queueing: one at a time
                if side == "charter":
                    tag = "c:" + charter.open(AUTOMATIC)
                else:
                    job = secrets.token_hex(6)
                    tasks.defer(job)
                    tag = "p:" + job
                committed = time.time()
                (arrived,) = fired.wait([tag], timeout=30)
                results[side == "procrastinate"].append(arrived - committed)
    return results[0], results[1]


def _warm_up(side: str, charter: CharterSide, tasks: ProcrastinateSide, fired: Fired) -> None:
    """Wait until the new worker fires something (it has started and is listening)."""
    if side == "charter":
        tag = "c:" + charter.open(AUTOMATIC)
    else:
        job = secrets.token_hex(6)
        tasks.defer(job)
        tag = "p:" + job
    fired.wait([tag], timeout=120)


def lateness(
    charter: CharterSide,
    tasks: ProcrastinateSide,
    fired: Fired,
    url: str,
    count: int,
    window: float,
) -> tuple[list[float], list[float]]:
    results: list[list[float]] = [[], []]
    for side in ("charter", "procrastinate"):
        with workers(side, url, charter.automation, 1):
            _warm_up(side, charter, tasks, fired)
            # Lead time: long enough to create every row before the first is due, from
            # what one creation costs on this machine now (twice that, to be safe).
            probe = time.perf_counter()
            _warm_up(side, charter, tasks, fired)
            lead = 3.0 + 2 * count * (time.perf_counter() - probe) / 3
            start = datetime.now(UTC) + timedelta(seconds=lead)
            dues = sorted(
                start + timedelta(seconds=random.uniform(0, window)) for _ in range(count)
            )
            if side == "charter":
                ids = charter.open_many(SCHEDULED, [{"due": format_rfc3339(d)} for d in dues])
                tags = ["c:" + pid for pid in ids]
            else:
                tags = []
                for due in dues:
                    job = secrets.token_hex(6)
                    tasks.defer(job, at=due)
                    tags.append("p:" + job)
            late = datetime.now(UTC) > start
            arrived = fired.wait(tags, timeout=lead + window + 120)
            results[side == "procrastinate"] = [
                at - due.timestamp() for at, due in zip(arrived, dues, strict=True)
            ]
            if late:
                print(f"warning: {side} rows were still being created when the first fell due")
    return results[0], results[1]


def throughput(
    charter: CharterSide, tasks: ProcrastinateSide, fired: Fired, url: str, count: int, n: int
) -> tuple[float, float]:
    rates: list[float] = []
    for side in ("charter", "procrastinate"):
        if side == "charter":
            tags = ["c:" + pid for pid in charter.open_many(AUTOMATIC, [{}] * count)]
        else:
            jobs = [secrets.token_hex(6) for _ in range(count)]
            tasks.defer_many(jobs)
            tags = ["p:" + job for job in jobs]
        with workers(side, url, charter.automation, n):
            arrived = sorted(fired.wait(tags, timeout=600))
        rates.append((count - 1) / max(1e-9, arrived[-1] - arrived[0]))
    return rates[0], rates[1]


@dataclass(frozen=True)
class Startup:
    first_fire: float  # spawn → first fired commit, seconds
    rss: float
    peak: float


def startup(
    side: str, charter: CharterSide, tasks: ProcrastinateSide, fired: Fired, url: str
) -> Startup:
    """Spawn a worker with one due item waiting: time to its first fire, then its RSS."""
    if side == "charter":
        tag = "c:" + charter.open(AUTOMATIC)
    else:
        job = secrets.token_hex(6)
        tasks.defer(job)
        tag = "p:" + job
    with workers(side, url, charter.automation, 1) as (worker,):
        (arrived,) = fired.wait([tag], timeout=300)
        time.sleep(3.0)  # settled: a few idle passes / polls after the first fire
        rss, peak = worker.rss_mib()
    return Startup(arrived - worker.spawned, rss, peak)


def add_future_work(url: str, charter: CharterSide, count: int) -> tuple[float, float]:
    """`count` future schedules and `count` future scheduled jobs, each one INSERT ...
    SELECT generate_series as the owner with per-row triggers off (as a restore loads
    rows): the schedules reuse one process and its opening event, so their foreign keys
    hold by construction; the jobs get no events rows and no NOTIFY. Seconds each."""
    later = datetime.now(UTC) + timedelta(days=30)
    anchor = charter.open(SCHEDULED, {"due": format_rfc3339(later)})
    with connect(url) as conn:
        row = conn.execute(
            "SELECT head_hash FROM charter.processes WHERE id = %s", (anchor,)
        ).fetchone()
        assert row is not None
        started = time.perf_counter()
        conn.execute("SET session_replication_role = replica")  # valid keys by construction
        conn.execute(
            "INSERT INTO charter.scheduled_actions (schedule_id, process_id, workflow_path,"
            " action_name, action_data, run_at, created_event_hash, created_by_action,"
            " created_by_actor)"
            " SELECT 'future-' || g, %(pid)s, %(path)s, 'tick', '{}',"
            "        now() + interval '1 day' + g * interval '1 second',"
            "        %(hash)s, 'open', %(actor)s"
            " FROM generate_series(1, %(n)s) AS g",
            {"pid": anchor, "path": SCHEDULED, "hash": row[0],
             "actor": charter.customer.public_key_hex, "n": count},
        )  # fmt: skip
        conn.commit()
        charter_seconds = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO public.procrastinate_jobs (queue_name, task_name, args, scheduled_at)"
            " SELECT 'default', %(task)s, jsonb_build_object('tag', 'future-' || g),"
            "        now() + interval '1 day' + g * interval '1 second'"
            " FROM generate_series(1, %(n)s) AS g",
            {"task": TASK, "n": count},
        )
        conn.execute("SET session_replication_role = origin")
        conn.commit()
        procrastinate_seconds = time.perf_counter() - started
        conn.execute("ANALYZE charter.scheduled_actions")
        conn.execute("ANALYZE public.procrastinate_jobs")
        conn.commit()
    return charter_seconds, procrastinate_seconds


# --- the run ------------------------------------------------------------------------------


def _ms(samples: Sequence[float]) -> dict[float, float]:
    return {point: value * 1000 for point, value in percentiles(samples).items()}


def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    with scratch_database("automation", migrated=False) as url:
        with connect(url) as conn:
            migrate(conn)
            for statement in OBSERVERS:
                conn.execute(statement)
            conn.commit()
        tasks = ProcrastinateSide(url)
        tasks.app.schema_manager.apply_schema()
        charter = CharterSide(url)
        fired = Fired(url)
        rows: list[dict[str, object]] = []
        try:
            charter_wake, task_wake = wake_up_latency(charter, tasks, fired, url, args.samples)
            c, p = _ms(charter_wake), _ms(task_wake)
            for point in (50, 95, 99):
                rows.append(_row(f"wake-up latency p{point} (ms)", c[point], p[point]))

            charter_late, task_late = lateness(
                charter, tasks, fired, url, args.lateness, args.window
            )
            c, p = _ms(charter_late), _ms(task_late)
            for point in (50, 95, 99):
                rows.append(
                    _row(f"lateness p{point} ({args.lateness} due in {args.window:g} s, ms)",
                         c[point], p[point])
                )  # fmt: skip
            rows.append(_row("lateness max (ms)", max(charter_late) * 1000,
                             max(task_late) * 1000))  # fmt: skip

            for count in (1, 2):
                c_rate, p_rate = throughput(charter, tasks, fired, url, args.throughput, count)
                rows.append(_row(f"throughput, {count} worker(s) (fires/s)", c_rate, p_rate))

            before = [startup(side, charter, tasks, fired, url)
                      for side in ("charter", "procrastinate")]  # fmt: skip
            insert_c, insert_p = add_future_work(url, charter, args.future)
            after = [startup(side, charter, tasks, fired, url)
                     for side in ("charter", "procrastinate")]  # fmt: skip
            rows.append(_row("time to first fire, empty table (s)",
                             before[0].first_fire, before[1].first_fire))  # fmt: skip
            rows.append(_row(f"time to first fire, {args.future:,} future (s)",
                             after[0].first_fire, after[1].first_fire))  # fmt: skip
            rows.append(_row("worker RSS, empty table (MiB)", before[0].rss, before[1].rss))
            rows.append(_row(f"worker RSS, {args.future:,} future (MiB)",
                             after[0].rss, after[1].rss))  # fmt: skip
            rows.append(_row(f"worker peak RSS, {args.future:,} future (MiB)",
                             after[0].peak, after[1].peak))  # fmt: skip
            rows.append(_row(f"bulk insert of {args.future:,} future rows (s)",
                             insert_c, insert_p))  # fmt: skip
        finally:
            fired.close()
            charter.close()
            tasks.close()
    print_results(
        f"Automation worker: Charter vs Procrastinate {procrastinate.__version__}"
        f" (workers: concurrency {CONCURRENCY}, other settings default;"
        f" total {time.monotonic() - started:.0f} s)",
        rows,
    )


def _row(metric: str, charter: float, other: float) -> dict[str, object]:
    ratio = charter / other if other else float("nan")
    return {"metric": metric, "Charter": charter, "Procrastinate": other,
            "Charter/Procrastinate": f"{ratio:.2f}x"}  # fmt: skip


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    commands = parser.add_subparsers(dest="command")
    child = commands.add_parser("procrastinate-worker", help="internal: one Procrastinate worker")
    child.add_argument("--url", required=True)
    parser.add_argument("--samples", type=int, default=200, help="wake-up latency samples")
    parser.add_argument("--lateness", type=int, default=1000, help="schedules for lateness")
    parser.add_argument("--window", type=float, default=10.0, help="seconds they fall due in")
    parser.add_argument("--throughput", type=int, default=1000, help="backlog per run")
    parser.add_argument("--future", type=int, default=1_000_000, help="future schedules")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    if arguments.command == "procrastinate-worker":
        run_procrastinate_worker(arguments.url)
    else:
        main(arguments)
