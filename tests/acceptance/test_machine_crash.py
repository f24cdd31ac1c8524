"""`charter machine run` killed -9 between "action returned" and "output journalled",
then restarted: it resumes at the same step with the same idempotency key.

Real processes: `charter up` (API, database migrations), `charter machine register`,
`charter machine run` twice, and a tiny HTTP server that records every request the
`http.request` action host sends it.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb

from charter.automations.journal import idempotency_key
from charter.automations.ledger import admit_run
from charter.core.crashpoints import ENVIRONMENT_VARIABLE, STEP_RETURNED_BEFORE_JOURNAL
from charter.db.database import Role, connect
from tests.acceptance.processes import (
    charter_env,
    free_port,
    run_charter,
    start_charter,
    wait_healthy,
)

TARGET = "crash-box"
MACHINE = "crash-m1"


class Recorder:
    """A local HTTP server that answers 200 and records (path, Idempotency-Key)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []
        lock = threading.Lock()
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                with lock:
                    recorded.append((self.path, self.headers.get("Idempotency-Key")))
                body = json.dumps({"seen": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


@pytest.fixture
def charter_home() -> Iterator[Path]:
    home = Path(f"/tmp/charter-machine-{time.monotonic_ns() % 10**9}")
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _wait_for(
    condition_sql: str, url: str, params: tuple[object, ...], timeout: float = 60
) -> None:
    """Poll the database until a condition holds (a bounded wait, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connect(url) as conn:
            row = conn.execute(condition_sql, params).fetchone()
        if row is not None and row[0]:
            return
        time.sleep(0.1)
    raise AssertionError(f"not true within {timeout} s: {condition_sql}")


@pytest.mark.slow
def test_a_machine_killed_before_journalling_resumes_with_the_same_key(
    empty_database_url: str, recorder: Recorder, charter_home: Path
) -> None:
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"
    env = charter_env(
        CHARTER_DATABASE_URL=empty_database_url,
        CHARTER_HOME=str(charter_home),
        CHARTER_API_URL=api_url,
    )
    server = start_charter("up", "--port", str(port), env=env)
    try:
        wait_healthy(api_url, server)
        token = (charter_home / "admin-token").read_text().strip()
        machine_env = {**env, "CHARTER_TOKEN": token}
        registered = run_charter(
            "machine", "register", "--target", TARGET, "--id", MACHINE, env=machine_env
        )
        assert registered.returncode == 0, registered.stderr
        key_file = charter_home / "machines" / f"{MACHINE}.key"
        assert key_file.stat().st_mode & 0o777 == 0o600

        steps = [
            {
                "id": step,
                "actionId": "http.request",
                "input": {"method": "POST", "url": f"{recorder.url}/{step}", "json": {}},
            }
            for step in ("one", "two", "three")
        ]
        with connect(empty_database_url) as conn:
            row = conn.execute(
                "INSERT INTO charter.automations (principal, target, name) "
                "VALUES ('admin', %s, 'crash') RETURNING id",
                (TARGET,),
            ).fetchone()
            assert row is not None
            conn.execute(
                "INSERT INTO charter.plans (automation_id, version, steps) VALUES (%s, 1, %s)",
                (row[0], Jsonb(steps)),
            )
            conn.execute("SET ROLE " + Role.ENGINE.value)
            automation_id = row[0]
            assert isinstance(automation_id, uuid.UUID)
            run = admit_run(conn, automation_id=automation_id, trigger_kind="manual")
            conn.commit()
        assert run is not None

        machine_args = (
            "machine", "run", "--id", MACHINE, "--once",
            "--heartbeat", "0.2", "--lease-seconds", "2",
        )  # fmt: skip
        crash_env = {**machine_env, ENVIRONMENT_VARIABLE: STEP_RETURNED_BEFORE_JOURNAL}
        crashed = run_charter(*machine_args, env=crash_env)
        assert crashed.returncode == -signal.SIGKILL, (crashed.stdout, crashed.stderr)
        # The action ran; its output never reached the journal.
        assert [path for path, _ in recorder.requests] == ["/one"]
        with connect(empty_database_url) as conn:
            journal = conn.execute(
                "SELECT step_id, status, attempts FROM charter.run_steps WHERE run_id = %s",
                (run.id,),
            ).fetchall()
        assert journal == [("one", "running", 1)]

        # The dead machine's lease lapses; the restarted machine takes the run over.
        _wait_for(
            "SELECT lease_expires_at < now() FROM charter.runs WHERE id = %s",
            empty_database_url,
            (run.id,),
        )
        resumed = run_charter(*machine_args, env=machine_env)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)

    key_one = idempotency_key(run.id, "one")
    assert recorder.requests == [
        ("/one", key_one),
        ("/one", key_one),  # the same step again, with the same key
        ("/two", idempotency_key(run.id, "two")),
        ("/three", idempotency_key(run.id, "three")),
    ]
    with connect(empty_database_url) as conn:
        status = conn.execute(
            "SELECT status, attempts FROM charter.runs WHERE id = %s", (run.id,)
        ).fetchone()
        journal = conn.execute(
            "SELECT step_id, status, attempts FROM charter.run_steps WHERE run_id = %s "
            "ORDER BY position",
            (run.id,),
        ).fetchall()
    assert status == ("completed", 2)
    assert journal == [("one", "completed", 2), ("two", "completed", 1), ("three", "completed", 1)]
