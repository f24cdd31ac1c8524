"""`--json` on `charter tokens create`, `charter machine register` and `charter verify`,
and errors under `--json` as JSON with their code, through the real entry point."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from charter.cli import main as cli_main
from charter.db.database import Database
from tests.integration.apikit import Harness, bearer, make_harness
from tests.integration.liveserver import live_server


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def error(self) -> dict[str, Any]:
        """The one JSON error object on stderr."""
        [line] = self.err.strip().splitlines()
        body = json.loads(line)
        assert set(body) == {"error"}
        error = body["error"]
        assert isinstance(error, dict)
        return error


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


@pytest.fixture
def cli(
    h: Harness,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> Cli:
    monkeypatch.setenv("CHARTER_DATABASE_URL", h.database.url)
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path / "home"))
    return Cli(monkeypatch, capsys)


def test_tokens_create_json_gives_the_token_once_with_its_record(h: Harness, cli: Cli) -> None:
    made = cli("tokens", "create", "--scope", "processes:read", "--scope", "automations:read",
               "--name", "ci", "--principal", "bot", "--json")  # fmt: skip
    assert made.code == 0, made
    assert made.err == ""
    record = json.loads(made.out)
    assert set(record) == {"token", "id", "name", "principal", "scopes", "created_at",
                           "revoked_at"}  # fmt: skip
    assert record["name"] == "ci"
    assert record["principal"] == "bot"
    assert sorted(record["scopes"]) == ["automations:read", "processes:read"]
    assert record["revoked_at"] is None
    assert h.http.get("/v1/workflows", headers=bearer(record["token"])).status_code == 200
    listed = json.loads(cli("tokens", "list", "--json").out)["tokens"]
    assert record["id"] in [t["id"] for t in listed]


def test_tokens_create_json_refuses_an_unknown_scope_as_json(cli: Cli) -> None:
    refused = cli("tokens", "create", "--scope", "everything", "--json")
    assert refused.code == 1
    assert refused.out == ""
    error = refused.error()
    assert error["code"]
    assert "everything" in error["message"]


def test_machine_register_json_gives_the_machine_and_its_key_file(
    h: Harness, cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = h.token("automations:write", principal="ops")
    with live_server(h.http.app) as url:
        monkeypatch.setenv("CHARTER_API_URL", url)
        monkeypatch.setenv("CHARTER_TOKEN", token)
        made = cli("machine", "register", "--target", "laptop", "--id", "m-json", "--json")
        again = cli("machine", "register", "--target", "laptop", "--id", "m-json", "--json")
    assert made.code == 0, made
    machine = json.loads(made.out)
    assert machine["id"] == "m-json"
    assert machine["target"] == "laptop"
    assert machine["principal"] == "ops"
    assert len(machine["thumbprint"]) == 43  # base64url SHA-256 (RFC 7638)
    assert Path(machine["key_file"]) == tmp_path / "home" / "machines" / "m-json.key"
    assert Path(machine["key_file"]).is_file()
    # The key file exists already: refused, as JSON with its code.
    assert again.code == 1
    assert again.out == ""
    assert again.error()["code"]


def test_verify_json_reports_and_errors_are_json(h: Harness, cli: Cli, tmp_path: Path) -> None:
    process_id, _ = h.open_process()
    report = cli("verify", process_id, "--json")
    assert report.code == 0, report
    assert json.loads(report.out)["ok"] is True

    unknown = cli("verify", "no-such-process", "--json")
    assert unknown.code == 1
    assert unknown.out == ""
    assert unknown.error()["code"] == "unknown_process"

    missing = cli("verify", "--bundle", str(tmp_path / "absent.json"), "--json")
    assert missing.code == 2
    assert missing.out == ""
    assert missing.error() == {
        "code": "unreadable_file",
        "message": f"{tmp_path / 'absent.json'}: cannot read: No such file or directory",
        "path": str(tmp_path / "absent.json"),
    }

    usage = cli("verify", "--json")  # neither an id, --all nor --bundle
    assert usage.code == 2
    assert usage.error() == {
        "code": "usage_error",
        "message": "Invalid value: give exactly one of: a process id, --all, --bundle FILE",
    }
    # Without --json the same refusal is click's usage text.
    plain = cli("verify")
    assert plain.code == 2
    assert "Usage:" in plain.err
