"""`charter db status --json`: every migration as data, for scripts and deploy checks."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from charter.cli.main import app
from charter.db.migrate import available_migrations


def test_status_json_lists_every_migration_applied(database_url: str) -> None:
    result = CliRunner().invoke(
        app, ["db", "status", "--json"], env={"CHARTER_DATABASE_URL": database_url}
    )
    assert result.exit_code == 0, result.output
    migrations = json.loads(result.stdout)["migrations"]
    assert [m["version"] for m in migrations] == [m.version for m in available_migrations()]
    for migration in migrations:
        assert migration["known"] is True
        assert migration["checksum_matches"] is True
        assert migration["applied_at"].endswith("Z")


def test_status_says_when_the_log_has_no_witness(database_url: str, tmp_path: Path) -> None:
    env = {"CHARTER_DATABASE_URL": database_url, "CHARTER_HOME": str(tmp_path)}
    runner = CliRunner()
    result = runner.invoke(app, ["db", "status", "--json"], env=env)
    assert json.loads(result.stdout)["log"] is None  # no log configured
    init = ["log", "init", "--origin", "db.test/log", "--no-witness"]
    assert runner.invoke(app, init, env=env).exit_code == 0
    result = runner.invoke(app, ["db", "status", "--json"], env=env)
    assert json.loads(result.stdout)["log"] == {
        "mode": "none",
        "witnesses": [],
        "warning": "no witness: a rollback or fork of the log is undetectable",
    }
    text = runner.invoke(app, ["db", "status"], env=env).stdout
    assert "transparency log: witnessing none: no witness: a rollback or fork" in text
