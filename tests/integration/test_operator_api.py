"""The operator routes: GET /v1/processes with its filters and keyset pages,
GET /v1/stats, and the global scheduled-action and queue views."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, connect
from tests.integration.apikit import ERRANDS, OTHER, Harness, bearer, new_id
from tests.integration.machinekit import machine_harness, register

TIMERS = "ops/timers"
PARENT = "ops/parent"
PARENT_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "split"],
    "roles": ["clerk"],
    "actions": {
        "create": {"type": "create", "role": "clerk", "to": "open"},
        "split": {
            "role": "clerk",
            "from": "open",
            "to": "split",
            "spawn": [
                {"workflow": "ops/child", "process": "{{ process.id }}.a", "action": "begin"},
                {"workflow": "ops/child", "process": "{{ process.id }}.b", "action": "begin"},
            ],
        },
    },
}
CHILD_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["new"],
    "roles": ["clerk"],
    "actions": {"begin": {"type": "create", "role": "clerk", "to": "new"}},
}
TIMERS_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "busy", "done"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "schedule": [{"id": "nudge", "action": "nudge", "in": "30m", "data": {}}],
        },
        "nudge": {"role": "AUTOMATION", "from": "open", "to": "open"},
        "start": {"role": "clerk", "from": "open", "to": "busy"},
        "finish": {"role": "AUTOMATION", "auto": True, "from": "busy", "to": "done"},
    },
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = machine_harness(database)  # DPoP proofs bound to the TestClient's origin
    harness.deploy(TIMERS, TIMERS_DEFINITION)
    harness.deploy("ops/child", CHILD_DEFINITION)
    harness.deploy(PARENT, PARENT_DEFINITION)
    yield harness
    harness.http.close()


def _get(h: Harness, path: str, token: str | None = None, **params: Any) -> dict[str, Any]:
    response = h.http.get(path, params=params, headers=bearer(token or h.admin))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _error(h: Harness, path: str, token: str | None = None, **params: Any) -> tuple[int, str]:
    response = h.http.get(path, params=params, headers=bearer(token or h.admin))
    return response.status_code, str(response.json()["error"]["code"])


def _timers_process(h: Harness, *, start: bool = False) -> str:
    clerk = h.keys["clerk"]
    process_id = new_id("t")
    body = h.accept(sign(h.envelope(clerk, process_id, "create", workflow=TIMERS), clerk))
    if start:
        prev = str(body["hash"])
        h.accept(sign(h.envelope(clerk, process_id, "start", prev=prev, workflow=TIMERS), clerk))
    return process_id


def _prefixed(h: Harness, prefix: str, count: int) -> list[str]:
    """`count` errands processes whose ids start with `prefix`, each created a second
    after the one before (so newest first is the reverse of creation)."""
    clerk = h.keys["clerk"]
    made = []
    for n in range(count):
        h.clock.advance(1)  # type: ignore[attr-defined]
        process_id = f"{prefix}-{n:03d}"
        h.accept(sign(h.envelope(clerk, process_id, "create", {"amount": n}), clerk))
        made.append(process_id)
    return made


# --- GET /v1/processes ------------------------------------------------------------------


def test_processes_are_the_process_objects_newest_first(h: Harness) -> None:
    made = _prefixed(h, "newest", 3)
    body = _get(h, "/v1/processes", q="newest")
    assert [p["id"] for p in body["items"]] == made[::-1]
    assert body["next_cursor"] is None
    one = _get(h, f"/v1/processes/{made[0]}")
    assert body["items"][-1] == one


def test_pages_follow_the_cursor_to_the_end_without_gaps_or_repeats(h: Harness) -> None:
    made = _prefixed(h, "pages", 7)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"q": "pages", "limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = _get(h, "/v1/processes", **params)
        seen += [p["id"] for p in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == made[::-1]
    assert pages == 3


def test_a_page_that_ends_exactly_at_the_last_row_has_no_next_cursor(h: Harness) -> None:
    made = _prefixed(h, "exact", 4)
    first = _get(h, "/v1/processes", q="exact", limit=2)
    assert first["next_cursor"] is not None
    second = _get(h, "/v1/processes", q="exact", limit=2, cursor=first["next_cursor"])
    assert [p["id"] for p in second["items"]] == made[1::-1]
    assert second["next_cursor"] is None
    whole = _get(h, "/v1/processes", q="exact", limit=4)
    assert whole["next_cursor"] is None


def test_no_match_is_an_empty_page(h: Harness) -> None:
    assert _get(h, "/v1/processes", q="nothing-starts-so") == {
        "items": [],
        "next_cursor": None,
        "processes": [],  # deprecated, the same list as `items`
    }


def test_equal_update_times_page_by_id(h: Harness) -> None:
    clerk = h.keys["clerk"]
    ids = [f"tie-{n}" for n in range(5)]
    for process_id in ids:  # the fake clock stands still: one updated_at for all
        h.accept(sign(h.envelope(clerk, process_id, "create", {"amount": 1}), clerk))
    first = _get(h, "/v1/processes", q="tie-", limit=2)
    rest = _get(h, "/v1/processes", q="tie-", limit=10, cursor=first["next_cursor"])
    order = [p["id"] for p in first["items"] + rest["items"]]
    assert order == sorted(ids, reverse=True)


def test_workflow_filter_is_exact_or_a_prefix_with_a_star(h: Harness) -> None:
    clerk = h.keys["clerk"]
    other = new_id("wf")
    h.accept(sign(h.envelope(clerk, other, "create", workflow=OTHER), clerk))
    exact = _get(h, "/v1/processes", workflow=OTHER, limit=500)["items"]
    assert other in [p["id"] for p in exact]
    assert {p["workflow"] for p in exact} == {OTHER}
    prefixed = _get(h, "/v1/processes", workflow="tests/*", limit=500)["items"]
    assert {p["workflow"] for p in prefixed} == {OTHER, ERRANDS}
    assert _get(h, "/v1/processes", workflow="tests/")["items"] == []


def test_state_parent_and_update_time_filters(h: Harness) -> None:
    busy = _timers_process(h, start=True)
    states = {p["state"] for p in _get(h, "/v1/processes", workflow=TIMERS, state="done")["items"]}
    assert states <= {"done"}
    open_ = _get(h, "/v1/processes", workflow=TIMERS, state="open", limit=500)["items"]
    assert busy not in [p["id"] for p in open_]
    assert _get(h, "/v1/processes", parent="no-such-parent")["items"] == []

    h.clock.advance(60)  # type: ignore[attr-defined]
    late = _prefixed(h, "late", 1)[0]
    moment = h.clock.now().isoformat().replace("+00:00", "Z")
    after = _get(h, "/v1/processes", updated_after="2026-06-18T10:00:00Z", q="late")
    assert [p["id"] for p in after["items"]] == [late]
    before = _get(h, "/v1/processes", updated_before=moment, q="late")
    assert before["items"] == []


def test_parent_filter_lists_children(h: Harness) -> None:
    clerk = h.keys["clerk"]
    parent = new_id("parent")
    made = h.accept(sign(h.envelope(clerk, parent, "create", workflow=PARENT), clerk))
    prev = str(made["hash"])
    h.accept(sign(h.envelope(clerk, parent, "split", prev=prev, workflow=PARENT), clerk))
    children = _get(h, "/v1/processes", parent=parent)["items"]
    assert sorted(p["id"] for p in children) == [f"{parent}.a", f"{parent}.b"]
    listed = _get(h, "/v1/processes", q=parent, limit=500)["items"]
    mine = next(p for p in listed if p["id"] == parent)
    assert mine["children"] == _get(h, f"/v1/processes/{parent}")["children"]
    assert len(mine["children"]) == 2


def _create(h: Harness, *ids: str) -> None:
    clerk = h.keys["clerk"]
    for process_id in ids:
        h.accept(sign(h.envelope(clerk, process_id, "create", {"amount": 1}), clerk))


def test_an_underscore_in_q_is_a_character_not_a_wildcard(h: Harness) -> None:
    _create(h, "ns-aXYZ", "ns-ab1", "ns-a_1", "ns-a_b")
    listed = _get(h, "/v1/processes", q="ns-a_", limit=500)["processes"]
    assert sorted(p["id"] for p in listed) == ["ns-a_1", "ns-a_b"]
    assert _get(h, "/v1/processes", q="ns-a_1")["processes"][0]["id"] == "ns-a_1"
    assert _get(h, "/v1/processes", q="ns-_")["processes"] == []
    whole = _get(h, "/v1/processes", q="ns-a", limit=500)["processes"]
    assert len(whole) == 4


@pytest.mark.parametrize("q", ["ns-a%", "%", "ns-a\\", "ns-a\\_", "\\%", "ns-a\\%"])
def test_a_percent_or_backslash_in_q_is_refused_not_matched(h: Harness, q: str) -> None:
    assert _error(h, "/v1/processes", q=q) == (400, "invalid_filter")


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": 0}, "invalid_limit"),
        ({"limit": 501}, "invalid_limit"),
        ({"cursor": "not-a-cursor"}, "invalid_cursor"),
        ({"cursor": "bm90aGluZw"}, "invalid_cursor"),  # base64 of "nothing"
        ({"updated_after": "yesterday"}, "invalid_filter"),
        ({"q": "bad prefix%"}, "invalid_filter"),
        ({"workflow": "a*b*"}, "invalid_filter"),
        ({"limit": "many"}, "invalid_limit"),
    ],
)
def test_bad_parameters_are_400_with_a_specific_code(
    h: Harness, params: dict[str, Any], code: str
) -> None:
    assert _error(h, "/v1/processes", **params) == (400, code)


def test_the_operator_routes_need_processes_read(h: Harness) -> None:
    runs_only = h.token("runs:read")
    reader = h.token("processes:read")
    for path in ("/v1/processes", "/v1/stats", "/v1/automation/scheduled", "/v1/automation/queue"):
        assert h.http.get(path).status_code == 401
        assert _error(h, path, runs_only) == (403, "forbidden")
        assert h.http.get(path, headers=bearer(reader)).status_code == 200


# --- GET /v1/stats ----------------------------------------------------------------------


def test_stats_count_processes_work_runs_and_machines(h: Harness) -> None:
    _timers_process(h)
    _timers_process(h, start=True)
    stats = _get(h, "/v1/stats")
    counts = {(c["workflow"], c["state"]): c["count"] for c in stats["processes"]}
    with connect(h.database.url) as conn:
        expected = {
            (str(w), str(s)): int(str(n))
            for w, s, n in conn.execute(
                "SELECT workflow_path, state, count(*) FROM charter.processes GROUP BY 1, 2"
            )
        }
    assert counts == expected
    assert stats["timers_due_next_hour"] >= 2  # every timers process schedules in 30 min
    assert stats["queue"].get("pending", 0) >= 1  # `finish` is queued from busy
    assert stats["failed_work"] == 0
    assert stats["runs"] == {}
    assert stats["machines_seen_recently"] == 0
    assert stats["as_of"].startswith("2026-06-18")


def test_stats_count_the_principals_runs_and_machines_that_authenticated(h: Harness) -> None:
    token = h.token("processes:read", "runs:read", "automations:read", principal="alice")
    before = _get(h, "/v1/stats", token)
    assert before["machines_seen_recently"] == 0
    writer = h.token("automations:write", "runs:execute", principal="alice")
    created = h.http.post(
        "/v1/automations", json={"name": "stats", "target": "stats-box"}, headers=bearer(writer)
    )
    automation = created.json()["id"]
    plan = {"version": 1, "steps": [{"id": "only", "actionId": "http.request", "input": {}}]}
    h.http.put(f"/v1/automations/{automation}/plan", json=plan, headers=bearer(writer))
    run = h.http.post(f"/v1/automations/{automation}/runs", headers=bearer(writer))
    assert run.status_code == 201, run.text
    machine = register(h, "stats-box", principal="alice")
    assert machine.claim().status_code == 200  # a DPoP-authenticated request
    after = _get(h, "/v1/stats", token)
    assert after["runs"].get("running", 0) == before["runs"].get("running", 0) + 1
    assert after["machines_seen_recently"] == 1
    others = _get(h, "/v1/stats", h.token("processes:read", "runs:read", "automations:read"))
    assert others["machines_seen_recently"] == 0  # principal `tester` has no machines
    assert others["runs"].get("running", 0) == 0


def test_stats_leave_out_what_the_token_cannot_read(h: Harness) -> None:
    stats = _get(h, "/v1/stats", h.token("processes:read"))
    assert stats["runs"] == {}
    assert stats["machines_seen_recently"] is None


# --- GET /v1/automation/scheduled and /queue --------------------------------------------


def test_scheduled_view_lists_timers_across_processes_in_human_rows(h: Harness) -> None:
    process_id = _timers_process(h)
    rows = _get(h, "/v1/automation/scheduled", process=process_id)["items"]
    assert len(rows) == 1
    row = rows[0]
    assert row["what"] == "nudge"
    assert row["kind"] == "scheduled_action"
    assert row["process"] == process_id
    assert row["workflow"] == TIMERS
    assert row["status"] == "active"
    assert row["schedule_id"] == "nudge"
    assert row["attempts"] == 0
    assert row["last_error"] is None
    assert row["due"] > h.clock.now().isoformat()[:19]


def test_scheduled_view_filters_and_pages(h: Harness) -> None:
    made = {_timers_process(h) for _ in range(3)}
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"workflow": "ops/*", "status": "active", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        body = _get(h, "/v1/automation/scheduled", **params)
        seen += [row["process"] for row in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert made <= set(seen)
    assert len(seen) == len(set(seen))
    dues = [row["due"] for row in _get(h, "/v1/automation/scheduled", limit=500)["items"]]
    assert dues == sorted(dues)
    assert _get(h, "/v1/automation/scheduled", due_before="2026-01-01T00:00:00Z")["items"] == []
    assert _get(h, "/v1/automation/scheduled", status="failed")["items"] == []


def test_queue_view_lists_automatic_actions(h: Harness) -> None:
    process_id = _timers_process(h, start=True)
    rows = _get(h, "/v1/automation/queue", process=process_id)["items"]
    assert [(r["what"], r["status"], r["kind"]) for r in rows] == [
        ("finish", "pending", "auto_action")
    ]
    assert rows[0]["queued_at"] is not None
    assert _get(h, "/v1/automation/queue", process=process_id, status="failed")["items"] == []


@pytest.mark.parametrize("path", ["/v1/automation/scheduled", "/v1/automation/queue"])
@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"status": "sleeping"}, "invalid_filter"),
        ({"due_before": "soon"}, "invalid_filter"),
        ({"limit": 1000}, "invalid_limit"),
        ({"cursor": "MjAyNi0wNi0xOFQxMDowMDowMCswMDowMHxub3QtYS11dWlk"}, "invalid_cursor"),
    ],
)
def test_work_views_refuse_bad_parameters(
    h: Harness, path: str, params: dict[str, Any], code: str
) -> None:
    assert _error(h, path, **params) == (400, code)


def test_openapi_documents_the_operator_routes(h: Harness) -> None:
    spec = h.http.get("/openapi.json").json()
    for path in ("/v1/processes", "/v1/stats", "/v1/automation/scheduled", "/v1/automation/queue"):
        assert "get" in spec["paths"][path]
    schemas = spec["components"]["schemas"]
    assert {"ProcessPage", "Stats", "ScheduledPage", "QueuePage"} <= set(schemas)
