"""`charter automations ...` and `charter runs ...` end to end through the real entry
point (one-line errors, exit codes), with the client pointed at the app in-process."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from charter.cli import automations as automations_cli
from charter.cli import main as cli_main
from charter.db.database import Database, connect
from charter.sdk import Client
from tests.integration.apikit import Harness, make_harness

PLAN: dict[str, Any] = {
    "version": 1,
    "steps": [
        {
            "id": "fetch",
            "actionId": "http.request",
            "input": {"url": "https://example.com"},
            "retry": {"on": ["http_5xx"]},
        },
        {"id": "file", "actionId": "charter.submit", "input": {"action": "note"}},
    ],
}

OWNER_SCOPES = ("automations:read", "automations:write", "runs:read", "runs:execute")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    yield harness
    harness.http.close()


@dataclass(frozen=True)
class Cli:
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str) -> Result:
        """Run `charter ARGS` through the real entry point."""
        self.capsys.readouterr()
        self.monkeypatch.setattr(sys, "argv", ["charter", *args])
        try:
            cli_main.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:
            code = 0
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.code == 0, result
        return result.out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))


@pytest.fixture
def cli(h: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    # Not `*`: an admin token would list every principal's automations.
    token = h.token(*OWNER_SCOPES, principal=f"cli-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("COLUMNS", "250")  # tables as wide as a terminal, not truncated
    monkeypatch.setattr(
        automations_cli,
        "client",
        lambda: Client(str(h.http.base_url), token, http=h.http),
    )
    return Cli(monkeypatch, capsys)


def one_error_line(result: Result) -> str:
    assert result.code == 1, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_create_list_show_update_pause_resume_delete(cli: Cli) -> None:
    out = cli.ok("automations", "create", "nightly report", "--target", "laptop")
    assert out.startswith("created automation ")
    automation_id = out.split()[2]
    uuid.UUID(automation_id)
    made = cli.json("automations", "create", "second", "--target", "server", "--paused")
    assert made["enabled"] is False

    table = cli.ok("automations", "list")
    assert "nightly report" in table
    assert automation_id in table
    listed = cli.json("automations", "list")
    assert [a["name"] for a in listed["items"]].count("nightly report") == 1
    assert listed["next_cursor"] is None

    shown = cli.ok("automations", "show", automation_id)
    assert "nightly report" in shown
    assert "no plan" in shown
    assert cli.json("automations", "show", automation_id)["target"] == "laptop"

    assert "updated automation" in cli.ok(
        "automations", "update", automation_id, "--name", "nightly"
    )
    assert cli.json("automations", "update", automation_id, "--target", "desk")["target"] == "desk"
    assert "paused" in cli.ok("automations", "pause", automation_id)
    assert cli.json("automations", "show", automation_id)["enabled"] is False
    assert cli.json("automations", "resume", automation_id)["enabled"] is True

    assert (
        cli.ok("automations", "delete", automation_id).strip()
        == f"deleted automation {automation_id}"
    )
    gone = one_error_line(cli("automations", "show", automation_id))
    assert f"no automation {automation_id}" in gone


def test_list_pages_and_all(cli: Cli) -> None:
    for i in range(5):
        cli.ok("automations", "create", f"a{i}", "--target", "t")
    first = cli.json("automations", "list", "--limit", "2")
    assert len(first["items"]) == 2
    assert first["next_cursor"]
    assert f"--cursor {first['next_cursor']}" in cli.ok("automations", "list", "--limit", "2")
    second = cli.json("automations", "list", "--limit", "2", "--cursor", first["next_cursor"])
    assert {a["id"] for a in first["items"]}.isdisjoint({a["id"] for a in second["items"]})
    every = cli.json("automations", "list", "--limit", "2", "--all")
    assert len({a["id"] for a in every["items"]}) == 5
    assert every["next_cursor"] is None


def test_schedules(cli: Cli) -> None:
    automation_id = cli.json("automations", "create", "s", "--target", "t")["id"]
    out = cli.ok(
        "automations", "schedule", "add", automation_id,
        "--cron", "0 9 * * *", "--timezone", "Europe/Berlin", "--max-occurrences", "3",
    )  # fmt: skip
    assert "3 left" in out
    assert "2026-06-19T07:00:00" in out
    trigger_id = out.split()[3].rstrip(":")
    unbounded = cli.json(
        "automations", "schedule", "update", automation_id, trigger_id, "--unbounded"
    )
    assert unbounded["remaining_occurrences"] is None
    disabled = cli.json("automations", "schedule", "update", automation_id, trigger_id, "--disable")
    assert (disabled["enabled"], disabled["remaining_occurrences"]) == (False, None)
    budget = cli.json(
        "automations", "schedule", "update", automation_id, trigger_id, "--max-occurrences", "9"
    )
    assert budget["remaining_occurrences"] == 9
    shown = cli.ok("automations", "show", automation_id)
    assert "0 9 * * *" in shown
    assert "9 left" in shown

    bad = one_error_line(
        cli(
            "automations",
            "schedule",
            "add",
            automation_id,
            "--cron",
            "0 9 * *",
            "--timezone",
            "UTC",
        )
    )
    assert "cron" in bad
    both = cli(
        "automations", "schedule", "update", automation_id, trigger_id,
        "--unbounded", "--max-occurrences", "2",
    )  # fmt: skip
    assert "not both" in one_error_line(both)
    assert "removed" in cli.ok("automations", "schedule", "remove", automation_id, trigger_id)
    assert cli.json("automations", "show", automation_id)["schedules"] == []


def test_webhook_secrets_are_printed_once(h: Harness, cli: Cli) -> None:
    automation_id = cli.json("automations", "create", "w", "--target", "t")["id"]
    added = cli(
        "automations", "webhook", "add", automation_id, "--source", "github", "--event", "push"
    )
    assert added.code == 0, added
    assert "never shown again" in added.err
    secret = next(line for line in added.out.splitlines() if line.startswith("secret: ")).split()[1]
    assert secret.startswith("whsec_")
    trigger_id = added.out.split()[3]

    for args in (("automations", "show", automation_id), ("automations", "list")):
        assert secret not in cli.ok(*args)
        assert secret not in cli.ok(*args, "--json")
    assert "write-only" in cli.ok("automations", "show", automation_id)

    rotated = cli("automations", "webhook", "rotate", automation_id, trigger_id)
    assert rotated.code == 0, rotated
    new_secret = rotated.out.split("secret: ")[1].split()[0]
    assert new_secret != secret
    with connect(h.database.url) as conn:
        row = conn.execute(
            "SELECT secret FROM charter.webhook_triggers WHERE id = %s", (trigger_id,)
        ).fetchone()
    assert row is not None
    assert row[0] == new_secret
    assert new_secret not in cli.ok("automations", "show", automation_id, "--json")

    as_json = cli.json("automations", "webhook", "add", automation_id, "--source", "stripe")
    assert as_json["secret"].startswith("whsec_")
    bad = cli("automations", "webhook", "add", automation_id, "--source", "x", "--secret", "nope")
    assert "secret must be" in one_error_line(bad)
    assert "removed" in cli.ok("automations", "webhook", "remove", automation_id, trigger_id)


def test_plan_set_show_clear(cli: Cli, tmp_path: Path) -> None:
    automation_id = cli.json("automations", "create", "p", "--target", "t")["id"]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(PLAN))
    assert "2 step(s)" in cli.ok("automations", "plan", "set", automation_id, str(plan_file))
    table = cli.ok("automations", "plan", "show", automation_id)
    assert "http.request" in table
    assert "charter.submit" in table
    assert "transport, http_5xx" in table  # what the step retries
    assert cli.json("automations", "plan", "show", automation_id)["steps"] == PLAN["steps"]

    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"version": 2, "steps": []}))
    line = one_error_line(cli("automations", "plan", "set", automation_id, str(invalid)))
    assert "invalid plan" in line
    not_json = tmp_path / "broken.json"
    not_json.write_text("{")
    assert "is not valid JSON" in one_error_line(
        cli("automations", "plan", "set", automation_id, str(not_json))
    )
    missing = one_error_line(cli("automations", "plan", "set", automation_id, str(tmp_path / "no")))
    assert "cannot read" in missing

    assert "cleared" in cli.ok("automations", "plan", "clear", automation_id)
    assert "has no plan" in one_error_line(cli("automations", "plan", "show", automation_id))


def test_trigger_and_runs(cli: Cli, tmp_path: Path) -> None:
    automation_id = cli.json("automations", "create", "r", "--target", "box")["id"]
    no_plan = one_error_line(cli("automations", "trigger", automation_id))
    assert "has no plan" in no_plan
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(PLAN))
    cli.ok("automations", "plan", "set", automation_id, str(plan_file))

    out = cli.ok("automations", "trigger", automation_id, "--input", '{"n": 1}')
    assert out.startswith("run ")
    assert "is pending" in out
    run_id = out.split()[1]
    second = cli.json("automations", "trigger", automation_id)
    assert second["input"] == {}
    assert "not valid JSON" in one_error_line(
        cli("automations", "trigger", automation_id, "--input", "{nope")
    )
    cli.ok("automations", "pause", automation_id)
    assert "paused" in one_error_line(cli("automations", "trigger", automation_id))

    listed = cli.ok("runs", "list", "--automation", automation_id)
    assert run_id in listed
    assert second["id"] in listed
    pending = cli.json("runs", "list", "--status", "pending", "--automation", automation_id)
    assert {r["id"] for r in pending["items"]} == {run_id, second["id"]}
    assert cli.json("runs", "list", "--status", "failed")["items"] == []
    assert "status must be one of" in one_error_line(cli("runs", "list", "--status", "sent"))

    shown = cli.ok("runs", "show", run_id)
    assert "pending" in shown
    assert "plan snapshot" in shown
    assert "http.request" in shown
    detail = cli.json("runs", "show", run_id)
    assert detail["input"] == {"n": 1}
    assert detail["steps"] == []
    assert detail["plan"]["steps"] == PLAN["steps"]
    assert f"no run {uuid.UUID(int=0)}" in one_error_line(
        cli("runs", "show", str(uuid.UUID(int=0)))
    )


def test_help_and_unreachable_api(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    for group in (("automations",), ("automations", "schedule"), ("automations", "webhook"),
                  ("automations", "plan"), ("runs",)):  # fmt: skip
        assert cli(*group, "--help").code == 0
    monkeypatch.setattr(
        automations_cli,
        "client",
        lambda: Client("http://127.0.0.1:9", "ch_x", timeout=2),
    )
    assert "cannot reach the Charter API" in one_error_line(cli("automations", "list"))
