"""`charter up` next to `charter serve` + `charter worker`: drain rate and wake-up latency.

Both sides run as an operator runs them, in subprocesses on one scratch database of the
local PostgreSQL, one side at a time; runs alternate (up, split, up, split, ...) so that
both sides see the same moments of this shared machine. The client is independent of
the server: it builds and signs its own envelopes and sends them over HTTP.

- drain: the side's worker process is stopped (SIGSTOP), the client creates a backlog of
  processes over HTTP (8 threads), each creation queueing one automatic action; then a
  transaction on the server takes the start instant and the worker is continued. Fires/s
  = backlog ÷ (done - start), `done` being the server's clock at the first poll (every
  20 ms) that sees every automatic event committed.
- wake-up: with the worker running, one creation every `--cadence` ms (one at a time,
  whether or not the last has fired); latency = automatic event's `received_at` - the
  creating event's `received_at`, both the server's transaction clock, so the creating
  transaction's own length is inside it on both sides.

Run: python bench/up_split.py [--runs 3] [--backlog 3000] [--wakeups 300] [--cadence 20]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import httpx
import psycopg

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from common import free_port, percentiles, print_results, scratch_database, wait_healthy

HOST = "127.0.0.1"
SIDES = ("up", "serve + worker")
THREADS = 8
WORKFLOW = "bench/auto"
DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["new", "done"],
    "roles": ["user", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "user", "to": "new"},
        "go": {"type": "transition", "role": "AUTOMATION", "from": "new", "to": "done",
               "auto": True},
    },
}  # fmt: skip
FIRED = (
    "SELECT count(*), clock_timestamp() FROM charter.events"
    " WHERE actor_id = 'automation' AND process_id = ANY(%s)"
)


@dataclass(frozen=True)
class Keys:
    user: SecretKey
    automation: SecretKey


def prepare(url: str) -> Keys:
    keys = Keys(SecretKey.generate(), SecretKey.generate())
    with Database(url, max_size=1) as database:
        engine = Engine(database)
        with database.connection(Role.ENGINE) as conn:
            engine.registry.deploy(conn, WORKFLOW, DEFINITION)
            actors.add_actor(conn, "bench-user", keys.user.public_key_hex, ["user"])
            actors.add_actor(conn, "automation", keys.automation.public_key_hex, ["AUTOMATION"])
            conn.commit()
    return keys


# --- the sides ------------------------------------------------------------------------


@dataclass(frozen=True)
class Running:
    port: int
    worker_pid: int


@contextmanager
def side(name: str, url: str, keys: Keys) -> Iterator[Running]:
    """The side's processes until the block ends: `charter up`, or `serve` and `worker`."""
    port = free_port()
    charter = [sys.executable, "-m", "charter"]
    with tempfile.TemporaryDirectory(prefix="charter-up-split-") as home, ExitStack() as stack:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
        env |= {
            "CHARTER_DATABASE_URL": url,
            "CHARTER_HOME": home,
            "AUTOMATION_ACTOR_SK": keys.automation.hex(),
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        listen = ["--host", HOST, "--port", str(port)]
        if name == "up":
            out = Path(home) / "up.out"
            up = _start([*charter, "up", *listen], env, out, stack)
            wait_healthy(port, [up])
            worker_pid = _pid_after(out, r"worker\s+process (\d+)", up)
            yield Running(port, worker_pid)
        else:
            serve = _start([*charter, "serve", *listen], env, Path(home) / "serve.out", stack)
            worker = _start([*charter, "worker"], env, Path(home) / "worker.out", stack)
            wait_healthy(port, [serve, worker])
            yield Running(port, worker.pid)


def _start(
    argv: Sequence[str], env: dict[str, str], out: Path, stack: ExitStack
) -> subprocess.Popen[bytes]:
    handle = stack.enter_context(out.open("wb"))
    process = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT)
    stack.callback(_stop, process)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _pid_after(out: Path, pattern: str, process: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(pattern, out.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            raise RuntimeError("charter up exited while starting")
        time.sleep(0.1)
    raise RuntimeError(f"charter up printed no {pattern!r}")


# --- the client -----------------------------------------------------------------------


class Creator:
    """Signs and sends creations; one keep-alive connection per thread."""

    def __init__(self, port: int, key: SecretKey) -> None:
        self.base = f"http://{HOST}:{port}"
        self.key = key
        self.clients = [httpx.Client(base_url=self.base, timeout=30) for _ in range(THREADS)]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def create(self, client: httpx.Client, process: str) -> None:
        envelope = Envelope(
            v=1, process=process, workflow=WORKFLOW, action="open", input={}, prev=None,
            actor=self.key.public_key_hex, at=format_rfc3339(datetime.now(UTC)),
        )  # fmt: skip
        body = json.dumps(sign(envelope, self.key).to_json(), separators=(",", ":"))
        answer = client.post(
            "/v1/events", content=body, headers={"Content-Type": "application/json"}
        )
        if answer.status_code != 201:
            raise RuntimeError(f"POST /v1/events answered {answer.status_code}: {answer.text}")

    def create_many(self, processes: Sequence[str]) -> None:
        shares = [processes[i::THREADS] for i in range(THREADS)]
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(self._create_share, self.clients, shares))

    def _create_share(self, client: httpx.Client, share: Sequence[str]) -> None:
        for process in share:
            self.create(client, process)


def _wait_fired(
    conn: psycopg.Connection[tuple[object, ...]], ids: list[str], every: float = 0.1
) -> datetime:
    """Poll until every one of `ids` has its automatic event; the server's clock at the
    first poll that saw them all (within `every` s of the last commit)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        row = conn.execute(FIRED, (ids,)).fetchone()
        if row is not None and row[0] == len(ids):
            return cast(datetime, row[1])
        time.sleep(every)
    raise RuntimeError("the work did not fire within 300 s")


def drain(url: str, running: Running, keys: Keys, backlog: int) -> float:
    """Fires/s of the side's worker through a backlog made while it was stopped."""
    ids = [f"drain-{secrets.token_hex(8)}" for _ in range(backlog)]
    creator = Creator(running.port, keys.user)
    os.kill(running.worker_pid, signal.SIGSTOP)
    try:
        creator.create_many(ids)
    finally:
        creator.close()
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT now()").fetchone()
            os.kill(running.worker_pid, signal.SIGCONT)
    assert row is not None
    start = row[0]
    with psycopg.connect(url, autocommit=True) as conn:
        done = _wait_fired(conn, ids, every=0.02)
    elapsed: float = (done - start).total_seconds()
    return backlog / elapsed


def wakeups(url: str, running: Running, keys: Keys, count: int, cadence_ms: float) -> list[float]:
    """Latencies (ms) from each creating event to its automatic event."""
    ids = [f"wake-{secrets.token_hex(8)}" for _ in range(count)]
    creator = Creator(running.port, keys.user)
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(THREADS) as pool:
            futures = []
            for index, process in enumerate(ids):
                slot = started + index * cadence_ms / 1000
                time.sleep(max(0.0, slot - time.perf_counter()))
                client = creator.clients[index % THREADS]
                futures.append(pool.submit(creator.create, client, process))
            for future in futures:
                future.result()
    finally:
        creator.close()
    with psycopg.connect(url, autocommit=True) as conn:
        _wait_fired(conn, ids)
        rows = conn.execute(
            "SELECT extract(epoch FROM f.received_at - c.received_at) * 1000"
            " FROM charter.events c JOIN charter.events f"
            " ON f.process_id = c.process_id AND f.seq = 2"
            " WHERE c.seq = 1 AND c.process_id = ANY(%s)",
            (ids,),
        ).fetchall()
    return [float(r[0]) for r in rows]


# --- the run --------------------------------------------------------------------------


def _spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    med = statistics.median(values)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backlog", type=int, default=3000)
    parser.add_argument("--wakeups", type=int, default=300)
    parser.add_argument("--cadence", type=float, default=20.0, help="ms between creations")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in SIDES}
    p50s: dict[str, list[float]] = {name: [] for name in SIDES}
    p99s: dict[str, list[float]] = {name: [] for name in SIDES}
    with scratch_database("up_split") as url:
        keys = prepare(url)
        for run in range(1, args.runs + 1):
            for name in SIDES:
                with side(name, url, keys) as running:
                    rate = drain(url, running, keys, args.backlog)
                    latencies = wakeups(url, running, keys, args.wakeups, args.cadence)
                figures = percentiles(latencies, (50, 99))
                p50, p99 = figures[50], figures[99]
                rates[name].append(rate)
                p50s[name].append(p50)
                p99s[name].append(p99)
                print(
                    f"run {run}/{args.runs} {name}: drain {rate:,.0f} fires/s, "
                    f"wake-up p50 {p50:.2f} ms p99 {p99:.2f} ms",
                    flush=True,
                )
    rows = [
        {
            "side": name,
            "drain fires/s": _spread(rates[name]),
            "wake-up p50 ms": _spread(p50s[name], "{:.2f}"),
            "wake-up p99 ms": _spread(p99s[name], "{:.2f}"),
        }
        for name in SIDES
    ]
    up, split = SIDES
    ratio = statistics.median(rates[up]) / statistics.median(rates[split])
    wake = statistics.median(p50s[split]) / statistics.median(p50s[up])
    print_results(
        f"charter up vs serve + worker: median (min-max) of {args.runs} interleaved runs,"
        f" backlog {args.backlog}, {args.wakeups} wake-ups every {args.cadence:g} ms",
        rows,
    )
    print(f"drain up ÷ split {ratio:.2f} (above 1 favours up); "
          f"wake-up p50 split ÷ up {wake:.2f} (above 1 favours up)")  # fmt: skip


if __name__ == "__main__":
    main()
