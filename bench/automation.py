"""The automation worker next to Procrastinate and Graphile Worker, measured from outside.

Charter fires governed events (signed by the automation actor, checked and chained by
the engine, recorded by the bookkeeping functions, one transaction per batch); the
other two run a task that writes one row into a plain table. Every side runs as real
worker processes with its defaults, except that Procrastinate and Graphile Worker run
as many jobs at once as Charter runs batches (their default is one).

Nothing is added in the path of any worker: no trigger, no NOTIFY. While work fires the
bench only counts the fired rows every 0.25 s (0.5 s in backlog trials), to know when
to stop. Afterwards it reads which transaction wrote each row (`xmin`) and that
transaction's commit instant from the server's WAL (see automation_observe.py). So
every instant below is a COMMIT instant, on every side, on the server's clock:

- wake-up latency: commit of the transaction that created the work (Charter: the
  `open` event; Procrastinate: the defer; Graphile: `graphile_worker.add_job`) →
  commit of the transaction that made its effect visible (Charter: the batch holding
  the automation event and its bookkeeping; the others: the task's INSERT, before the
  job's own "done" transaction). Work is created one item at a time on a fixed cadence
  (each at its slot, in a small thread pool, so a slow creation does not stretch it),
  whether or not the last one has fired; one worker process.
- lateness: that fired commit minus the due instant, for schedules / scheduled jobs due
  evenly over a window (set far enough ahead that all exist before the first is due);
  then, on the same worker and database.
- backlog throughput: each trial clones a template holding the backlog and locks the
  tables the side's claims read; workers start, and once every worker process has a
  backend waiting for that lock (started, connected, at its first claim), the bench
  releases it with a transaction whose commit is the start line. Throughput: the
  backlog ÷ (last fired commit - start line), with 1 and 2 worker processes.
- CPU per fire, in the backlog trials: the CPU spent from just before the start line
  to the last fire seen (polling every 0.5 s) ÷ the backlog. User+system CPU of the
  worker processes and their children (psutil), and of the PostgreSQL client backends
  connected to the trial database other than the bench's own (pids from
  pg_stat_activity, CPU from /proc, sampled every 0.5 s so a backend that leaves counts
  up to its last sample). Autovacuum and the server's background processes are not
  counted on any side.

Each trial runs in a fresh database cloned from a template, so no side inherits
another's dead rows. Trials interleave the sides (the starting side rotates per run);
each figure is the median over runs, with the lowest and highest ("a to b").

Needs: CHARTER_BENCH_ADMIN_URL (default the local server) naming a superuser (to hold
and read the WAL), a pg_waldump of the server's major version, the server on this
machine (for the backends' CPU; "n/a" otherwise), and Node.js with npm for Graphile
Worker (installed under $TMPDIR/charter-bench on first use; without it the bench runs
the other two).

Run: python bench/automation.py [--quick] [--help for sizes]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from automation_observe import (
    CommitWindow,
    CpuMeter,
    WalUnavailable,
    check_commit_window,
    commit_window,
    find_waldump,
    instant,
    peak_rss_mib,
    waiting_on_locks,
)
from automation_report import (
    QUICK,
    RESPONSIVENESS,
    Results,
    Sizes,
    Stats,
    backlog_key,
    describe,
    table,
)
from automation_sides import (
    BENCH_TABLE,
    CharterSide,
    Client,
    GraphileSide,
    ProcrastinateSide,
    Side,
    WorkerProcess,
    graphile_install,
    running,
)
from charter.db.database import connect
from charter.db.migrate import migrate
from common import percentiles, print_results

ADMIN_URL = os.environ.get(
    "CHARTER_BENCH_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
Conn = psycopg.Connection[tuple[Any, ...]]


# --- databases ----------------------------------------------------------------------------


@dataclass
class Bench:
    """The admin connection's databases (a template per backlog, a clone per trial),
    the WAL reader and a scratch directory for worker logs."""

    admin: str
    scratch: Path
    waldump: str
    prefix: str = field(default_factory=lambda: f"charter_bench_automation_{secrets.token_hex(3)}")
    templates: dict[str, str] = field(default_factory=dict)
    _created: list[str] = field(default_factory=list)
    _used: list[str] = field(default_factory=list)  # trial clones, to drop
    _clones: int = 0

    def url(self, name: str) -> str:
        return make_conninfo(self.admin, dbname=name)

    def create(self, name: str, template: str = "template0") -> str:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {} ENCODING 'UTF8'").format(
            sql.Identifier(name), sql.Identifier(template)
        )
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for attempt in range(20):
                try:
                    conn.execute(statement)
                    break
                except psycopg.errors.ObjectInUse:  # a lingering session on the template
                    if attempt == 19:
                        raise
                    time.sleep(0.5)
        self._created.append(name)
        return self.url(name)

    def seal(self, name: str) -> None:
        """No more sessions on `name` (autovacuum included): it can be cloned."""
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(
                    sql.Identifier(name)
                )
            )

    def drop(self, name: str) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        if name in self._created:
            self._created.remove(name)

    def drop_all(self) -> None:
        for name in list(self._created):
            with contextlib.suppress(psycopg.Error):
                self.drop(name)

    @contextlib.contextmanager
    def clone(self, template: str) -> Iterator[str]:
        """A fresh copy of `template` for one trial, dropped by `drop_used()`."""
        self._clones += 1
        name = f"{self.prefix}_t{self._clones}"
        url = self.create(name, template)
        try:
            yield url
        finally:
            self._used.append(name)

    def drop_used(self) -> None:
        """Drop the trials' clones (between rounds: their backends have gone by then)."""
        while self._used:
            self.drop(self._used.pop())

    def wal(self) -> contextlib.AbstractContextManager[CommitWindow]:
        return commit_window(self.admin, self.waldump, self.scratch)


def build_templates(bench: Bench, sides: Sequence[Side], backlog: int) -> None:
    """`base`: Charter migrated and its workflows deployed, Procrastinate's and Graphile
    Worker's schemas, the task table; per side, base plus its backlog of due work."""
    base = f"{bench.prefix}_base"
    url = bench.create(base)
    with connect(url) as conn:
        migrate(conn)
        conn.execute(BENCH_TABLE)
        conn.commit()
    for side in sides:
        side.install(url)
    _vacuum(url)
    bench.seal(base)
    bench.templates["base"] = base
    for side in sides:
        name = f"{bench.prefix}_{side.name.lower()}"
        started = time.monotonic()
        with contextlib.closing(side.client(bench.create(name, base))) as client:
            client.enqueue_backlog(backlog)
        _vacuum(bench.url(name))
        bench.seal(name)
        bench.templates[side.name] = name
        progress(f"{side.name}: backlog of {backlog:,} made in {time.monotonic() - started:.0f} s")


def _vacuum(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


# --- one trial ----------------------------------------------------------------------------


@dataclass
class Trial:
    """One side's worker on a fresh database, with the client that makes its work."""

    side: Side
    client: Client
    observer: Conn
    workers: list[WorkerProcess]
    fired: int = 0  # rows made so far that fire (their firing has been waited for)

    def wait_for(self, made: int, timeout: float, *, every: float = 0.25) -> None:
        """Wait until the `made` rows made since the last wait have fired too."""
        self.fired += made
        wait_fired(self.side, self.observer, self.workers, self.fired, timeout, every=every)


def wait_fired(
    side: Side, observer: Conn, workers: Sequence[WorkerProcess], target: int, timeout: float,
    *, every: float, on_poll: Callable[[], None] = lambda: None,
) -> None:  # fmt: skip
    """Poll until `target` rows have fired."""

    def fired() -> bool:
        on_poll()
        return side.count(observer) >= target

    wait_until(fired, workers, timeout, every, f"{side.name}: {target} fired")


def wait_until(
    condition: Callable[[], bool], workers: Sequence[WorkerProcess], timeout: float,
    every: float, what: str,
) -> None:  # fmt: skip
    """Poll `condition`; fail if a worker exits or `timeout` passes first."""
    deadline = time.monotonic() + timeout
    while not condition():
        for worker in workers:
            if not worker.alive():
                raise RuntimeError(f"{worker.name} exited:\n{worker.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


@contextlib.contextmanager
def trial(bench: Bench, side: Side) -> Iterator[Trial]:
    """A fresh database, a client, an observer connection and one worker process that
    has fired one item and settled (started, connected and listening)."""
    with (
        bench.clone(bench.templates["base"]) as url,
        contextlib.closing(side.client(url)) as client,
        psycopg.connect(url, autocommit=True) as observer,
        running(side, url, 1, bench.scratch) as processes,
    ):
        current = Trial(side, client, observer, processes)
        client.enqueue_now("warm-up")
        current.wait_for(1, timeout=120, every=0.05)
        time.sleep(0.5)
        yield current


def responsiveness(bench: Bench, side: Side, sizes: Sizes) -> Stats:
    """Wake-up latency, then lateness, with one worker process on one database."""
    with trial(bench, side) as current:
        return wake_up_latency(bench, current, sizes) | lateness(bench, current, sizes)


def wake_up_latency(bench: Bench, current: Trial, sizes: Sizes) -> Stats:
    """Each item is created at its slot on the cadence, in a thread of a small pool, so
    a creation slower than the spacing (Charter's goes through the engine) does not
    stretch the cadence; the spacing reported is that of the causing commits."""
    tags = [f"wake-{i}" for i in range(sizes.samples)]
    with bench.wal() as wal:
        with ThreadPoolExecutor(4) as pool:
            begin = time.monotonic()
            made = []
            for index, tag in enumerate(tags):
                pause = begin + index * sizes.spacing - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                made.append(pool.submit(current.client.enqueue_now, tag))
            for creation in made:
                creation.result()
        current.wait_for(len(tags), timeout=120 + 2 * len(tags))
        commits = wal.commit_times()
    fired = current.side.fired(current.observer)
    causes = current.client.causes(current.observer)
    caused = [instant(commits, causes[tag], "cause") for tag in tags]
    delays = [
        (instant(commits, fired[tag], "fired") - cause).total_seconds()
        for tag, cause in zip(tags, caused, strict=True)
    ]
    points = percentiles(delays, (50, 95, 99))
    stats: Stats = {f"p{p:g}": v * 1000 for p, v in points.items()}
    spacing = (max(caused) - min(caused)).total_seconds() / max(1, len(tags) - 1)
    return stats | {"spacing": spacing * 1000}


def lateness(bench: Bench, current: Trial, sizes: Sizes) -> Stats:
    count = sizes.lateness
    tags = [f"due-{i}" for i in range(count)]
    # Lead time: long enough to create every row before the first is due, from what one
    # creation costs here now (three times that, to be safe).
    probe = time.perf_counter()
    far = datetime.now(UTC) + timedelta(days=1)
    current.client.enqueue_due([f"probe-{i}" for i in range(3)], [far] * 3)
    lead = 1.0 + count * (time.perf_counter() - probe)
    start = datetime.now(UTC) + timedelta(seconds=lead)
    dues = [start + timedelta(seconds=i * sizes.window / count) for i in range(count)]
    with bench.wal() as wal:
        current.client.enqueue_due(tags, dues)
        if datetime.now(UTC) > start:
            progress(f"warning: {current.side.name} rows were still being created when the"
                     " first fell due")  # fmt: skip
        current.wait_for(count, timeout=lead + sizes.window + 120)
        commits = wal.commit_times()
    fired = current.side.fired(current.observer)
    late = [
        (instant(commits, fired[tag], "fired") - due).total_seconds()
        for tag, due in zip(tags, dues, strict=True)
    ]
    points = percentiles(late, (50, 99))
    return {"late p50": points[50] * 1000, "late p99": points[99] * 1000,
            "late max": max(late) * 1000}  # fmt: skip


def backlog(bench: Bench, side: Side, sizes: Sizes, workers: int) -> Stats:
    """Workers start on a clone holding the backlog while the bench holds the tables
    their claims read locked; once every worker waits at that lock (started, connected),
    CPU is read and the lock released by a transaction whose commit is the start line.
    Throughput: the backlog ÷ (last fired commit - that commit)."""
    count = sizes.backlog
    timeout = 300 + count / 10
    with (
        bench.clone(bench.templates[side.name]) as url,
        psycopg.connect(url, autocommit=True) as observer,
        psycopg.connect(url) as gate,
        bench.wal() as wal,
    ):
        gate_pid = close_gate(gate, side)
        with running(side, url, workers, bench.scratch) as processes:
            pids = [p.pid for p in processes]
            wait_until(lambda: waiting_on_locks(pids, observer), processes, timeout=120,
                       every=0.1, what=f"{side.name} workers to reach their claim")  # fmt: skip
            meter = CpuMeter(pids, observer, exclude=[gate_pid])
            meter.start()
            start_xid = open_gate(gate)
            wait_fired(side, observer, processes, count, timeout, every=0.5, on_poll=meter.sample)
            meter.sample()
            rss = max(peak_rss_mib(pid) for pid in pids)
        commits = wal.commit_times()
        fired = side.fired(observer)
    start = instant(commits, start_xid, "the start line")
    last = max(instant(commits, xid, "fired") for xid in fired.values())
    cpu_workers, cpu_backends = meter.seconds()
    return {
        "rate": count / (last - start).total_seconds(),
        "cpu_workers": cpu_workers * 1000 / count,
        "cpu_backends": None if cpu_backends is None else cpu_backends * 1000 / count,
        "cpu_total": None if cpu_backends is None else (cpu_workers + cpu_backends) * 1000 / count,
        "rss": rss,
    }


def close_gate(gate: Conn, side: Side) -> int:
    """Lock `side`'s claim tables in `gate`'s transaction; the gate's backend pid."""
    tables = sql.SQL(", ").join(sql.Identifier(*name.split(".")) for name in side.claim_tables)
    gate.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tables))
    row = gate.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def open_gate(gate: Conn) -> int:
    """Release the lock with a commit the WAL records; its (32-bit) xid."""
    gate.execute("SELECT pg_logical_emit_message(true, 'charter-bench', 'start')")
    row = gate.execute("SELECT pg_current_xact_id()::text").fetchone()
    gate.commit()
    assert row is not None
    return int(row[0]) & 0xFFFFFFFF


# --- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    key: str
    run: Callable[[Bench, Side, Sizes], Stats]


def measures(sizes: Sizes) -> list[Measure]:
    found = [Measure(RESPONSIVENESS, responsiveness)]
    return found + [Measure(backlog_key(n), _backlog_with(n)) for n in sizes.workers]


def _backlog_with(workers: int) -> Callable[[Bench, Side, Sizes], Stats]:
    return lambda bench, side, sizes: backlog(bench, side, sizes, workers)


def run_all(bench: Bench, sides: Sequence[Side], sizes: Sizes) -> Results:
    """Every measure, `sizes.runs` times per side, the sides interleaved: run r starts
    with side r (mod the number of sides), so no side always goes first."""
    results: Results = {}
    for measure in measures(sizes):
        for run in range(sizes.runs):
            for side in [*sides[run % len(sides) :], *sides[: run % len(sides)]]:
                started = time.monotonic()
                stats = measure.run(bench, side, sizes)
                results.setdefault((measure.key, side.name), []).append(stats)
                shown = ", ".join(f"{k} {v:.2f}" for k, v in stats.items() if v is not None)
                progress(f"{measure.key} run {run + 1}/{sizes.runs} {side.name}: {shown}"
                         f" ({time.monotonic() - started:.0f} s)")  # fmt: skip
            bench.drop_used()
    return results


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def server_version(admin: str) -> tuple[str, int]:
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute("SELECT version(), current_setting('server_version_num')").fetchone()
    assert row is not None
    return str(row[0]).split(",")[0], int(row[1]) // 10000


def choose_sides(names: Sequence[str], scratch_root: Path) -> list[Side]:
    sides: list[Side] = [CharterSide()]
    if "procrastinate" in names:
        sides.append(ProcrastinateSide())
    if "graphile" in names:
        try:
            sides.append(GraphileSide(graphile_install(scratch_root)))
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            progress(f"Graphile Worker is unavailable here ({exc}); running without it")
    return sides


def main(args: argparse.Namespace) -> int:
    sizes = QUICK if args.quick else Sizes()
    sizes = replace(sizes, **{k: v for k, v in vars(args).items()
                              if k in Sizes.__dataclass_fields__ and v is not None})  # fmt: skip
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    load_before = load_average()
    version, major = server_version(ADMIN_URL)
    root = Path(tempfile.gettempdir()) / "charter-bench"
    sides = choose_sides(args.sides.split(","), root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="automation-", dir=root) as scratch:
        try:
            bench = Bench(ADMIN_URL, Path(scratch), find_waldump(major))
            check_commit_window(bench.admin, bench.waldump, bench.scratch)
        except WalUnavailable as exc:
            progress(f"cannot read commit instants from the WAL: {exc}")
            return 2
        try:
            setup = time.monotonic()
            build_templates(bench, sides, sizes.backlog)
            progress(f"templates made in {time.monotonic() - setup:.0f} s")
            results = run_all(bench, sides, sizes)
        finally:
            bench.drop_all()
    print_results(
        f"Automation worker: {' vs '.join(f'{s.name} {s.version}' for s in sides)}"
        f" ({_runs(sizes.runs)}; {time.monotonic() - started:.0f} s in all)",
        table(results, sides, sizes),
        width=200,
    )
    print(f"command: {command}")
    print(f"sizes: {describe(sizes)}")
    print(f"PostgreSQL: {version}; load average (1, 5, 15 min) before: {load_before},"
          f" after: {load_average()}")  # fmt: skip
    for side in sides:
        print(f"{side.name}: {side.how}")
    print(
        "Instants are COMMIT instants from the WAL on every side (see the module's"
        " docstring); CPU is user+system time of the worker processes and of their"
        " PostgreSQL client backends, from the backlog's start line to its last fire."
    )
    return 0


def _runs(runs: int) -> str:
    if runs == 1:
        return "1 run per side and measure"
    return f"{runs} runs per side and measure: median (lowest to highest)"


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true",
                        help=f"a short smoke run: {QUICK.runs} run, small sizes")  # fmt: skip
    parser.add_argument("--runs", type=int, help="runs per side and measure (default 3)")
    parser.add_argument("--samples", type=int, help="wake-up latency samples (default 300)")
    parser.add_argument("--lateness", type=int, help="schedules falling due (default 200)")
    parser.add_argument("--window", type=float, help="seconds they fall due over (default 10)")
    parser.add_argument("--backlog", type=int, help="backlog size (default 10,000)")
    parser.add_argument("--sides", default="charter,procrastinate,graphile",
                        help="comma-separated; Charter always runs")  # fmt: skip
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse(sys.argv[1:])))
