"""The operator commands of the CLI, in-process against the app on this module's
database: processes list, timers (ids by unique prefix), runs cancel|retry, machines;
and the run cancel/retry endpoints they call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from charter.cli import automations, remote
from charter.core.envelope import sign
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.sdk import Client
from tests.integration.apikit import Harness, bearer, make_harness
from tests.integration.clikit import run_charter
from tests.integration.machinekit import register

TIMERS = "ops/cli-timers"
TIMERS_DEFINITION: JsonObject = {
    "dsl": 2,
    "states": ["open", "busy", "done"],
    "roles": ["clerk", "AUTOMATION"],
    "actions": {
        "create": {
            "type": "create",
            "role": "clerk",
            "to": "open",
            "schedule": [{"id": "remind", "action": "remind", "in": "2h", "data": {}}],
        },
        "remind": {"role": "AUTOMATION", "from": "open", "to": "open"},
        "start": {"role": "clerk", "from": "open", "to": "busy"},
        "finish": {"role": "AUTOMATION", "auto": True, "from": "busy", "to": "done"},
    },
}
PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [{"id": "only", "actionId": "http.request", "input": {}}],
}


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy(TIMERS, TIMERS_DEFINITION)
    yield harness
    harness.http.close()


@pytest.fixture
def cli(h: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(remote, "client", lambda: h.client())
    monkeypatch.setattr(
        automations, "client", lambda: Client(str(h.http.base_url), h.admin, http=h.http)
    )

    return lambda *args: run_charter(monkeypatch, capsys, *args)


def _create(h: Harness, process_id: str, *, start: bool = False) -> None:
    clerk = h.keys["clerk"]
    made = h.accept(sign(h.envelope(clerk, process_id, "create", workflow=TIMERS), clerk))
    if start:
        prev = str(made["hash"])
        h.accept(sign(h.envelope(clerk, process_id, "start", prev=prev, workflow=TIMERS), clerk))


# --- processes list ---------------------------------------------------------------------


def test_processes_list_shows_whole_ids_in_a_table(h: Harness, cli: Any) -> None:
    _create(h, "cli-list-one-with-a-rather-long-id")
    result = cli("processes", "list", "--workflow", TIMERS)
    assert result.code == 0, result.err
    assert "cli-list-one-with-a-rather-long-id" in result.out
    assert "open" in result.out


def test_processes_list_json_is_the_api_page(h: Harness, cli: Any) -> None:
    _create(h, "cli-json-a")
    _create(h, "cli-json-b", start=True)
    result = cli("processes", "list", "--id", "cli-json", "--state", "busy", "--json")
    assert result.code == 0, result.err
    page = json.loads(result.out)
    assert [p["id"] for p in page["items"]] == ["cli-json-b"]
    assert page["next_cursor"] is None


def test_processes_list_pages_with_limit_and_cursor(h: Harness, cli: Any) -> None:
    for n in range(3):
        _create(h, f"cli-page-{n}")
    first = json.loads(cli("processes", "list", "--id", "cli-page", "--limit", "2", "--json").out)
    assert len(first["items"]) == 2
    rest = cli("processes", "list", "--id", "cli-page", "--cursor", first["next_cursor"], "--json")
    assert len(json.loads(rest.out)["items"]) == 1
    table = cli("processes", "list", "--id", "cli-page", "--limit", "2")
    assert f"more: --cursor {first['next_cursor']}" in table.out


def test_a_bad_limit_is_one_error_line(cli: Any) -> None:
    result = cli("processes", "list", "--limit", "0")
    assert result.code == 1
    assert result.err.strip().startswith("error: limit must be between 1 and 500")


# --- timers -----------------------------------------------------------------------------


def test_timers_of_a_process_show_what_when_and_status(h: Harness, cli: Any) -> None:
    _create(h, "cli-timers-solo", start=True)
    result = cli("timers", "cli-timers-solo")
    assert result.code == 0, result.err
    assert "remind" in result.out  # the scheduled action
    assert "finish" in result.out  # the queued automatic action
    assert "active" in result.out
    assert "pending" in result.out
    assert "in " in result.out or " ago" in result.out  # relative time beside the absolute


def test_timers_take_a_unique_prefix(h: Harness, cli: Any) -> None:
    _create(h, "cli-unique-xyz")
    result = cli("timers", "cli-unique-x", "--json")
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert [row["process"] for row in body["scheduled"]["items"]] == ["cli-unique-xyz"]


def test_an_ambiguous_prefix_is_a_clear_error_and_exit_2(h: Harness, cli: Any) -> None:
    _create(h, "cli-twin-1")
    _create(h, "cli-twin-2")
    result = cli("timers", "cli-twin")
    assert result.code == 2
    assert "several process ids" in result.err
    assert "cli-twin-1" in result.err
    assert "cli-twin-2" in result.err


def test_an_unknown_process_is_exit_1(cli: Any) -> None:
    result = cli("timers", "cli-nobody-has-this")
    assert result.code == 1
    assert "no process id is or starts with" in result.err


def test_timers_across_processes_filter_by_status(h: Harness, cli: Any) -> None:
    _create(h, "cli-global-one", start=True)
    result = cli("timers", "--workflow", "ops/*", "--status", "pending", "--json")
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert body["scheduled"]["items"] == []  # `pending` is the queue's status alone
    assert "cli-global-one" in [row["process"] for row in body["queue"]["items"]]
    table = cli("timers", "--workflow", "ops/*")
    assert "process" in table.out
    assert "workflow" in table.out


# --- runs cancel | retry ----------------------------------------------------------------


def _pending_run(h: Harness) -> str:
    created = h.http.post(
        "/v1/automations",
        content=json.dumps({"name": "cli-runs", "target": "box"}),
        headers=bearer(h.admin),
    )
    automation = created.json()["id"]
    h.http.put(
        f"/v1/automations/{automation}/plan", content=json.dumps(PLAN), headers=bearer(h.admin)
    )
    run = h.http.post(f"/v1/automations/{automation}/runs", headers=bearer(h.admin))
    assert run.status_code == 201, run.text
    return str(run.json()["id"])


def test_runs_cancel_fails_a_pending_run_and_retry_admits_a_new_one(h: Harness, cli: Any) -> None:
    run_id = _pending_run(h)
    cancelled = cli("runs", "cancel", run_id, "--json")
    assert cancelled.code == 0, cancelled.err
    body = json.loads(cancelled.out)
    assert (body["status"], body["error"]) == ("failed", "cancelled by an operator")

    again = cli("runs", "cancel", run_id)
    assert again.code == 1
    assert "can no longer be cancelled" in again.err

    retried = cli("runs", "retry", run_id, "--json")
    assert retried.code == 0, retried.err
    new = json.loads(retried.out)
    assert new["id"] != run_id
    assert new["status"] == "pending"
    assert new["trigger_kind"] == "manual"
    retry_pending = cli("runs", "retry", new["id"])
    assert retry_pending.code == 1
    assert "only a failed run is retried" in retry_pending.err
    shown = cli("runs", "cancel", new["id"])
    assert shown.code == 0
    assert "cancelled" in shown.out


def test_run_cancel_and_retry_need_runs_execute_and_hide_others_runs(h: Harness) -> None:
    run_id = _pending_run(h)
    reader = h.token("runs:read", principal="admin")
    outsider = h.token("runs:execute", principal="someone-else")
    for verb in ("cancel", "retry"):
        path = f"/v1/runs/{run_id}/{verb}"
        assert h.http.post(path, headers=bearer(reader)).status_code == 403
        hidden = h.http.post(path, headers=bearer(outsider))
        assert hidden.status_code == 404
        assert hidden.json()["error"]["code"] == "not_found"
    assert (
        h.http.post(f"/v1/runs/{run_id}/retry", headers=bearer(h.admin)).json()["error"]["code"]
        == "run_not_failed"
    )
    h.http.post(f"/v1/runs/{run_id}/cancel", headers=bearer(h.admin))
    finished = h.http.post(f"/v1/runs/{run_id}/cancel", headers=bearer(h.admin))
    assert (finished.status_code, finished.json()["error"]["code"]) == (409, "run_finished")


# --- machines ---------------------------------------------------------------------------


def test_machines_list_disable_and_enable(h: Harness, cli: Any) -> None:
    register(h, "box", principal="admin", machine_id="cli-machine-1")
    listed = cli("machines", "list")
    assert listed.code == 0, listed.err
    assert "cli-machine-1" in listed.out
    assert "enabled" in listed.out

    disabled = cli("machines", "disable", "cli-machine-1")
    assert (disabled.code, disabled.out.strip()) == (0, "machine cli-machine-1 disabled")
    rows = json.loads(cli("machines", "list", "--json").out)["machines"]
    assert next(m for m in rows if m["id"] == "cli-machine-1")["disabled_at"] is not None

    enabled = cli("machines", "enable", "cli-machine-1", "--json")
    assert json.loads(enabled.out)["disabled_at"] is None
    unknown = cli("machines", "disable", "cli-no-such-machine")
    assert unknown.code == 1
    assert unknown.err.startswith("error: ")


# --- ids are shown whole ----------------------------------------------------------------


def test_tables_show_ids_whole_on_a_narrow_terminal(
    h: Harness, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every id a table shows is one another command takes: never cut with an ellipsis,
    however narrow the terminal (the table grows past it instead)."""
    long_process = "cli-whole-" + "x" * 40
    _create(h, long_process, start=True)
    long_machine = "cli-machine-with-a-long-" + "y" * 30
    register(h, "box", principal="admin", machine_id=long_machine)
    run_id = _pending_run(h)
    long_actor = "cli-actor-with-a-long-" + "z" * 30
    h.actor(long_actor, "clerk")
    monkeypatch.setenv("COLUMNS", "40")
    for args, whole in [
        (["processes", "list", "--workflow", TIMERS], long_process),
        (["timers", "--workflow", TIMERS], long_process),
        (["machines", "list"], long_machine),
        (["runs", "list"], run_id),
        (["actors", "list"], long_actor),
    ]:
        shown = cli(*args)
        assert shown.code == 0, shown.err
        assert any(whole in line for line in shown.out.splitlines()), (args, shown.out)
    automation_id = json.loads(cli("automations", "list", "--json").out)["items"][0]["id"]
    listed = cli("automations", "list")
    assert any(automation_id in line for line in listed.out.splitlines()), listed.out
