"""What `make run` and `make test` install, read from `make -n` (nothing is run): the
demo gets Charter and its runtime dependencies only, the tests add the development
extras, both pinned by the lock, and `make test` after `make run` adds just the extras."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def planned(target: str, venv: Path) -> list[str]:
    """The commands `make TARGET` would run with its virtual environment at `venv`."""
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [line for line in done.stdout.splitlines() if "pip install" in line]


def test_make_run_installs_the_runtime_only_from_the_lock(tmp_path: Path) -> None:
    installs = planned("run", tmp_path / "venv")
    charter = [line for line in installs if line.rstrip().endswith(" -e .")]
    assert len(charter) == 1, installs
    assert "-c constraints.txt" in charter[0]
    assert not any("[dev]" in line for line in installs), installs


def test_make_test_installs_the_dev_extras_from_the_lock(tmp_path: Path) -> None:
    installs = planned("test", tmp_path / "venv")
    dev = [line for line in installs if "'.[dev]'" in line]
    assert len(dev) == 1, installs
    assert "-c constraints.txt" in dev[0]


def test_make_test_after_make_run_adds_only_the_dev_extras(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".runtime").touch()  # what `make run` leaves, newer than the lock
    installs = planned("test", venv)
    assert len(installs) == 1, installs
    assert "'.[dev]'" in installs[0]
    assert planned("run", venv) == []
