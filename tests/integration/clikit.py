"""Running `charter ...` in-process through the real entry point, as the CLI tests do:
one-line errors and exit codes as a user sees them."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from charter.cli import main as cli_main


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_charter(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> Result:
    """`charter ARGS`, with what it printed and its exit code."""
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["charter", *args])
    try:
        cli_main.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    else:
        code = 0
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)
