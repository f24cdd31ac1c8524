"""`charter log init|status` through the real CLI app: files, modes, refusals."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from charter.cli.main import app
from charter.core.errors import ConfigurationError
from charter.tlog.checkpoint import Cosigner
from charter.tlog.config import LogSettings, check_origin
from charter.tlog.merkle import EMPTY_ROOT
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
    assert not (home / "log" / "log.skey").exists()  # the key stays out of the mirrored dir

    # No witness named: a local one, labelled as not independent, cosigns from size 0.
    assert "not independent" in result.stdout
    policy = parse_policy(settings.policy_path.read_bytes())
    assert policy.quorum == "local"
    (local,) = policy.witnesses.values()
    assert local.url == (home / "local-witness").resolve().as_uri()
    assert stat.S_IMODE((home / "local-witness" / "witness.skey").stat().st_mode) == 0o600
    checkpoint = (home / "log" / "checkpoint").read_bytes()
    trusted = policy.verify_checkpoint(checkpoint)
    assert (trusted.checkpoint.size, trusted.checkpoint.root) == (0, EMPTY_ROOT)
    assert trusted.witnesses == ("local",)

    status = runner.invoke(app, ["log", "status", "--json"])
    assert json.loads(status.stdout) == {
        "origin": "charter.example.com/prod",
        "size": 0,
        "cosignatures": 1,
        "halted": None,
        "halt_message": None,
        "witnessing": {
            "mode": "local",
            "witnesses": ["local"],
            "warning": "local witness only: not independent, a restore of the whole host is"
            " undetectable",
        },
    }
    text = runner.invoke(app, ["log", "status"]).stdout
    assert "None" not in text
    assert "halted       no\n" in text
    assert "warning      local witness only: not independent" in text


def test_init_with_independent_witnesses_names_them_with_a_quorum(home: Path) -> None:
    keys = [Cosigner.generate(f"w{i}.example.org/w").verifier().vkey for i in (1, 2, 3)]
    args = ["log", "init", "--origin", "charter.example.com/prod", "--witness-quorum", "2"]
    for i, key in enumerate(keys, start=1):
        args += ["--witness", f"https://w{i}.example.org/witness/", "--witness-key", key]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    policy = parse_policy(LogSettings.from_env().policy_path.read_bytes())
    assert [(w.name, w.url) for w in policy.witnesses.values()] == [
        (f"w{i}", f"https://w{i}.example.org/witness") for i in (1, 2, 3)
    ]
    assert policy.quorum == "witnesses"
    assert policy.groups["witnesses"].threshold == 2
    assert not (home / "local-witness").exists()
    status = json.loads(runner.invoke(app, ["log", "status", "--json"]).stdout)
    assert status["witnessing"] == {
        "mode": "independent",
        "witnesses": ["w1", "w2", "w3"],
        "warning": None,
    }


def test_no_witness_is_an_explicit_choice_that_status_reports(home: Path) -> None:
    result = runner.invoke(app, ["log", "init", "--origin", "a.example/log", "--no-witness"])
    assert result.exit_code == 0, result.output
    assert "rollback or fork of the log is undetectable" in result.stdout
    policy = parse_policy(LogSettings.from_env().policy_path.read_bytes())
    assert (policy.quorum, dict(policy.witnesses)) == ("none", {})
    status = json.loads(runner.invoke(app, ["log", "status", "--json"]).stdout)
    assert status["witnessing"] == {
        "mode": "none",
        "witnesses": [],
        "warning": "no witness: a rollback or fork of the log is undetectable",
    }
    assert "undetectable" in runner.invoke(app, ["log", "status"]).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-witness", "--witness", "https://w.example", "--witness-key", "k"], "exclude"),
        (["--witness", "https://w.example"], "one --witness-key per --witness"),
        (["--witness", "ftp://w.example", "--witness-key", "k"], "http:// or https://"),
        (["--witness", "https://w.example", "--witness-key", "not-a-key"], "--witness-key"),
        (["--witness-quorum", "2"], "only 0 witness"),
    ],
)
def test_init_refuses_bad_witness_options_and_writes_nothing(
    home: Path, args: list[str], message: str
) -> None:
    result = runner.invoke(app, ["log", "init", "--origin", "a.example/log", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not any(home.iterdir())


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
    for origin in ("https://charter.example.com/prod", "http:charter.example.com", "urn:x"):
        bad = runner.invoke(app, ["log", "init", "--origin", origin])
        assert isinstance(bad.exception, ConfigurationError), origin
        assert "schema-less" in bad.exception.message
    # A host with a port is a schema-less prefix too.
    check_origin("charter.example.com:8443/prod")  # does not raise


def test_status_before_any_log_prints_no_python_none(home: Path) -> None:
    status = runner.invoke(app, ["log", "status"])
    assert status.exit_code == 0, status.output
    assert "None" not in status.stdout
    assert "origin       (no checkpoint yet)" in status.stdout
