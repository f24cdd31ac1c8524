"""Machines without polling: (a) runs/s of one machine executing 3-step runs from a
backlog (one run at a time, and `--slots` at a time) and (b) the latency from webhook
admission to the first step's start while the machine is idle, long-polling (and, for
comparison, polling every 20 ms as before).

The API runs in its own process (uvicorn, one LISTEN connection for waiting claims);
the machine runs in this one: a RunExecutor with a MachineClient (a fresh DPoP proof per
request) and one in-process `test.echo` action host, so the figures are the protocol's
own cost. Per 3-step run the machine sends 3 requests (complete + start next twice,
complete the last step with the run, which also claims the next run and starts its
first step; the first claim of all starts one too).

(a) `--backlog` runs are admitted before the machine starts; the clock runs from its
start to the last run's completion. (b) Webhooks are sent one at a time, each once the
previous run completed and a pause of 20 to 40 ms (random, so a polling machine's phase
does not line up) let the machine go idle; the latency is the first step's journalled
start minus the run's admission, both by the database clock (each its transaction's
start). Each measure is taken `--repeats` times, interleaved, and printed as the median
with the lowest and highest. Lower latency and more runs/s are better.

Run: python bench/runs.py [--repeats 5] [--backlog 500] [--webhooks 200] [--slots 8]
     python bench/runs.py --quick   (3 repeats of a backlog of 40 and 15 webhooks)
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import multiprocessing
import random
import secrets
import socket
import statistics
import time
import uuid
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from typing import Any, TypeVar

import httpx
import uvicorn
from psycopg.types.json import Jsonb

from charter.api.app import create_app
from charter.auth.tokens import create_token
from charter.automations.ledger import admit_run
from charter.automations.webhooks import sign
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.jsontypes import JsonValue
from charter.db.database import Database, Role, connect
from charter.machine.actions import ActionCall
from charter.machine.client import ClaimedRun, MachineClient, register_machine
from charter.machine.executor import ExecutorOptions, RunExecutor
from charter.machine.registry import ActionRegistry
from charter.sdk.protocol import Call
from common import percentiles, print_results, scratch_database

T = TypeVar("T")

PRINCIPAL = "bench"
SECRET = "whsec_" + base64.b64encode(b"bench secret, thirty-two bytes!!").decode()
BODY = b'{"source": "shop", "type": "order.paid", "data": {"order": 42}}'
STEPS = [{"id": f"s{i}", "actionId": "test.echo", "input": {"n": i}} for i in (1, 2, 3)]
LONG_POLL = 20.0  # seconds a claim waits (the machine client's default)
POLL = 0.02  # seconds between the claims of a polling machine


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


class CountingClient(MachineClient):
    """A MachineClient that counts its requests and signals each completed run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests = 0
        self.completed = 0
        self.finished = asyncio.Event()  # set after each completion

    async def _send(self, call: Call[T], *, extra: float = 0.0) -> T:
        self.requests += 1
        return await super()._send(call, extra=extra)

    async def finish(self, *args: Any, **kwargs: Any) -> ClaimedRun | None:
        handed = await super().finish(*args, **kwargs)
        self.completed += 1
        self.finished.set()
        return handed


@dataclass
class Machine:
    client: CountingClient
    stop: asyncio.Event
    task: asyncio.Task[int]

    async def close(self) -> None:
        self.stop.set()
        await self.task
        await self.client.aclose()


def start_machine(api: str, token: str, target: str, *, wait: float, slots: int = 1) -> Machine:
    key = SecretKey.generate()
    register_machine(api, token, key, target=target)
    client = CountingClient(api, key, wait=wait)
    executor = RunExecutor(
        client, ActionRegistry({"test.echo": echo}), ExecutorOptions(heartbeat=10.0)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(executor.run(stop, poll=POLL, max_poll=1.0, slots=slots))
    return Machine(client, stop, task)


async def throughput(url: str, api: str, token: str, backlog: int, slots: int) -> dict[str, float]:
    """(a) One machine works off a backlog of 3-step runs, `slots` runs at a time."""
    target = f"tp-{secrets.token_hex(4)}"
    automation_id = setup_automation(url, target, webhook=False)
    with connect(url) as conn:
        conn.execute("SET ROLE " + Role.ENGINE.value)
        for _ in range(backlog):
            admit_run(conn, automation_id=automation_id, trigger_kind="manual")
        conn.commit()
    started = time.perf_counter()
    machine = start_machine(api, token, target, wait=LONG_POLL, slots=slots)
    while machine.client.completed < backlog:
        machine.client.finished.clear()
        await machine.client.finished.wait()
    elapsed = time.perf_counter() - started
    requests = machine.client.requests
    await machine.close()
    return {"runs/s": backlog / elapsed, "requests/run": requests / backlog}


async def first_step_latency(
    url: str, api: str, token: str, webhooks: int, *, wait: float
) -> dict[str, float]:
    """(b) One idle machine (long-polling with `wait`, else polling every POLL s);
    webhooks one at a time, each once the machine finished the previous run."""
    target = f"lat-{secrets.token_hex(4)}"
    automation_id = setup_automation(url, target, webhook=True)
    machine = start_machine(api, token, target, wait=wait)
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        for sent in range(1, webhooks + 1):
            await asyncio.sleep(random.uniform(0.02, 0.04))  # the machine goes idle
            response = await client.post("/events", content=BODY, headers=webhook_headers(target))
            assert response.status_code == 202, response.text
            while machine.client.completed < sent:
                machine.client.finished.clear()
                await machine.client.finished.wait()
    await machine.close()
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM s.started_at - r.created_at) * 1000 "
            "FROM charter.runs r JOIN charter.run_steps s ON s.run_id = r.id "
            "WHERE r.automation_id = %s AND s.position = 0",
            (automation_id,),
        ).fetchall()
    points = percentiles([float(str(r[0])) for r in rows], (50, 99))
    return {"p50 ms": points[50], "p99 ms": points[99]}


def spread(values: list[float]) -> str:
    """The median, with the lowest and highest when there are several."""
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:,.1f}"
    return f"{middle:,.1f} ({min(values):,.1f} to {max(values):,.1f})"


async def measure(url: str, api: str, token: str, args: argparse.Namespace) -> None:
    samples: dict[str, list[dict[str, float]]] = {"tp": [], "slots": [], "long": [], "poll": []}
    for _ in range(args.repeats):  # interleaved: drift on a shared machine hits each alike
        samples["tp"].append(await throughput(url, api, token, args.backlog, 1))
        samples["slots"].append(await throughput(url, api, token, args.backlog, args.slots))
        samples["long"].append(
            await first_step_latency(url, api, token, args.webhooks, wait=LONG_POLL)
        )
        samples["poll"].append(await first_step_latency(url, api, token, args.webhooks, wait=0))

    def column(kind: str, key: str) -> str:
        return spread([sample[key] for sample in samples[kind]])

    rows: list[dict[str, object]] = [
        {
            "measure": f"runs/s, 1 machine, {slots} at a time, 3-step plan, "
            f"backlog of {args.backlog}",
            "median (min to max)": column(kind, "runs/s"),
            "note": f"{column(kind, 'requests/run')} requests per run; higher is better",
        }
        for kind, slots in (("tp", 1), ("slots", args.slots))
    ]
    for kind, how in (("long", "long-polls"), ("poll", f"polls every {POLL * 1000:.0f} ms")):
        for point in ("p50 ms", "p99 ms"):
            rows.append(
                {
                    "measure": f"webhook → first step start {point}, idle machine {how}",
                    "median (min to max)": column(kind, point),
                    "note": f"{args.webhooks} webhooks per repeat; lower is better",
                }
            )
    print_results(f"Machine runs: {args.repeats} repeats, interleaved", rows, width=140)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backlog", type=int, default=500)
    parser.add_argument("--webhooks", type=int, default=200)
    parser.add_argument("--slots", type=int, default=8, help="runs at a time, second row")
    parser.add_argument("--quick", action="store_true", help="3 repeats of small sizes")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.backlog, args.webhooks = 3, 40, 15
    if min(args.repeats, args.backlog, args.webhooks, args.slots) < 1:
        parser.error("--repeats, --backlog, --webhooks and --slots must be positive")
    logging.basicConfig(level=logging.ERROR)
    with scratch_database("runs") as url:
        with connect(url, Role.ENGINE) as conn:
            token = create_token(
                conn, scopes=["automations:write"], name="bench", principal=PRINCIPAL
            )
            conn.commit()
        api, process = start_api(url)
        try:
            asyncio.run(measure(url, api, token, args))
        finally:
            process.terminate()
            process.join(timeout=30)


if __name__ == "__main__":
    main()
