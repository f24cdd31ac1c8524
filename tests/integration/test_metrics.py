"""`/metrics` as a Prometheus user reads it: gauges of the work waiting in the database,
read at scrape time; counters of fires (by outcome and kind), firing lag, verification
results and problems; the process and pool figures; served as text/plain, and listed in
docs/operations.md."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from charter.api.app import create_app
from charter.core.config import Settings
from charter.core.jsontypes import JsonObject
from charter.db.database import Role, connect
from tests.integration.world import World, new_process_id, scratch_database

OPERATIONS_DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
TICKING = "metrics/ticking"
TICKING_DEFINITION: JsonObject = {
    "dsl": 2, "states": ["open"], "roles": ["customer", "AUTOMATION"],
    "actions": {
        "open": {"type": "create", "role": "customer", "to": "open",
                 "schedule": [{"id": "tick", "action": "tick", "at": "{{ input.due }}",
                               "data": {}}]},
        "tick": {"type": "update", "role": "AUTOMATION", "from": "*"},
    },
}  # fmt: skip
SERIES = re.compile(r"^(?P<name>\w+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$", re.MULTILINE)
LABEL = re.compile(r'(\w+)="([^"]*)"')
PAST, FUTURE = "2026-06-18T09:00:00Z", "2126-01-01T00:00:00Z"


@pytest.fixture
def world(pg_admin_url: str, template_database: str) -> Iterator[World]:
    with scratch_database(pg_admin_url, template_database) as database:
        w = World(database)
        w.deploy(TICKING, TICKING_DEFINITION)
        w.actor("ada", "customer")
        w.actor("automation", "AUTOMATION")
        yield w


@pytest.fixture
def http(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.database, engine=world.engine, settings=Settings())) as c:
        yield c


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one series (labels in any order), or None when it is absent."""
    for match in SERIES.finditer(text):
        found = dict(LABEL.findall(match["labels"] or ""))
        if match["name"] == name and found == labels:
            return float(match["value"])
    return None


def _open(world: World, due: str) -> str:
    process_id = new_process_id()
    world.submit("ada", "open", process_id, None, workflow=TICKING, input_={"due": due})
    return process_id


def test_gauges_show_the_work_waiting_now(world: World, http: TestClient) -> None:
    for _ in range(2):
        _open(world, PAST)
    _open(world, FUTURE)
    text = http.get("/metrics").text
    assert sample(text, "charter_timers_due") == 2
    assert sample(text, "charter_timers_due_next_hour") == 2
    oldest = sample(text, "charter_timers_oldest_due_seconds")
    assert oldest is not None
    assert oldest > 3600  # due since June, by the database's clock
    assert sample(text, "charter_work_rows", table="scheduled", status="active_due") == 2
    assert sample(text, "charter_work_rows", table="queue", status="pending") == 0
    assert sample(text, "charter_runs", status="pending") == 0
    assert sample(text, "charter_machines_seen") == 0
    # This process's pools, and the process itself.
    assert sample(text, "charter_db_pool_waiting", role="engine") == 0
    in_use = sample(text, "charter_db_pool_connections", role="engine", state="in_use")
    idle = sample(text, "charter_db_pool_connections", role="engine", state="idle")
    assert in_use is not None
    assert idle is not None
    assert in_use + idle >= 1  # the pool the scrape itself used
    assert sample(text, "process_cpu_seconds_total") is not None


def test_fires_are_counted_by_outcome_and_kind_with_their_lag(
    world: World, http: TestClient
) -> None:
    before = http.get("/metrics").text
    _open(world, PAST)
    result = world.firer().fire_due()
    assert [fired.outcome.value for fired in result.results] == ["accepted"]
    after = http.get("/metrics").text
    labels = {"outcome": "accepted", "kind": "scheduled_action"}
    assert (sample(after, "charter_automation_fires_total", **labels) or 0) == (
        sample(before, "charter_automation_fires_total", **labels) or 0
    ) + 1
    lag = "charter_automation_firing_lag_seconds_count"
    assert (sample(after, lag, kind="scheduled_action") or 0) == (
        sample(before, lag, kind="scheduled_action") or 0
    ) + 1
    assert sample(after, "charter_timers_due") == 0


def test_verifications_are_counted_with_their_problems(world: World, http: TestClient) -> None:
    process_id = _open(world, FUTURE)
    token = _token(world)
    before = http.get("/metrics").text
    assert http.get(f"/v1/processes/{process_id}/verify", headers=token).json()["ok"]
    with connect(world.database.url) as conn:  # a superuser, past the append-only guard
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(
            "UPDATE charter.events SET signature = CASE WHEN left(signature, 1) = 'a' "
            "THEN 'b' ELSE 'a' END || substr(signature, 2) WHERE process_id = %s",
            (process_id,),
        )
        conn.commit()
    assert not http.get(f"/v1/processes/{process_id}/verify", headers=token).json()["ok"]
    after = http.get("/metrics").text
    for result in ("ok", "problems"):
        assert (sample(after, "charter_verifications_total", result=result) or 0) == (
            sample(before, "charter_verifications_total", result=result) or 0
        ) + 1
    assert sample(after, "charter_verification_problems_total", code="bad_signature")


def test_metrics_are_text_and_every_charter_family_is_documented(http: TestClient) -> None:
    response = http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    families = set(re.findall(r"^# TYPE (charter_\w+) ", response.text, re.MULTILINE))
    assert len(families) >= 20
    documented = OPERATIONS_DOC.read_text()
    missing = sorted(name for name in families if f"`{name}" not in documented)
    assert not missing, f"not in docs/operations.md: {missing}"
    spec = http.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]["200"]
    assert list(spec["content"]) == ["text/plain"]


def _token(world: World) -> dict[str, str]:
    from charter.auth.tokens import create_token

    with world.database.connection(Role.ENGINE) as conn, conn.transaction():
        secret = create_token(conn, scopes=["processes:read"], name="metrics")
    return {"Authorization": f"Bearer {secret}"}
