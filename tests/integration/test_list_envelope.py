"""Every list route answers one envelope, `{"items": [...], "next_cursor": ...}`; the
keys lists had before (`processes`, `scheduled`, `queue`, `events`, `workflows`,
`actors`, `machines`) still carry the same list for one release, deprecated."""

from __future__ import annotations

from typing import Any

import pytest

from charter.core.envelope import sign
from charter.db.database import Database
from tests.integration.apikit import ERRANDS, Harness, bearer, new_id
from tests.integration.machinekit import create_automation, machine_harness, register


@pytest.fixture(scope="module")
def h(database: Database) -> Harness:
    """A process with its events and queued work, and a machine."""
    harness = machine_harness(database)
    clerk = harness.keys["clerk"]
    harness.accept(sign(harness.envelope(clerk, new_id(), "create", {"amount": 3}), clerk))
    register(harness, "t-lists", principal="admin")
    return harness


@pytest.fixture(scope="module")
def automation(h: Harness, database: Database) -> str:
    """An automation with a schedule, a webhook and a run (and another automation)."""
    harness = h
    auth = bearer(harness.admin)
    made = harness.http.post("/v1/automations", json={"name": "lists", "target": "t-lists"},
                             headers=auth)  # fmt: skip
    assert made.status_code == 201, made.text
    one = made.json()["id"]
    plan = {"version": 1, "steps": [{"id": "s1", "actionId": "test.echo", "input": {}}]}
    assert harness.http.put(f"/v1/automations/{one}/plan", json=plan, headers=auth).is_success
    schedule = {"cron": "0 9 * * *", "timezone": "UTC"}
    assert harness.http.post(f"/v1/automations/{one}/schedules", json=schedule,
                             headers=auth).is_success  # fmt: skip
    assert harness.http.post(f"/v1/automations/{one}/webhooks", json={"source": "shop"},
                             headers=auth).is_success  # fmt: skip
    assert harness.http.post(f"/v1/automations/{one}/runs", json={}, headers=auth).is_success
    create_automation(database, target="t-lists-2", principal="admin")
    return str(one)


def _lists(h: Harness, automation: str) -> list[tuple[str, str | None]]:
    process = _first(h, "/v1/processes")["id"]
    return [
        ("/v1/processes", "processes"),
        ("/v1/automation/scheduled", "scheduled"),
        ("/v1/automation/queue", "queue"),
        (f"/v1/processes/{process}/events", "events"),
        ("/v1/workflows", "workflows"),
        ("/v1/actors", "actors"),
        ("/v1/machines", "machines"),
        ("/v1/automations", None),
        (f"/v1/automations/{automation}/schedules", None),
        (f"/v1/automations/{automation}/webhooks", None),
        ("/v1/runs", None),
    ]


def _get(h: Harness, path: str, **query: Any) -> dict[str, Any]:
    response = h.http.get(path, params=query, headers=bearer(h.admin))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _first(h: Harness, path: str) -> dict[str, Any]:
    item: dict[str, Any] = _get(h, path)["items"][0]
    return item


def test_every_list_answers_items_and_next_cursor(h: Harness, automation: str) -> None:
    for path, legacy in _lists(h, automation):
        body = _get(h, path)
        assert isinstance(body.get("items"), list), (path, body)
        if legacy not in ("scheduled", "queue"):
            assert body["items"], path  # the fixture put something in these lists
        assert "next_cursor" in body, path
        if legacy is not None:
            assert body[legacy] == body["items"], path  # the deprecated alias


def test_lists_that_are_not_paged_say_there_is_no_next_page(h: Harness, automation: str) -> None:
    unpaged = {"events", "workflows", "actors", "machines"}
    for path, legacy in _lists(h, automation):
        if legacy in unpaged or path.endswith(("/schedules", "/webhooks")):
            assert _get(h, path)["next_cursor"] is None, path


def test_a_paged_list_walks_on_with_its_cursor(h: Harness) -> None:
    clerk = h.keys["clerk"]
    h.accept(sign(h.envelope(clerk, new_id(), "create", {"amount": 4}), clerk))
    first = _get(h, "/v1/processes", limit=1)
    assert len(first["items"]) == 1
    assert first["next_cursor"] is not None
    second = _get(h, "/v1/processes", limit=1, cursor=first["next_cursor"])
    assert second["items"] != first["items"]
    assert second["processes"] == second["items"]


def test_the_machines_list_keeps_its_can_change(h: Harness) -> None:
    body = _get(h, "/v1/machines")
    assert body["can_change"] is True
    assert body["machines"] == body["items"]


def test_the_workflows_list_names_the_deployed_paths(h: Harness) -> None:
    assert ERRANDS in {w["path"] for w in _get(h, "/v1/workflows")["items"]}
