"""`charter db status --json`: every migration as data, for scripts and deploy checks."""

from __future__ import annotations

import json

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
