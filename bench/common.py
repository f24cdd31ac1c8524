"""Shared helpers for the benchmarks: the machine, timing, percentiles, memory, a table."""

from __future__ import annotations

import os
import platform
import resource
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table


def machine_summary() -> str:
    """One line: CPU model, cores, Python version and platform."""
    return (
        f"{_cpu_model()} · {os.cpu_count() or '?'} cores · "
        f"Python {platform.python_version()} ({platform.python_implementation()}) · "
        f"{platform.platform()}"
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def percentiles(
    samples: Sequence[float], points: Iterable[float] = (50, 95, 99)
) -> dict[float, float]:
    """Percentiles by linear interpolation between the closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    result: dict[float, float] = {}
    for point in points:
        rank = (len(ordered) - 1) * point / 100
        low = int(rank)
        high = min(low + 1, len(ordered) - 1)
        result[point] = ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
    return result


def peak_rss_mib() -> float:
    """Peak resident set size of this process in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@dataclass(frozen=True)
class Timing:
    """Throughput and per-operation latency of one measured operation."""

    operations: int
    seconds: float
    latencies_us: list[float]

    @property
    def per_second(self) -> float:
        return self.operations / self.seconds

    def latency(self, point: float) -> float:
        return percentiles(self.latencies_us, (point,))[point]


def measure(operation: Callable[[], object], *, seconds: float = 1.0) -> Timing:
    """Call `operation` repeatedly for about `seconds`, timing each call."""
    for _ in range(min(100, max(1, int(seconds * 100)))):  # warm caches first
        operation()
    latencies: list[float] = []
    clock = time.perf_counter_ns
    started = clock()
    deadline = started + int(seconds * 1e9)
    now = started
    while now < deadline:
        before = clock()
        operation()
        now = clock()
        latencies.append((now - before) / 1000)
    return Timing(len(latencies), (now - started) / 1e9, latencies)


def measure_interleaved(
    operations: Sequence[Callable[[], object]], *, seconds: float = 1.0
) -> list[Timing]:
    """Time several operations call by call in turn, for a fair side-by-side comparison:
    load and frequency drift on a shared machine hit each of them alike.
    """
    for _ in range(100):
        for operation in operations:
            operation()
    latencies: list[list[float]] = [[] for _ in operations]
    clock = time.perf_counter_ns
    deadline = clock() + int(seconds * 1e9)
    while clock() < deadline:
        for operation, samples in zip(operations, latencies, strict=True):
            before = clock()
            operation()
            samples.append((clock() - before) / 1000)
    return [Timing(len(samples), sum(samples) / 1e6, samples) for samples in latencies]


def print_results(
    title: str, rows: Sequence[Mapping[str, object]], *, width: int | None = None
) -> None:
    """Print the machine summary and `rows` as one table (columns from the first row);
    `width` overrides the terminal's (a wide table stays readable in a log)."""
    console = Console(width=width)
    console.print(f"[bold]{title}[/bold]")
    console.print(machine_summary())
    table = Table()
    columns = list(rows[0]) if rows else []
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in rows:
        table.add_row(*(_cell(row.get(column, "")) for column in columns))
    console.print(table)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@contextmanager
def scratch_database(prefix: str, *, migrated: bool = True) -> Iterator[str]:
    """A (migrated) database of the benchmark's own on CHARTER_BENCH_ADMIN_URL (default
    the local server), dropped afterwards; yields its URL."""
    # Imported here: the pure benchmarks need no database driver.
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from charter.db.database import connect
    from charter.db.migrate import migrate

    admin = os.environ.get(
        "CHARTER_BENCH_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    name = f"charter_bench_{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(
                sql.Identifier(name)
            )
        )
    url = make_conninfo(admin, dbname=name)
    try:
        if migrated:
            with connect(url) as conn:
                migrate(conn)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now, for a server the benchmark starts."""
    import socket

    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def wait_healthy(
    port: int, processes: Sequence[subprocess.Popen[bytes]], host: str = "127.0.0.1"
) -> None:
    """Until the API on `port` answers /healthz 200; fails if one of `processes` exits
    or 60 s pass."""
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError("a Charter process exited while starting")
        try:
            if httpx.get(f"http://{host}:{port}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the API did not become healthy in 60 s")
