"""What a NOTIFY in a committing transaction costs: commits/s of small write transactions
from 1, 8 and 32 concurrent connections, with and without a `pg_notify` in each.

PostgreSQL takes a global lock to queue notifications at commit and holds it until the
commit record is flushed, so notifying transactions cannot share a WAL flush (group
commit) with each other. This measures that effect on this machine, with the same
procedure for both sides: each transaction inserts one row into a plain (logged) table
and commits; the `notify` side adds `SELECT pg_notify('bench_notify', <id>)`.
Runs are interleaved (plain, notify, plain, ...) and repeated; median and min-max.

Run: python bench/notify.py [--seconds 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import psycopg

from common import print_results, scratch_database

CLIENTS = (1, 8, 32)


def _rate(url: str, clients: int, seconds: float, *, notify: bool) -> float:
    """Commits per second over `seconds` from `clients` connections."""
    connections = [psycopg.connect(url) for _ in range(clients)]
    stop = threading.Event()
    counts = [0] * clients

    def work(index: int) -> None:
        conn = connections[index]
        while not stop.is_set():
            with conn.transaction():
                conn.execute("INSERT INTO bench_commits (client) VALUES (%s)", (index,))
                if notify:
                    conn.execute("SELECT pg_notify('bench_notify', %s)", (str(index),))
            counts[index] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for conn in connections:
        conn.close()
    return sum(counts) / elapsed


def main(args: argparse.Namespace) -> None:
    with scratch_database("notify", migrated=False) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_commits (id bigserial PRIMARY KEY, client int)")
        rows: list[dict[str, object]] = []
        for clients in CLIENTS:
            plain: list[float] = []
            notifying: list[float] = []
            for _ in range(args.runs):  # interleaved, so drift hits both sides alike
                plain.append(_rate(url, clients, args.seconds, notify=False))
                notifying.append(_rate(url, clients, args.seconds, notify=True))
            median_plain, median_notify = statistics.median(plain), statistics.median(notifying)
            rows.append(
                {
                    "clients": clients,
                    "commits/s plain": f"{median_plain:,.0f} ({min(plain):,.0f}-{max(plain):,.0f})",
                    "commits/s with NOTIFY": (
                        f"{median_notify:,.0f} ({min(notifying):,.0f}-{max(notifying):,.0f})"
                    ),
                    "NOTIFY/plain": f"{median_notify / median_plain:.2f}x (higher is better)",
                }
            )
    print_results(
        f"Commits/s with and without NOTIFY ({args.runs} interleaved runs of {args.seconds:g} s;"
        " median (min-max))",
        rows,
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each run")
    parser.add_argument("--runs", type=int, default=3, help="runs per side and client count")
    return parser.parse_args()


if __name__ == "__main__":
    main(parse())
