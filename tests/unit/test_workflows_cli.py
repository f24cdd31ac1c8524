"""`charter workflows validate` through the real CLI app."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from charter.cli.main import app
from charter.dsl.canonical import version_hash

EXAMPLE = Path(__file__).parents[2] / "examples" / "onboarding.json"
RUNNER = CliRunner()
WIDE = {"COLUMNS": "250"}  # keep table rows on one line


def broken() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(EXAMPLE.read_text())
    doc["actions"]["approve"]["to"] = "approved"
    doc["actions"]["open"]["role"] = ["customer", "[bold]admin"]
    return doc


def test_a_valid_file_prints_ok_with_its_version(tmp_path: Path) -> None:
    target = tmp_path / "onboarding.json"
    shutil.copy(EXAMPLE, target)
    result = RUNNER.invoke(app, ["workflows", "validate", str(target)], env=WIDE)
    short = version_hash(json.loads(EXAMPLE.read_text()))[:12]
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{target}: ok (version {short})\n"


def test_problems_are_listed_in_a_table_and_exit_1(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    shutil.copy(EXAMPLE, good)
    bad.write_text(json.dumps(broken()))
    result = RUNNER.invoke(app, ["workflows", "validate", str(bad), str(good)], env=WIDE)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"{good}: ok (version " in lines[0]
    rows = [line for line in lines if str(bad) in line]
    assert len(rows) == 2
    assert "/actions/approve/to" in rows[0]
    assert "unknown state 'approved'" in rows[0]
    # Messages are printed as text, never as rich markup.
    assert "/actions/open/role/1" in rows[1]
    assert "unknown role '[bold]admin'" in rows[1]
    assert lines[-1] == "2 problem(s)"


def test_malformed_and_missing_files_exit_2(tmp_path: Path) -> None:
    duplicate = tmp_path / "dup.json"
    duplicate.write_text('{"dsl": 2, "dsl": 2}')
    missing = tmp_path / "missing.json"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken()))
    result = RUNNER.invoke(
        app, ["workflows", "validate", str(duplicate), str(missing), str(bad)], env=WIDE
    )
    assert result.exit_code == 2
    assert f"{duplicate}: not I-JSON: " in result.stderr
    assert "duplicate" in result.stderr
    assert f"{missing}: cannot read: " in result.stderr
    assert "unknown state 'approved'" in result.stdout


def test_validate_needs_a_file() -> None:
    result = RUNNER.invoke(app, ["workflows", "validate"])
    assert result.exit_code == 2
    assert "Missing argument" in result.output


def test_the_installed_entry_point_exits_1_on_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken()))
    done = subprocess.run(
        [sys.executable, "-m", "charter", "workflows", "validate", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "unknown state 'approved'" in done.stdout
    assert done.returncode == 1


def test_json_lists_each_files_status_problems_and_warnings(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    shutil.copy(EXAMPLE, good)
    bad.write_text(json.dumps(broken()))
    missing = tmp_path / "missing.json"
    result = RUNNER.invoke(
        app, ["workflows", "validate", "--json", str(good), str(bad), str(missing)]
    )
    assert result.exit_code == 2  # the worst: a file that cannot be read
    files = json.loads(result.stdout)["files"]
    assert [f["status"] for f in files] == ["ok", "problems", "unreadable"]
    assert files[0]["version"] == version_hash(json.loads(EXAMPLE.read_text()))
    assert files[0]["problems"] == []
    pointers = {p["pointer"] for p in files[1]["problems"]}
    assert "/actions/approve/to" in pointers
    assert files[2]["error"].startswith("cannot read: ")
    only_bad = RUNNER.invoke(app, ["workflows", "validate", "--json", str(bad)])
    assert only_bad.exit_code == 1
