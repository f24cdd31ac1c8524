"""`charter witness init|show` and the key and known-logs files, through the real CLI app."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from charter.cli.main import app
from charter.core.errors import KeyFileError
from charter.tlog.checkpoint import CosignatureVerifier
from charter.witness.config import load_known_logs, read_cosigner_key
from charter.witness.errors import WitnessConfigError
from tests.unit.witnesskit import TestLog

runner = CliRunner()


def test_init_writes_a_private_key_its_vkey_and_the_known_logs(tmp_path: Path) -> None:
    log, rotated = TestLog(), TestLog()
    state = tmp_path / "w"
    args = ["witness", "init", "--name", "audit.example.org/w1", "--state", str(state)]
    result = runner.invoke(app, [*args, "--log", log.vkey, "--log", rotated.vkey])
    assert result.exit_code == 0, result.output
    vkey = result.stdout.strip()
    verifier = CosignatureVerifier.from_vkey(vkey)  # type 0x04
    assert verifier.name == "audit.example.org/w1"
    key = state / "witness.skey"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert read_cosigner_key(key).verifier() == verifier
    assert (state / "witness.vkey").read_text() == vkey + "\n"
    known = load_known_logs(state / "logs.policy")
    assert known.keys(log.origin) == (log.key.verifier(), rotated.key.verifier())

    again = runner.invoke(app, args)
    assert isinstance(again.exception, KeyFileError)
    assert read_cosigner_key(key).verifier() == verifier

    shown = runner.invoke(app, ["witness", "show", "--state", str(state), "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert report["witness"] == vkey
    assert report["logs"][0]["origin"] == log.origin
    assert report["logs"][0]["size"] is None
    assert len(report["logs"][0]["keys"]) == 2


def test_init_refuses_a_bad_log_vkey_before_writing(tmp_path: Path) -> None:
    witness_vkey = runner.invoke(
        app, ["witness", "init", "--name", "a.example/w", "--state", str(tmp_path / "a")]
    ).stdout.strip()
    state = tmp_path / "b"
    result = runner.invoke(
        app,
        ["witness", "init", "--name", "b.example/w", "--state", str(state), "--log", witness_vkey],
    )
    assert isinstance(result.exception, WitnessConfigError)  # a witness key is no log key
    assert not state.exists()


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "w"
    runner.invoke(app, ["witness", "init", "--name", "a.example/w", "--state", str(state)])
    (state / "witness.skey").chmod(0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        read_cosigner_key(state / "witness.skey")
    (state / "witness.skey").chmod(0o600)
    (state / "witness.skey").write_text("PRIVATE+KEY+nonsense\n")
    with pytest.raises(KeyFileError, match="does not hold a witness secret key") as error:
        read_cosigner_key(state / "witness.skey")
    assert "nonsense" not in error.value.message


def test_two_known_keys_with_one_key_id_are_refused(tmp_path: Path) -> None:
    log = TestLog()
    (tmp_path / "logs.policy").write_text(f"log {log.vkey}\nlog {log.vkey}\nquorum none\n")
    with pytest.raises(WitnessConfigError):
        load_known_logs(tmp_path / "logs.policy")
