"""Runs end to end: webhook admission rate (signed Standard Webhooks deliveries → run
rows over HTTP), claim-to-complete throughput of DPoP machines (1 and 4 machines, plans
of 3 in-process `test.echo` steps) and the latency from webhook admission to the first
step's start (p50/p99).

The API runs in its own process (uvicorn); the machines run in this one, each a
RunExecutor with its own MachineClient (a fresh DPoP proof per request: 8 requests per
3-step run). Run: python bench/runs.py [--seconds 3] [--runs 200]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import multiprocessing
import secrets
import socket
import time
import uuid
from multiprocessing.context import SpawnProcess

import httpx
import uvicorn
from psycopg.types.json import Jsonb

from charter.api.app import create_app
from charter.auth.tokens import create_token
from charter.automations.actions import ActionCall, ActionRegistry
from charter.automations.executor import ExecutorOptions, RunExecutor
from charter.automations.ledger import admit_run
from charter.automations.machine_client import MachineClient, register_machine
from charter.automations.webhooks import sign
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonValue
from charter.db.database import Database, Role, connect
from common import peak_rss_mib, percentiles, print_results, scratch_database

PRINCIPAL = "bench"
SECRET = "whsec_" + base64.b64encode(b"bench secret, thirty-two bytes!!").decode()
BODY = b'{"source": "shop", "type": "order.paid", "data": {"order": 42}}'
STEPS = [{"id": f"s{i}", "actionId": "test.echo", "input": {"n": i}} for i in (1, 2, 3)]
POLL = 0.02  # seconds between claims of an idle machine


async def echo(call: ActionCall) -> JsonValue:
    """The bench's only action host: returns its payload at once."""
    return {"echo": call.payload}


def setup_automation(url: str, target: str, *, webhook: bool) -> uuid.UUID:
    with connect(url) as conn:
        row = conn.execute(
            "INSERT INTO charter.automations (principal, target, name) "
            "VALUES (%s, %s, 'bench') RETURNING id",
            (PRINCIPAL, target),
        ).fetchone()
        assert row is not None
        automation_id = row[0]
        assert isinstance(automation_id, uuid.UUID)
        conn.execute(
            "INSERT INTO charter.plans (automation_id, version, steps) VALUES (%s, 1, %s)",
            (automation_id, Jsonb(STEPS)),
        )
        if webhook:
            conn.execute(
                "INSERT INTO charter.webhook_triggers (automation_id, source, secret) "
                "VALUES (%s, 'shop', %s)",
                (automation_id, SECRET),
            )
        conn.commit()
    return automation_id


def webhook_headers(target: str) -> dict[str, str]:
    message_id = f"msg_{uuid.uuid4().hex}"
    stamp = int(time.time())
    return {
        "X-Charter-Principal": PRINCIPAL,
        "X-Charter-Target": target,
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, message_id, stamp, BODY),
    }


def serve_api(database_url: str, port: int) -> None:
    """The API process."""
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
    for _ in range(400):
        try:
            if httpx.get(f"{api}/healthz").status_code == 200:
                return api, process
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("the API did not start")


def admission(api: str, target: str, seconds: float) -> dict[str, object]:
    """Signed webhook deliveries, one sender, back to back: each admits one run."""
    latencies: list[float] = []
    with httpx.Client(base_url=api, timeout=30) as client:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            before = time.perf_counter_ns()
            response = client.post("/events", content=BODY, headers=webhook_headers(target))
            latencies.append((time.perf_counter_ns() - before) / 1e6)
            assert response.status_code == 202, response.text
    points = percentiles(latencies, (50, 99))
    return {
        "what": "webhook → run row (POST /events)",
        "machines": "-",
        "per second": len(latencies) / seconds,
        "p50 ms": points[50],
        "p99 ms": points[99],
        "note": f"{len(latencies)} deliveries, 1 sender",
    }


def register(api: str, token: str, target: str, count: int) -> list[SecretKey]:
    keys = [SecretKey.generate() for _ in range(count)]
    for key in keys:
        register_machine(api, token, key, target=target)
    return keys


async def machines_until(api: str, keys: list[SecretKey], done: asyncio.Event) -> None:
    """Run one executor per key until `done` is set."""
    clients = [MachineClient(api, key) for key in keys]
    registry = ActionRegistry({"test.echo": echo})
    executors = [RunExecutor(c, registry, ExecutorOptions(heartbeat=10.0)) for c in clients]
    try:
        await asyncio.gather(*(e.run(done, poll=POLL, max_poll=POLL) for e in executors))
    finally:
        for client in clients:
            await client.aclose()


def count_completed(url: str, automation_id: uuid.UUID) -> int:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM charter.runs WHERE automation_id = %s AND status = 'completed'",
            (automation_id,),
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


async def throughput(url: str, api: str, token: str, machines: int, runs: int) -> dict[str, object]:
    """`runs` pending runs of 3 steps, executed by `machines` machines from claim to
    complete; the clock stops when the last run is completed."""
    target = f"tp-{machines}-{secrets.token_hex(3)}"
    automation_id = setup_automation(url, target, webhook=False)
    with connect(url) as conn:
        conn.execute("SET ROLE " + Role.ENGINE.value)
        for _ in range(runs):
            admit_run(conn, automation_id=automation_id, trigger_kind="manual")
        conn.commit()
    keys = register(api, token, target, machines)
    done = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(machines_until(api, keys, done))
    while count_completed(url, automation_id) < runs:
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    done.set()
    await task
    return {
        "what": "claim → 3 steps → complete",
        "machines": machines,
        "per second": runs / elapsed,
        "p50 ms": "-",
        "p99 ms": "-",
        "note": f"{runs} runs in {elapsed:.1f} s; {3 * runs / elapsed:,.0f} steps/s",
    }


async def first_step_latency(
    url: str, api: str, token: str, machines: int, seconds: float
) -> dict[str, object]:
    """Webhooks at ~4/s (below the machines' capacity: no queue builds) while
    `machines` idle machines poll every POLL s; the latency is the first step's
    journalled start minus the run's admission (both by the database clock)."""
    target = f"lat-{machines}-{secrets.token_hex(3)}"
    automation_id = setup_automation(url, target, webhook=True)
    keys = register(api, token, target, machines)
    done = asyncio.Event()
    task = asyncio.create_task(machines_until(api, keys, done))
    sent = 0
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            response = await client.post("/events", content=BODY, headers=webhook_headers(target))
            assert response.status_code == 202, response.text
            sent += 1
            await asyncio.sleep(0.25)
    while count_completed(url, automation_id) < sent:
        await asyncio.sleep(0.05)
    done.set()
    await task
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM s.started_at - r.created_at) * 1000 "
            "FROM charter.runs r JOIN charter.run_steps s ON s.run_id = r.id "
            "WHERE r.automation_id = %s AND s.position = 0",
            (automation_id,),
        ).fetchall()
    latencies = [float(str(r[0])) for r in rows]
    points = percentiles(latencies, (50, 99))
    return {
        "what": "webhook admitted → first step start",
        "machines": machines,
        "per second": sent / seconds,
        "p50 ms": points[50],
        "p99 ms": points[99],
        "note": f"{len(latencies)} runs; idle machines poll every {POLL * 1000:.0f} ms",
    }


def bench(url: str, seconds: float, runs: int) -> None:
    with connect(url, Role.ENGINE) as conn:
        token = create_token(conn, scopes=["automations:write"], name="bench", principal=PRINCIPAL)
        conn.commit()
    api, process = start_api(url)
    rows: list[dict[str, object]] = []
    try:
        admission_target = f"adm-{secrets.token_hex(3)}"
        setup_automation(url, admission_target, webhook=True)
        rows.append(admission(api, admission_target, seconds))
        for machines in (1, 4):
            rows.append(asyncio.run(throughput(url, api, token, machines, runs)))
        for machines in (1, 4):
            rows.append(asyncio.run(first_step_latency(url, api, token, machines, 2 * seconds)))
    finally:
        process.terminate()
        process.join(timeout=30)
    print_results("Runs: admission, machines, first-step latency", rows)
    print(f"peak RSS of the machines' process: {peak_rss_mib():.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with scratch_database("runs") as url:
        bench(url, args.seconds, args.runs)


if __name__ == "__main__":
    main()
