"""`POST /v1/events` over real HTTP: events/s and p50/p99 latency for 1, 8 and 32 clients.

The server is `charter serve` in a subprocess of its own, on a scratch database of the
local PostgreSQL, as an operator runs it. Each client holds one keep-alive connection and
appends to a process of its own, one event in flight at a time, each event chained on the
head the previous one made. An event's hash is computed from its envelope, so every
client's chain is signed and serialized before the clock starts: during the measured
window a client only writes bytes and reads the answer (and checks the answer's hash is
the one it expected). The clients are plain asyncio streams speaking HTTP/1.1 in this
process, a few microseconds of CPU per request, so they are not what limits the figures;
their CPU per event is printed beside the server's (and PostgreSQL's backends') to show
it.

Two cases (`--case`, both by default, interleaved):
- `transitions`: the chains above, pre-signed updates of one process per client;
- `creates`: every event creates a new process whose creation schedules a 48 h timer (an
  SLA escalation), each envelope built and signed by the client while the window runs,
  as a real client would (the client's signing shows in its CPU column).

Runs are interleaved: run 1 at 1, 8 and 32 clients for each case, then run 2, and so on;
every (run, case, clients) cell gets fresh processes. Figures are the median and min-max
over runs.

With `--server-src DIR` (repeatable) the same procedure runs against a server importing
Charter from DIR/src instead of the installed one, interleaved side by side with it (for
a before/after comparison: `git archive <commit> src | tar -x -C DIR`). When DIR holds a
`.venv` (a checkout after `make .venv/.runtime`), that side's server runs on its
interpreter, so a comparison covers a change of dependencies too.

With `--workers 1,2` the installed Charter also runs as `charter serve --workers 2` (the
server CPU column then adds up every API process).

Run: python bench/ingest.py [--runs 3] [--seconds 5] [--clients 1,8,32] [--workers 1]
[--case transitions,creates] [--server-src DIR] [--quick]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from common import free_port, percentiles, print_results, scratch_database, wait_healthy
from engine import DEFINITION, WORKFLOW

HOST = "127.0.0.1"
WARMUP_EVENTS = 5  # per client, after its process's creation, before the window
# Events signed ahead per client: enough for this many events/s in all (a cap far above
# what one machine reaches), and for one client at most 1 event per this many ms.
SIGNED_CAP_PER_SECOND = 4000
MIN_LATENCY_MS = 0.5
CASES = ("transitions", "creates")

# The `creates` case: a creation that schedules an SLA escalation for 48 h later.
TIMER_WORKFLOW = "bench/sla"
TIMER_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "escalated"],
    "roles": ["user", "AUTOMATION"],
    "actions": {
        "open": {
            "type": "create",
            "role": "user",
            "to": "open",
            "schedule": [{"id": "sla", "action": "escalate", "in": "48h", "data": {}}],
        },
        "escalate": {"type": "transition", "role": "AUTOMATION", "from": "open", "to": "escalated"},
    },
}


@dataclass(frozen=True)
class Side:
    """One server under test: a label and where its Charter is imported from."""

    label: str
    src: Path | None  # None: the installed Charter
    workers: int = 1  # `charter serve --workers`


@dataclass(frozen=True)
class Cell:
    """One measured window: `clients` clients against one side."""

    side: str
    case: str
    clients: int
    events: int
    seconds: float
    latencies_ms: list[float]
    client_cpu_s: float
    server_cpu_s: float
    db_cpu_s: float | None

    @property
    def per_second(self) -> float:
        return self.events / self.seconds


# --- the chains ---------------------------------------------------------------------


@dataclass
class Chain:
    """One client's process: its request bodies in order and the hash each should get."""

    bodies: list[bytes]
    hashes: list[str]


def signed_chain(key: SecretKey, events: int) -> Chain:
    """`events` signed events of a new process: its creation, then `events - 1` bumps."""
    process = f"ingest-{secrets.token_hex(6)}"
    bodies: list[bytes] = []
    hashes: list[str] = []
    prev: str | None = None
    for n in range(events):
        envelope = Envelope(
            v=1,
            process=process,
            workflow=WORKFLOW,
            action="open" if prev is None else "bump",
            input={} if prev is None else {"n": n},
            prev=prev,
            actor=key.public_key_hex,
            at=format_rfc3339(datetime.now(UTC)),
        )
        body = json.dumps(sign(envelope, key).to_json(), separators=(",", ":"))
        bodies.append(body.encode("utf-8"))
        prev = envelope.hash()
        hashes.append(prev)
    return Chain(bodies, hashes)


# --- the clients --------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs bodies to /v1/events."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def post(self, body: bytes) -> tuple[int, bytes]:
        head = (
            f"POST /v1/events HTTP/1.1\r\nHost: {HOST}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode("ascii") + body)
        status_line = await self.reader.readline()
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def submit(conn: Connection, body: bytes, expected_hash: str) -> None:
    status, payload = await conn.post(body)
    if status != 201:
        raise RuntimeError(f"POST /v1/events answered {status}: {payload[:300]!r}")
    if json.loads(payload)["hash"] != expected_hash:
        raise RuntimeError(f"the server recorded another hash than {expected_hash}")


class Creator:
    """One client of the `creates` case: signs a new process's creation per request."""

    def __init__(self, key: SecretKey) -> None:
        self.key = key

    def next(self) -> tuple[bytes, str]:
        envelope = Envelope(
            v=1,
            process=f"sla-{secrets.token_hex(8)}",
            workflow=TIMER_WORKFLOW,
            action="open",
            input={},
            prev=None,
            actor=self.key.public_key_hex,
            at=format_rfc3339(datetime.now(UTC)),
        )
        body = json.dumps(sign(envelope, self.key).to_json(), separators=(",", ":"))
        return body.encode("utf-8"), envelope.hash()


Client = Chain | Creator


async def run_clients(
    port: int, clients: Sequence[Client], seconds: float
) -> tuple[int, float, list[float]]:
    """Warm up, then every client submits until the window closes (in-flight requests
    finish). Returns (events in the window, elapsed seconds, latencies in ms)."""
    conns = [await Connection.open(port) for _ in clients]
    try:
        # Creation and warm-up, not measured: every connection, route and pool is hot.
        await asyncio.gather(*(_warm(c, client) for c, client in zip(conns, clients, strict=True)))
        latencies: list[list[float]] = [[] for _ in clients]
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(
            *(
                _measured(c, client, deadline, samples)
                if isinstance(client, Chain)
                else _created(c, client, deadline, samples)
                for c, client, samples in zip(conns, clients, latencies, strict=True)
            )
        )
        elapsed = time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()
    flat = [s for per in latencies for s in per]
    return len(flat), elapsed, flat


async def _warm(conn: Connection, client: Client) -> None:
    for index in range(WARMUP_EVENTS + 1):
        if isinstance(client, Chain):
            await submit(conn, client.bodies[index], client.hashes[index])
        else:
            await submit(conn, *client.next())


async def _measured(conn: Connection, chain: Chain, deadline: float, samples: list[float]) -> None:
    clock = time.perf_counter
    for index in range(WARMUP_EVENTS + 1, len(chain.bodies)):
        before = clock()
        if before >= deadline:
            return
        await submit(conn, chain.bodies[index], chain.hashes[index])
        samples.append((clock() - before) * 1000)
    raise RuntimeError("a client used up its signed events before the window closed")


async def _created(
    conn: Connection, creator: Creator, deadline: float, samples: list[float]
) -> None:
    """Sign, then send, until the window closes; the latency counts the request alone."""
    clock = time.perf_counter
    while clock() < deadline:
        body, expected = creator.next()
        before = clock()
        await submit(conn, body, expected)
        samples.append((clock() - before) * 1000)


# --- the server ---------------------------------------------------------------------


@contextmanager
def charter_serve(url: str, side: Side) -> Iterator[tuple[int, psutil.Process]]:
    """`charter serve` on a free port in a subprocess, until the block ends."""
    port = free_port()
    env = {**os.environ, "CHARTER_DATABASE_URL": url}
    if side.src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(side.src / "src"), *filter(None, [env.get("PYTHONPATH")])]
        )
    with tempfile.TemporaryDirectory(prefix="charter-ingest-") as home:
        env["CHARTER_HOME"] = home
        command = [_python(side), "-m", "charter", "serve", "--host", HOST, "--port", str(port)]
        if side.workers > 1:
            command += ["--workers", str(side.workers)]
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        try:
            wait_healthy(port, [server])
            yield port, psutil.Process(server.pid)
        finally:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _python(side: Side) -> str:
    """The interpreter a side's server runs on: DIR/.venv's when `--server-src DIR` has one
    (its dependencies are then the side's too), else this one."""
    if side.src is not None and (side.src / ".venv" / "bin" / "python").exists():
        return str(side.src / ".venv" / "bin" / "python")
    return sys.executable


# --- CPU accounting -----------------------------------------------------------------


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _tree_cpu(process: psutil.Process) -> float:
    """CPU of the server and its child processes (`--workers`)."""
    return _cpu(process) + sum(_cpu(child) for child in process.children(recursive=True))


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Backends:
    """CPU of the PostgreSQL backends serving the benchmark database (None if they cannot
    be read: PostgreSQL on another host, or no permission)."""

    def __init__(self, admin: psycopg.Connection[tuple[object, ...]], dbname: str) -> None:
        self.admin = admin
        self.dbname = dbname

    def snapshot(self) -> dict[int, float] | None:
        rows = self.admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.dbname],
        ).fetchall()
        found: dict[int, float] = {}
        for (pid,) in rows:
            try:
                found[int(str(pid))] = _cpu(psutil.Process(int(str(pid))))
            except psutil.NoSuchProcess:
                continue
            except psutil.AccessDenied:
                return None
        return found

    @staticmethod
    def spent(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
        if before is None or after is None:
            return None
        # A backend that started during the window started from zero.
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


# --- one cell, all runs -------------------------------------------------------------


def measure_cell(
    side: str,
    port: int,
    server: psutil.Process,
    backends: Backends,
    key: SecretKey,
    case: str,
    clients: int,
    seconds: float,
) -> Cell:
    workload: list[Client]
    if case == "creates":
        workload = [Creator(key) for _ in range(clients)]
    else:
        per_client = int(seconds * min(SIGNED_CAP_PER_SECOND / clients, 1000 / MIN_LATENCY_MS))
        workload = [signed_chain(key, WARMUP_EVENTS + 1 + per_client) for _ in range(clients)]
    client_before, server_before = _client_cpu(), _tree_cpu(server)
    db_before = backends.snapshot()
    events, elapsed, latencies = asyncio.run(run_clients(port, workload, seconds))
    client_cpu, server_cpu = _client_cpu() - client_before, _tree_cpu(server) - server_before
    db_cpu = Backends.spent(db_before, backends.snapshot())
    # The CPU figures include the warm-up's few events: scale them to the window's share.
    share = events / (events + clients * (WARMUP_EVENTS + 1))
    return Cell(
        side,
        case,
        clients,
        events,
        elapsed,
        latencies,
        client_cpu * share,
        server_cpu * share,
        db_cpu * share if db_cpu is not None else None,
    )


def summary(cells: Sequence[Cell]) -> dict[str, object]:
    """Median and min-max over runs of one (side, case, clients)."""
    rates = [c.per_second for c in cells]
    p50 = [percentiles(c.latencies_ms, (50,))[50] for c in cells]
    p99 = [percentiles(c.latencies_ms, (99,))[99] for c in cells]

    def cpu_ms(values: Sequence[float | None]) -> str:
        known = [v for v in values if v is not None]
        return f"{statistics.median(known):.2f}" if len(known) == len(values) else "n/a"

    first = cells[0]
    return {
        "side": first.side,
        "case": first.case,
        "clients": first.clients,
        "events/s": _spread(rates, "{:,.0f}"),
        "p50 ms": _spread(p50, "{:.1f}"),
        "p99 ms": _spread(p99, "{:.1f}"),
        "server CPU ms/event": cpu_ms([c.server_cpu_s * 1000 / c.events for c in cells]),
        "PostgreSQL CPU ms/event": cpu_ms(
            [c.db_cpu_s * 1000 / c.events if c.db_cpu_s is not None else None for c in cells]
        ),
        "client CPU ms/event": cpu_ms([c.client_cpu_s * 1000 / c.events for c in cells]),
    }


def _spread(values: Sequence[float], fmt: str) -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    low, high = min(values), max(values)
    return f"{fmt.format(statistics.median(values))} ({fmt.format(low)}-{fmt.format(high)})"


def prepare(url: str) -> SecretKey:
    """The workflow and an actor allowed to run it."""
    key = SecretKey.generate()
    with Database(url, max_size=1) as database:
        engine = Engine(database)
        with database.connection(Role.ENGINE) as conn:
            engine.registry.deploy(conn, WORKFLOW, DEFINITION)
            engine.registry.deploy(conn, TIMER_WORKFLOW, TIMER_DEFINITION)
            actors.add_actor(conn, "ingest", key.public_key_hex, ["user"])
            conn.commit()
    return key


def bench(
    url: str,
    sides: Sequence[Side],
    cases: Sequence[str],
    levels: Sequence[int],
    runs: int,
    seconds: float,
) -> None:
    key = prepare(url)
    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    cells: dict[tuple[str, str, int], list[Cell]] = {}
    with psycopg.connect(url, autocommit=True) as admin, ExitStack() as stack:
        servers = [stack.enter_context(charter_serve(url, side)) for side in sides]
        backends = Backends(admin, str(dbname))
        for run in range(1, runs + 1):
            for side, (port, server) in zip(sides, servers, strict=True):
                for case in cases:
                    for clients in levels:
                        cell = measure_cell(
                            side.label, port, server, backends, key, case, clients, seconds
                        )
                        cells.setdefault((side.label, case, clients), []).append(cell)
                        print(
                            f"run {run}/{runs} {side.label} {case} {clients:>2} client(s): "
                            f"{cell.per_second:,.0f} events/s",
                            flush=True,
                        )
    rows = [
        summary(cells[(side.label, case, clients)])
        for clients in levels
        for case in cases
        for side in sides
    ]
    title = "POST /v1/events over HTTP, charter serve in a subprocess"
    if runs > 1:
        title += f": median (min-max) of {runs} runs of {seconds:g} s"
    print_results(title, rows, width=170)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", default="1,8,32", help="comma-separated client counts")
    parser.add_argument(
        "--case",
        default=",".join(CASES),
        help="comma-separated cases: transitions (pre-signed), creates (with a timer, "
        "signed while sent)",
    )
    parser.add_argument(
        "--workers",
        default="1",
        help="comma-separated `charter serve --workers` values for the installed Charter",
    )
    parser.add_argument(
        "--server-src",
        action="append",
        default=[],
        metavar="DIR",
        help="also run a server importing Charter from DIR/src (repeatable)",
    )
    parser.add_argument("--quick", action="store_true", help="3 runs of 1.5 s (under a minute)")
    args = parser.parse_args()
    seconds = 1.5 if args.quick else args.seconds
    levels = [int(part) for part in args.clients.split(",") if part.strip()]
    cases = [part.strip() for part in args.case.split(",") if part.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    sides = [
        Side("installed" if n == 1 else f"installed, {n} workers", None, n)
        for n in (int(part) for part in args.workers.split(","))
    ] + [Side(Path(src).name or src, Path(src).resolve()) for src in args.server_src]
    with scratch_database("ingest") as url:
        bench(url, sides, cases, levels, args.runs, seconds)


if __name__ == "__main__":
    main()
