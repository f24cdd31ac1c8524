"""`charter serve` and `charter worker` as separate real processes (docs/operations.md): the API
alone accepts a signed event and leaves its automatic action pending; a worker process
beside it fires that action. `serve` refuses a database that is not migrated."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime

import httpx
import psutil

from charter.auth.tokens import create_token
from charter.core.envelope import Envelope, sign
from charter.core.timefmt import format_rfc3339
from charter.db.database import Role, connect
from tests.acceptance.automation_world import AUTOMATIC, Keys, setup_world, worker_env
from tests.acceptance.processes import (
    charter_env,
    free_port,
    run_charter,
    start_charter,
    wait_healthy,
)


def test_serve_refuses_a_database_that_is_not_migrated(empty_database_url: str) -> None:
    result = run_charter(
        "serve",
        "--port",
        str(free_port()),
        env=charter_env(CHARTER_DATABASE_URL=empty_database_url),
    )
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: the database lacks ")
    assert "0001_roles_and_schema" in lines[0]
    assert lines[0].endswith("run `charter db migrate` first")
    with connect(empty_database_url) as conn:  # and it did not migrate behind our back
        row = conn.execute("SELECT to_regclass('charter.events') IS NULL").fetchone()
    assert row == (True,)


def _queue_status(url: str, process_id: str) -> list[str]:
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT status FROM charter.automation_queue WHERE process_id = %s", (process_id,)
        ).fetchall()
    return [str(row[0]) for row in rows]


def _open(api: str, keys: Keys, process_id: str) -> httpx.Response:
    envelope = Envelope(
        v=1,
        process=process_id,
        workflow=AUTOMATIC,
        action="open",
        input={},
        prev=None,
        actor=keys.customer.public_key_hex,
        at=format_rfc3339(datetime.now(UTC)),
    )
    body = json.dumps(sign(envelope, keys.customer).to_json())
    return httpx.post(f"{api}/v1/events", content=body, timeout=30)


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=60)


def test_serve_is_the_api_alone_and_a_separate_worker_fires_the_work(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    migrated = run_charter("db", "migrate", env=charter_env(CHARTER_DATABASE_URL=url))
    assert migrated.returncode == 0, migrated.stderr
    keys = setup_world(url)
    with connect(url, role=Role.ENGINE) as conn:
        token = create_token(conn, scopes=["processes:read"], name="serve test")
        conn.commit()

    port = free_port()
    api = f"http://127.0.0.1:{port}"
    server = start_charter(
        "serve", "--port", str(port), "--log-format", "json",
        env=charter_env(CHARTER_DATABASE_URL=url),
    )  # fmt: skip
    metrics_port = free_port()
    worker: subprocess.Popen[str] | None = None
    try:
        health = wait_healthy(api, server).json()
        assert health["ok"] is True

        accepted = _open(api, keys, "serve-1")
        assert accepted.status_code == 201, accepted.text
        # The event queued its automatic action; with no worker in `serve`, it waits.
        time.sleep(3)
        assert _queue_status(url, "serve-1") == ["pending"]

        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "charter",
                "worker",
                "--concurrency",
                "2",
                "--cron-interval",
                "0.5",
                "--metrics-port",
                str(metrics_port),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=worker_env(url, keys, CHARTER_LEASE_SECONDS="30"),
        )
        deadline = time.monotonic() + 60
        while _queue_status(url, "serve-1") != ["completed"]:
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker did not fire the automatic action"
            time.sleep(0.2)
        events = httpx.get(
            f"{api}/v1/processes/serve-1/events",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert [e["envelope"]["action"] for e in events.json()["items"]] == ["open", "touch"]
        assert events.json()["items"][1]["envelope"]["actor"] == keys.automation.public_key_hex
        scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).text
        assert 'charter_automation_fires_total{kind="auto_action",outcome="accepted"} 1.0' in (
            scraped
        )
    finally:
        if worker is not None:
            _, worker_err = _stop(worker)
        out, err = _stop(server)
    assert server.returncode == 0, err
    assert "no worker, no cron admission" in out
    assert "stopped cleanly" in out
    assert worker is not None
    assert worker.returncode == 0, worker_err
    assert (
        "started (lease 30 s, 2 at once, cron admission every 0.5 s, metrics at "
        f"http://127.0.0.1:{metrics_port}/metrics)"
    ) in worker_err
    assert "fired 1" in worker_err
    # The API's log: JSON lines, one access line per request, by route template.
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert logged, err
    access = [line for line in logged if line["logger"] == "charter.access"]
    assert {"route": "/v1/events", "status": 201} in [
        {"route": line["route"], "status": line["status"]} for line in access
    ]
    assert all(line["request_id"] for line in access)


def test_worker_options_are_checked_as_usage_errors() -> None:
    result = run_charter("worker", "--lease-seconds", "1", env=charter_env())
    assert result.returncode == 2
    assert "Invalid value for '--lease-seconds'" in result.stderr
    result = run_charter("up", "--concurrency", "0", env=charter_env())
    assert result.returncode == 2
    assert "Invalid value for '--concurrency'" in result.stderr
    result = run_charter("worker", env=charter_env(CHARTER_WORKER_CONCURRENCY="many"))
    assert result.returncode == 2
    assert "CHARTER_WORKER_CONCURRENCY" in result.stderr or "--concurrency" in result.stderr


def _api_children(server: subprocess.Popen[str]) -> list[psutil.Process]:
    """The spawned API processes of `charter serve --workers` (not multiprocessing's
    resource tracker)."""
    children = psutil.Process(server.pid).children()
    return [c for c in children if "spawn_main" in " ".join(c.cmdline())]


def _migrated_world(url: str) -> Keys:
    migrated = run_charter("db", "migrate", env=charter_env(CHARTER_DATABASE_URL=url))
    assert migrated.returncode == 0, migrated.stderr
    return setup_world(url)


def test_serve_with_workers_shares_the_port_and_stops_every_process_cleanly(
    empty_database_url: str,
) -> None:
    keys = _migrated_world(empty_database_url)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = charter_env(CHARTER_DATABASE_URL=empty_database_url)
    server = start_charter("serve", "--port", str(port), "--workers", "2", env=env)
    try:
        wait_healthy(api, server)
        children = _api_children(server)
        assert len(children) == 2
        # Each request on a new connection: the kernel spreads them over both processes.
        for n in range(6):
            accepted = _open(api, keys, f"workers-{n}")
            assert accepted.status_code == 201, accepted.text
    finally:
        out, err = _stop(server)
    assert server.returncode == 0, err
    assert "2 processes" in out
    assert "stopped cleanly" in out
    assert not any(child.is_running() for child in children)


def test_serve_with_workers_stops_when_one_process_dies(empty_database_url: str) -> None:
    _migrated_world(empty_database_url)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = charter_env(CHARTER_DATABASE_URL=empty_database_url)
    server = start_charter("serve", "--port", str(port), "--workers", "2", env=env)
    try:
        wait_healthy(api, server)
        doomed, survivor = _api_children(server)
        doomed.kill()
        out, err = server.communicate(timeout=120)
    finally:
        if server.poll() is None:
            _stop(server)
    assert server.returncode == 1, (out, err)
    assert "error: an API process stopped unexpectedly" in err
    assert not survivor.is_running()


def test_serve_workers_must_be_at_least_one() -> None:
    result = run_charter("serve", "--workers", "0", env=charter_env())
    assert result.returncode == 2
    assert "Invalid value for '--workers'" in result.stderr
