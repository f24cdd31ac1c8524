"""Usage errors of the real entry points (`python -m charter` and the installed `charter`
script), as a user meets them: click's usage line and one `Error:` line, exit 2, never a
traceback. Runs no database: every case fails (or helps) before a command starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.processes import charter_env

SCRIPT = Path(sys.executable).parent / "charter"
ENTRY_POINTS = {
    "python -m charter": [sys.executable, "-m", "charter"],
    "charter script": [str(SCRIPT)],
}

USAGE_ERRORS = {
    "bogus command": (["bogus"], "No such command 'bogus'"),
    "bogus subcommand": (["db", "bogus"], "No such command 'bogus'"),
    "missing argument": (["show"], "Missing argument"),
    "missing option": (["tokens", "create"], "Missing option '--scope'"),
    "unknown option": (["verify", "--no-such-flag"], "No such option: --no-such-flag"),
    "option without its value": (["verify", "--bundle"], "requires an argument"),
    "bad option value": (["up", "--port", "abc"], "Invalid value for '--port'"),
}


def run(
    entry: str, args: list[str], env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    if entry == "charter script" and not SCRIPT.exists():
        pytest.skip(f"no installed script at {SCRIPT}")
    return subprocess.run(
        [*ENTRY_POINTS[entry], *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=charter_env(**(env_extra or {})),
        check=False,
    )


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_a_usage_error_is_a_short_message_and_exit_2(entry: str, case: str) -> None:
    args, expected = USAGE_ERRORS[case]
    result = run(entry, args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("Error: ")
    assert expected in lines[-1]
    assert len(lines) <= 3  # at most the usage line, the --help hint and the error


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("args", [["--help"], ["show", "--help"], ["db", "--help"]])
def test_help_exits_0(entry: str, args: list[str]) -> None:
    result = run(entry, args)
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_charter_error_is_still_one_line_and_exit_1(tmp_path: Path) -> None:
    result = run("python -m charter", ["keys", "public", str(tmp_path / "missing.key")])
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: ")


def test_under_json_a_charter_error_is_json_with_its_code(tmp_path: Path) -> None:
    result = run(
        "python -m charter",
        ["show", "some-process", "--json"],
        env_extra={"CHARTER_API_URL": "http://127.0.0.1:9", "CHARTER_TOKEN": "t"},
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    error = json.loads(line)["error"]
    assert error["code"] == "api_unavailable"
    assert error["message"].startswith("cannot reach the Charter API at http://127.0.0.1:9")
    # After `--`, --json is an argument, not the option: the error stays a line of text.
    plain = run("python -m charter", ["keys", "public", "--", "--json"])
    assert plain.returncode == 1
    assert plain.stderr.startswith("error: ")
