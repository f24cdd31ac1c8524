"""process_event throughput and latency, in-process and over HTTP, with 1, 4 and 16
concurrent writers on distinct processes; verification rate next to this CPU's raw
Ed25519 verify rate, measured in the same run.

Run: python bench/engine.py [--seconds 4] [--verify-events 2000]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server at
127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import uvicorn
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from charter.api.app import create_app
from charter.audit.verify_stored import verify_process
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.engine import actors
from charter.engine.process_event import Engine
from common import measure, peak_rss_mib, percentiles, print_results, scratch_database

WORKFLOW = "bench/counter"
DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open"],
    "roles": ["user"],
    "actions": {
        "open": {"type": "create", "role": "user", "to": "open"},
        "bump": {
            "type": "update",
            "role": "user",
            "from": "*",
            "input": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "mutate": {"$inc": {"count": 1}, "$set": {"last": "{{ input.n }}"}},
        },
    },
}

Submit = Callable[[Envelope, SecretKey], str]


def envelope(key: SecretKey, process: str, action: str, prev: str | None, n: int) -> Envelope:
    return Envelope(
        v=1,
        process=process,
        workflow=WORKFLOW,
        action=action,
        input={"n": n} if action == "bump" else {},
        prev=prev,
        actor=key.public_key_hex,
        at=format_rfc3339(datetime.now(UTC)),
    )


def deployed_engine(database: Database) -> tuple[Engine, SecretKey]:
    """An engine with the bench workflow deployed and a `bench` user actor: its key."""
    engine = Engine(database)
    key = SecretKey.generate()
    with database.connection(Role.ENGINE) as conn:
        engine.registry.deploy(conn, WORKFLOW, DEFINITION)
        actors.add_actor(conn, "bench", key.public_key_hex, ["user"])
        conn.commit()
    return engine, key


def run_writers(writers: int, seconds: float, key: SecretKey, submit: Submit) -> dict[str, object]:
    """`writers` threads, each appending to its own process for `seconds`."""
    latencies: list[list[float]] = [[] for _ in range(writers)]
    barrier = threading.Barrier(writers + 1)
    deadline = [0.0]

    def writer(index: int) -> None:
        process = f"bench-{secrets.token_hex(6)}"
        head = submit(envelope(key, process, "open", None, 0), key)
        barrier.wait()
        n = 0
        while time.perf_counter() < deadline[0]:
            n += 1
            started = time.perf_counter()
            head = submit(envelope(key, process, "bump", head, n), key)
            latencies[index].append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    deadline[0] = time.perf_counter() + seconds
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    samples = [s for per in latencies for s in per]
    points = percentiles(samples, (50, 99))
    return {
        "events": len(samples),
        "events/s": len(samples) / elapsed,
        "p50 ms": points[50],
        "p99 ms": points[99],
    }


def serve(database: Database, engine: Engine) -> tuple[str, uvicorn.Server]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_app(database, engine=engine, settings=Settings(database_url="bench"))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--verify-events", type=int, default=2000)
    args = parser.parse_args()
    with scratch_database("engine") as url:
        bench(url, args.seconds, args.verify_events)


def bench(url: str, seconds: float, verify_events: int) -> None:
    rows: list[dict[str, object]] = []
    with Database(url, max_size=20) as database:
        engine, key = deployed_engine(database)

        def in_process(env: Envelope, signer: SecretKey) -> str:
            return engine.process_event(sign(env, signer)).hash

        for writers in (1, 4, 16):
            rows.append({"path": f"in-process, {writers} writer(s)",
                         **run_writers(writers, seconds, key, in_process)})  # fmt: skip

        api, server = serve(database, engine)
        local = threading.local()

        def over_http(env: Envelope, signer: SecretKey) -> str:
            client: httpx.Client | None = getattr(local, "client", None)
            if client is None:
                client = local.client = httpx.Client(base_url=api, timeout=30)
            body = sign(env, signer).to_json()
            response = client.post("/v1/events", json=body)
            response.raise_for_status()
            return str(response.json()["hash"])

        for writers in (1, 4, 16):
            rows.append({"path": f"HTTP, {writers} writer(s)",
                         **run_writers(writers, seconds, key, over_http)})  # fmt: skip
        server.should_exit = True
        print_results("process_event: signed events appended", rows)

        process = f"bench-verify-{secrets.token_hex(4)}"
        head = in_process(envelope(key, process, "open", None, 0), key)
        for n in range(1, verify_events):
            head = in_process(envelope(key, process, "bump", head, n), key)
        started = time.perf_counter()
        report = verify_process(database, process)
        elapsed = time.perf_counter() - started
        assert report.ok, report.to_json()
        raw_key = Ed25519PrivateKey.generate()
        public = raw_key.public_key()
        message = envelope(key, process, "bump", head, 1).message()
        signature = raw_key.sign(message)
        raw = measure(lambda: public.verify(signature, message), seconds=1.5)
        print_results(
            "verification",
            [
                {"what": f"verify_process ({verify_events} events)", "per second":
                    verify_events / elapsed, "total s": elapsed},
                {"what": "raw Ed25519 verify (cryptography)", "per second": raw.per_second,
                 "total s": raw.seconds},
            ],
        )  # fmt: skip
        print(f"peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
