"""`charter log init|status` through the real CLI app: files, modes, refusals."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from charter.cli.main import app
from charter.core.errors import ConfigurationError
from charter.tlog.checkpoint import open_checkpoint
from charter.tlog.config import LogSettings
from charter.tlog.merkle import EMPTY_ROOT
from charter.tlog.note import Ed25519Verifier
from charter.tlog.policy import parse_policy

runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("CHARTER_LOG_DIR", "CHARTER_LOG_KEY_FILE", "CHARTER_LOG_SALT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CHARTER_HOME", str(tmp_path))
    return tmp_path


def test_init_writes_the_key_salt_policy_and_the_empty_log(home: Path) -> None:
    result = runner.invoke(app, ["log", "init", "--origin", "charter.example.com/prod"])
    assert result.exit_code == 0, result.output
    settings = LogSettings.from_env({"CHARTER_HOME": str(home)})
    assert stat.S_IMODE(settings.key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.salt_file.stat().st_mode) == 0o600
    assert len(settings.salt()) == 32
    vkey = (settings.key_file.parent / "log.vkey").read_text().strip()
    assert settings.signer().verifier().vkey == vkey
    assert f"vkey       {vkey}" in result.stdout
    policy = parse_policy((settings.key_file.parent / "charter.policy").read_bytes())
    assert policy.quorum == "none"
    checkpoint = (home / "log" / "checkpoint").read_bytes()
    opened = open_checkpoint(checkpoint, [Ed25519Verifier.from_vkey(vkey)])
    assert (opened.checkpoint.size, opened.checkpoint.root) == (0, EMPTY_ROOT)
    assert not (home / "log" / "log.skey").exists()  # the key stays out of the mirrored dir

    status = runner.invoke(app, ["log", "status", "--json"])
    assert json.loads(status.stdout) == {
        "origin": "charter.example.com/prod",
        "size": 0,
        "cosignatures": 0,
        "halted": None,
        "halt_message": None,
    }


def test_init_refuses_to_run_twice_and_bad_origins(home: Path) -> None:
    assert runner.invoke(app, ["log", "init", "--origin", "a.example/log"]).exit_code == 0
    key = (home / "log-key" / "log.skey").read_bytes()
    again = runner.invoke(app, ["log", "init", "--origin", "a.example/log"])
    assert isinstance(again.exception, ConfigurationError)
    assert "already exists" in again.exception.message
    assert (home / "log-key" / "log.skey").read_bytes() == key
    for origin in ("has space", "plus+sign", ""):
        bad = runner.invoke(app, ["log", "init", "--origin", origin])
        assert isinstance(bad.exception, ConfigurationError), origin
        assert "the origin must be" in bad.exception.message
