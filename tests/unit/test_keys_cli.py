"""`charter keys new|public` through the real CLI app."""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from charter.cli.main import app, main
from charter.core.ed25519 import check_public_key, read_secret_key_file
from charter.core.errors import KeyFileError

runner = CliRunner()
HEX64 = re.compile(r"[0-9a-f]{64}\n")


def test_new_writes_a_0600_key_and_prints_its_public_key(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    result = runner.invoke(app, ["keys", "new", "--out", str(path)])
    assert result.exit_code == 0, result.output
    assert HEX64.fullmatch(result.stdout)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    public = result.stdout.strip()
    assert read_secret_key_file(path).public_key_hex == public
    check_public_key(public)


def test_new_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    runner.invoke(app, ["keys", "new", "--out", str(path)])
    before = path.read_bytes()
    result = runner.invoke(app, ["keys", "new", "--out", str(path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, KeyFileError)
    assert "--force" in result.exception.message
    assert path.read_bytes() == before


def test_new_with_force_replaces_the_key(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    first = runner.invoke(app, ["keys", "new", "--out", str(path)]).stdout
    path.chmod(0o644)
    result = runner.invoke(app, ["keys", "new", "--out", str(path), "--force"])
    assert result.exit_code == 0, result.output
    assert result.stdout != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_secret_key_file(path).public_key_hex == result.stdout.strip()


def test_public_prints_the_public_key(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    path.write_text(bytes(range(32)).hex() + "\n")
    path.chmod(0o600)
    result = runner.invoke(app, ["keys", "public", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8\n"


def test_public_of_a_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["keys", "public", str(tmp_path / "missing.key")])
    assert result.exit_code != 0
    assert isinstance(result.exception, KeyFileError)
    assert "does not exist" in result.exception.message


def test_public_refuses_a_group_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "actor.key"
    path.write_text(bytes(range(32)).hex())
    path.chmod(0o640)
    result = runner.invoke(app, ["keys", "public", str(path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, KeyFileError)
    assert "group or others (mode 0640)" in result.exception.message
    assert result.stdout == ""


def test_main_prints_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.key"
    monkeypatch.setattr(sys, "argv", ["charter", "keys", "public", str(missing)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: key file {missing} does not exist\n"


def test_keys_without_a_command_shows_help() -> None:
    result = runner.invoke(app, ["keys"])
    assert "new" in result.output
    assert "public" in result.output
