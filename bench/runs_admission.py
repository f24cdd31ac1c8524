"""Admission rates: signed webhook → pending run row (in-process and over HTTP with 1 and
4 concurrent senders, with p50/p99 latency), and cron catch-up (runs admitted per second
by fire_due_crons ticks of 1000).

Run: python bench/runs_admission.py [--seconds 4]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import base64
import socket
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import uvicorn
from psycopg.types.json import Jsonb

from charter.api.app import create_app
from charter.automations.admission import fire_due_crons, receive_event
from charter.automations.webhooks import sign
from charter.core.config import Settings
from charter.db.database import Database, Role, connect
from common import percentiles, print_results, scratch_database

PRINCIPAL = "bench"
TARGET = "machine-1"
SECRET = "whsec_" + base64.b64encode(b"bench secret, thirty-two bytes!!").decode()
BODY = b'{"source": "shop", "type": "order.paid", "data": {"order": 42}}'
STEPS = [{"id": "ping", "actionId": "http.request", "input": {"url": "https://e.test"}}]


def setup_automation(url: str) -> uuid.UUID:
    """One automation with a plan and a webhook trigger for source `shop`."""
    with connect(url) as conn:
        row = conn.execute(
            "INSERT INTO charter.automations (principal, target, name) "
            "VALUES (%s, %s, 'bench') RETURNING id",
            (PRINCIPAL, TARGET),
        ).fetchone()
        assert row is not None
        automation_id = row[0]
        assert isinstance(automation_id, uuid.UUID)
        conn.execute(
            "INSERT INTO charter.plans (automation_id, version, steps) VALUES (%s, 1, %s)",
            (automation_id, Jsonb(STEPS)),
        )
        conn.execute(
            "INSERT INTO charter.webhook_triggers (automation_id, source, secret) "
            "VALUES (%s, 'shop', %s)",
            (automation_id, SECRET),
        )
        conn.commit()
    return automation_id


def headers(message_id: str) -> dict[str, str]:
    stamp = int(time.time())
    return {
        "X-Charter-Principal": PRINCIPAL,
        "X-Charter-Target": TARGET,
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, message_id, stamp, BODY),
    }


def in_process(database: Database, seconds: float) -> dict[str, object]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    with database.connection(Role.ENGINE) as conn:
        while time.perf_counter() < deadline:
            before = time.perf_counter_ns()
            runs = receive_event(
                conn,
                principal=PRINCIPAL,
                target=TARGET,
                headers=headers(f"msg_{uuid.uuid4().hex}"),
                raw_body=BODY,
                now=datetime.now(UTC),
            )
            conn.commit()
            latencies.append((time.perf_counter_ns() - before) / 1e6)
            assert len(runs) == 1
    return row("receive_event, in-process", 1, seconds, latencies)


def over_http(url: str, senders: int, seconds: float) -> dict[str, object]:
    latencies: list[list[float]] = [[] for _ in range(senders)]
    deadline = time.perf_counter() + seconds

    def sender(index: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            while time.perf_counter() < deadline:
                before = time.perf_counter_ns()
                response = client.post(
                    "/events", content=BODY, headers=headers(f"msg_{uuid.uuid4().hex}")
                )
                latencies[index].append((time.perf_counter_ns() - before) / 1e6)
                assert response.status_code == 202, response.text

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return row("POST /events over HTTP", senders, seconds, [x for xs in latencies for x in xs])


def cron_catch_up(url: str, database: Database, triggers: int, behind: int) -> dict[str, object]:
    """`triggers` minutely schedules each `behind` occurrences late, caught up in ticks."""
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=behind)
    automation_id = setup_automation(url)
    with connect(url) as conn:
        for _ in range(triggers):
            conn.execute(
                "INSERT INTO charter.schedule_triggers (automation_id, cron, timezone, "
                "next_run_at) VALUES (%s, '* * * * *', 'Europe/Berlin', %s)",
                (automation_id, start),
            )
        conn.commit()
    now = start + timedelta(minutes=behind - 1)
    admitted, ticks = 0, []
    while True:
        before = time.perf_counter_ns()
        with database.connection(Role.ENGINE) as conn:
            count = len(fire_due_crons(conn, now, maximum_runs=1000))
        ticks.append((time.perf_counter_ns() - before) / 1e6)
        if count == 0:
            break
        admitted += count
    assert admitted == triggers * behind
    total = sum(ticks) / 1000
    return {
        "what": f"fire_due_crons, {triggers} triggers x {behind} behind",
        "concurrency": 1,
        "runs/s": admitted / total,
        "p50 ms": percentiles(ticks[:-1], (50,))[50],
        "p99 ms": percentiles(ticks[:-1], (99,))[99],
        "note": f"{len(ticks) - 1} ticks of <= 1000",
    }


def row(what: str, concurrency: int, seconds: float, latencies: list[float]) -> dict[str, object]:
    points = percentiles(latencies, (50, 99))
    return {
        "what": what,
        "concurrency": concurrency,
        "runs/s": len(latencies) / seconds,
        "p50 ms": points[50],
        "p99 ms": points[99],
        "note": f"{len(latencies)} deliveries, one run each",
    }


def serve(database: Database) -> tuple[str, uvicorn.Server]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_app(database, settings=Settings(database_url="bench"))
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", access_log=False))
    threading.Thread(target=server.run, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return url, server
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("the API did not start")


def bench(url: str, seconds: float) -> None:
    setup_automation(url)
    rows: list[dict[str, object]] = []
    with Database(url, max_size=20) as database:
        rows.append(in_process(database, seconds))
        api, server = serve(database)
        try:
            for senders in (1, 4):
                rows.append(over_http(api, senders, seconds))
        finally:
            server.should_exit = True
        rows.append(cron_catch_up(url, database, triggers=100, behind=100))
    print_results("Run admission", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    with scratch_database("admission") as url:
        bench(url, args.seconds)


if __name__ == "__main__":
    main()
