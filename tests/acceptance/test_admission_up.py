"""`charter up` admits runs as a real process: its cron tick fires a due schedule, and
`POST /events` admits a signed webhook delivery; both runs wait pending in the ledger."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import httpx

from charter.automations.webhooks import sign
from charter.db.database import connect
from tests.acceptance.processes import charter_env, free_port, start_charter, wait_healthy
from tests.integration.triggerkit import (
    automation,
    new_principal,
    new_secret,
    run_count,
    schedule,
    webhook,
)


def test_up_runs_the_cron_tick_and_serves_webhooks(empty_database_url: str) -> None:
    port = free_port()
    process = start_charter(
        "up",
        "--port",
        str(port),
        "--cron-interval",
        "0.2",
        env=charter_env(CHARTER_DATABASE_URL=empty_database_url),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)  # migrations are applied once it answers
        principal, secret = new_principal(), new_secret()
        now = datetime.now(UTC)
        with connect(empty_database_url) as conn:
            schedule(
                conn,
                automation(conn, principal),
                cron="* * * * *",
                next_run_at=now - timedelta(seconds=30),
                remaining=1,
            )
            webhook(conn, automation(conn, principal), source="shop", secret=secret)
            conn.commit()

        # The tick runs on its own: wait (bounded) for the schedule's one run.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with connect(empty_database_url) as conn:
                if run_count(conn, principal) >= 1:
                    break
            assert process.poll() is None, "charter up died"
            time.sleep(0.1)
        with connect(empty_database_url) as conn:
            assert run_count(conn, principal) == 1

        body = b'{"source": "shop", "type": "ping"}'
        stamp = int(time.time())
        response = httpx.post(
            f"{url}/events",
            content=body,
            headers={
                "X-Charter-Principal": principal,
                "X-Charter-Target": "machine-1",
                "webhook-id": "msg_up",
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(secret, "msg_up", stamp, body),
            },
            timeout=30,
        )
        assert response.status_code == 202, response.text
        assert len(response.json()["runs"]) == 1
        with connect(empty_database_url) as conn:
            statuses = conn.execute(
                "SELECT trigger_kind, status FROM charter.runs WHERE principal = %s "
                "ORDER BY trigger_kind",
                (principal,),
            ).fetchall()
        assert statuses == [("schedule", "pending"), ("webhook", "pending")]
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "stopped cleanly" in out
