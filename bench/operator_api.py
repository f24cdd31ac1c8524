"""The operator API at scale: `GET /v1/processes` latency over 100,000 processes (first
pages with each filter, and pages deep into the list by cursor), and the live stream's
fan-out latency (hint sent → received by every one of N `GET /v1/stream` subscribers),
and what migration 0013's indexes on processes cost the engine's event appends.
(Named operator_api.py: an `operator.py` in bench/ would shadow the standard library's
`operator` module for every script here.)

The API runs in its own process (uvicorn, as `charter serve` runs it); the client runs in
this one. Processes are inserted directly (head-less rows, as `charter.processes` holds
them before their first event): 20 workflows under `bench/`, 4 states, update times
spread over 30 days, ids `p-<8 hex>`.

List latency: each case is the wall time of one HTTP request from this process (one
keep-alive connection), `--requests` requests per run after 10 warm-up requests.

Fan-out latency: N subscribers hold open streams (httpx, one asyncio loop in this
process); a sender on its own connection sends the hint the engine sends after an event's
COMMIT (`pg_notify('charter_events', {process, seq, hash, action, actor_id})`, in a
transaction of its own, as engine/hints.py does); the latency of a hint is from just
before that statement to the moment a subscriber has parsed it. "all N" is the time until
the last of the N had it. One hint at a time, `--hints` per run, 20 ms apart. The
subscribers share this process's one event loop, so their own parsing is part of it.

Every figure: `--runs` runs (default 3), the median of the runs' p50/p99 and the min-max
across runs. Lower is better everywhere.

Run: python bench/operator_api.py [--processes 100000] [--runs 3] [--quick]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from multiprocessing.context import SpawnProcess

import httpx
import psycopg
import uvicorn

from charter.api.app import create_app
from charter.auth.tokens import create_token
from charter.core.config import Settings
from charter.db.database import Database, Role
from common import percentiles, print_results, scratch_database

WORKFLOWS = 20
STATES = ("open", "review", "approved", "closed")


# --- the API process --------------------------------------------------------------------


def serve_api(database_url: str, port: int) -> None:
    database = Database(database_url, max_size=16)
    settings = Settings(database_url=database_url, api_url=f"http://127.0.0.1:{port}")
    app = create_app(database, settings=settings)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def start_api(database_url: str) -> tuple[str, SpawnProcess]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = multiprocessing.get_context("spawn").Process(
        target=serve_api, args=(database_url, port), daemon=True
    )
    process.start()
    api = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{api}/healthz").status_code == 200:
                return api, process
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("the API did not start")


# --- data -------------------------------------------------------------------------------


def load(url: str, count: int) -> str:
    """Insert `count` processes; an admin token."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO charter.processes (id, workflow_path, state, data, created_at, updated_at)
            SELECT 'p-' || substr(md5(n::text), 1, 8) || '-' || n,
                   'bench/wf-' || lpad((n %% %(workflows)s)::text, 2, '0'),
                   (%(states)s::text[])[1 + (n / 7) %% 4],
                   jsonb_build_object('n', n),
                   t, t
            FROM generate_series(1, %(count)s) AS n,
                 LATERAL (SELECT now() - (random() * interval '30 days') AS t) AS times
            """,
            {"count": count, "workflows": WORKFLOWS, "states": list(STATES)},
        )
        conn.execute("ANALYZE charter.processes")
    with (
        Database(url, max_size=1) as database,
        database.connection(Role.ENGINE) as conn,
        conn.transaction(),
    ):
        return create_token(conn, scopes=["*"], name="bench", principal="bench")


# --- GET /v1/processes ------------------------------------------------------------------


def list_cases(http: httpx.Client, pages: int) -> dict[str, Callable[[], object]]:
    def get(**params: object) -> Callable[[], object]:
        def call() -> object:
            response = http.get("/v1/processes", params=params)  # type: ignore[arg-type]
            assert response.status_code == 200, response.text
            return response.json()

        return call

    def deep() -> object:
        """`pages` pages in a row by cursor: the time of the last one is what counts, so
        this returns it (the case below times only that request)."""
        cursor = None
        for _ in range(pages - 1):
            params = {"limit": 50, **({"cursor": cursor} if cursor else {})}
            cursor = http.get("/v1/processes", params=params).json()["next_cursor"]
        return cursor

    cursors: list[str] = []

    def next_deep() -> object:
        if not cursors:
            cursors.append(str(deep()))
        response = http.get("/v1/processes", params={"limit": 50, "cursor": cursors[0]})
        assert response.status_code == 200, response.text
        return response

    def stats() -> object:
        response = http.get("/v1/stats")
        assert response.status_code == 200, response.text
        return response

    return {
        "first page, no filter (limit 50)": get(limit=50),
        "first page, limit 500": get(limit=500),
        "workflow = one of 20": get(workflow="bench/wf-07"),
        "workflow prefix bench/wf-1*": get(workflow="bench/wf-1*"),
        "workflow and state": get(workflow="bench/wf-07", state="review"),
        "state only (no index of its own)": get(state="closed"),
        "q = id prefix (p-ab)": get(q="p-ab"),
        "updated_after 1 day ago": get(updated_after=_ago(86400)),
        f"page {pages} by cursor": next_deep,
        "GET /v1/stats (counts every process)": stats,
    }


def _ago(seconds: float) -> str:
    moment = time.time() - seconds
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def time_calls(call: Callable[[], object], requests: int) -> list[float]:
    for _ in range(10):
        call()
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


# --- GET /v1/stream ---------------------------------------------------------------------


async def fan_out(
    api: str, token: str, url: str, subscribers: int, hints: int
) -> tuple[list[float], list[float]]:
    """(latency of every subscriber for every hint, time until all had each hint), ms."""
    received: list[dict[int, float]] = [{} for _ in range(subscribers)]
    ready = asyncio.Semaphore(0)
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=subscribers + 4)
    timeout = httpx.Timeout(60.0)

    async with httpx.AsyncClient(base_url=api, limits=limits, timeout=timeout) as client:

        async def subscribe(index: int) -> None:
            async with client.stream("GET", "/v1/stream", headers=headers) as response:
                ready.release()
                data = None
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        data = line[6:]
                    elif line == "" and data is not None:
                        seq = int(json.loads(data)["seq"])
                        received[index][seq] = time.perf_counter()
                        data = None

        tasks = [asyncio.create_task(subscribe(i)) for i in range(subscribers)]
        for _ in range(subscribers):
            await asyncio.wait_for(ready.acquire(), 30)
        sent: dict[int, float] = {}
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for seq in range(1, hints + 1):
                payload = json.dumps(
                    {"process": "bench", "seq": seq, "hash": "0" * 64, "action": "go",
                     "actor_id": "bench"}
                )  # fmt: skip
                sent[seq] = time.perf_counter()
                await conn.execute("SELECT pg_notify('charter_events', %s)", (payload,))
                deadline = time.perf_counter() + 10
                while any(seq not in got for got in received):
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"hint {seq} did not reach every subscriber")
                    await asyncio.sleep(0.0005)
                await asyncio.sleep(0.02)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    each = [(got[seq] - sent[seq]) * 1000 for got in received for seq in sent]
    every = [(max(got[seq] for got in received) - sent[seq]) * 1000 for seq in sent]
    return each, every


# --- what the indexes cost the engine ---------------------------------------------------

# Migration 0013's process indexes, and the one it replaced.
WITH_INDEXES = (
    "CREATE INDEX processes_recent ON charter.processes (updated_at, id)",
    "CREATE INDEX processes_workflow_recent ON charter.processes (workflow_path, updated_at, id)",
    "CREATE INDEX processes_id_prefix ON charter.processes (id text_pattern_ops)",
    "DROP INDEX charter.processes_workflow",
)
WITHOUT_INDEXES = (
    "DROP INDEX charter.processes_recent",
    "DROP INDEX charter.processes_workflow_recent",
    "DROP INDEX charter.processes_id_prefix",
    "CREATE INDEX processes_workflow ON charter.processes (workflow_path)",
)


def index_cost(url: str, runs: int, seconds: float, writers: int) -> list[dict[str, str]]:
    """Events/s appended in-process by `writers` threads (bench/engine.py's writers, each on
    its own process) over the loaded processes table, with 0013's indexes and with the
    indexes before it, interleaved run by run. Every event updates its process row
    (head, seq, state, updated_at): with an index on updated_at that update can no longer
    be HOT, so it writes an entry into each of the table's indexes."""
    # Imported here: only this section needs the engine bench's workflow and writers.
    from charter.core.ed25519 import SecretKey
    from charter.core.envelope import Envelope, sign
    from engine import deployed_engine, run_writers

    rates: dict[str, list[float]] = {"0013 indexes": [], "before 0013": []}
    with Database(url, max_size=writers + 4) as database:
        engine, key = deployed_engine(database)

        def submit(env: Envelope, signer: SecretKey) -> str:
            return engine.process_event(sign(env, signer)).hash

        for _ in range(runs):
            for side, ddl in (("before 0013", WITHOUT_INDEXES), ("0013 indexes", WITH_INDEXES)):
                with psycopg.connect(url, autocommit=True) as conn:
                    for statement in ddl:
                        conn.execute(statement)
                    conn.execute("VACUUM ANALYZE charter.processes")
                figures = run_writers(writers, seconds, key, submit)
                rates[side].append(float(figures["events/s"]))  # type: ignore[arg-type]
    before = statistics.median(rates["before 0013"])
    return [
        {
            "process indexes": side,
            "events/s": _spread(values, digits=0),
            "vs before 0013": f"{statistics.median(values) / before:.2f}x",
        }
        for side, values in rates.items()
    ]


# --- report -----------------------------------------------------------------------------


def summary(runs: Sequence[Sequence[float]]) -> dict[str, str]:
    """Median over runs of p50 and p99, with min-max across runs."""
    p50 = [percentiles(r, (50,))[50] for r in runs]
    p99 = [percentiles(r, (99,))[99] for r in runs]
    return {"p50 ms": _spread(p50), "p99 ms": _spread(p99)}


def _spread(values: Sequence[float], digits: int = 2) -> str:
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:.{digits}f}"
    return f"{middle:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(args: argparse.Namespace) -> None:
    with scratch_database("operator") as url:
        started = time.perf_counter()
        token = load(url, args.processes)
        print(f"loaded {args.processes:,} processes in {time.perf_counter() - started:.1f} s")
        api, process = start_api(url)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=api, headers=headers, timeout=60) as http:
                cases = list_cases(http, args.pages)
                samples: dict[str, list[list[float]]] = {name: [] for name in cases}
                for _ in range(args.runs):
                    for name, call in cases.items():
                        samples[name].append(time_calls(call, args.requests))
            rows = [{"GET /v1/processes": name, **summary(runs)} for name, runs in samples.items()]
            title = (
                f"GET /v1/processes over {args.processes:,} processes: {args.requests} requests"
                f" per case per run, {args.runs} run(s): median (min-max)"
            )
            print_results(title, rows, width=120)

            fan_rows = []
            for count in args.subscribers:
                each_runs, all_runs = [], []
                for _ in range(args.runs):
                    each, every = asyncio.run(fan_out(api, token, url, count, args.hints))
                    each_runs.append(each)
                    all_runs.append(every)
                fan_rows.append({"subscribers": str(count), "to": "each", **summary(each_runs)})
                fan_rows.append(
                    {"subscribers": str(count), "to": f"all {count}", **summary(all_runs)}
                )
            title = (
                f"GET /v1/stream fan-out: hint sent → parsed by subscribers, {args.hints} hints"
                f" per run, {args.runs} run(s): median (min-max)"
            )
            print_results(title, fan_rows, width=120)
        finally:
            process.terminate()
            process.join(timeout=30)
        if args.index_seconds > 0:
            rows = index_cost(url, args.runs, args.index_seconds, writers=4)
            title = (
                f"what 0013's indexes cost process_event: 4 writers, {args.index_seconds:g} s"
                f" per run, {args.runs} run(s) interleaved: median (min-max); higher is better,"
                " a ratio under 1 is the cost"
            )
            print_results(title, rows, width=120)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200, help="requests per case per run")
    parser.add_argument("--pages", type=int, default=20, help="how deep the cursor case goes")
    parser.add_argument("--hints", type=int, default=200, help="hints per fan-out run")
    parser.add_argument("--subscribers", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--index-seconds",
        type=float,
        default=4.0,
        help="per run of the index-cost section (0: skip)",
    )
    parser.add_argument("--quick", action="store_true", help="a smaller run, under a minute")
    parsed = parser.parse_args()
    if parsed.quick:
        parsed.processes, parsed.requests, parsed.hints = 50_000, 20, 20
        parsed.subscribers = [1, 20]
        parsed.index_seconds = 1.0
    main(parsed)
