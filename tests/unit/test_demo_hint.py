"""The demo's closing hint is one line that works as printed, pasted into a shell where
`charter` is not on the PATH: it exports the API's address and the admin token, and runs
the very `charter` executable that is running the demo."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from charter.demo import charter_program, explore_command


def test_the_line_exports_the_api_and_the_token_and_runs_this_charter() -> None:
    hint = explore_command(
        "http://127.0.0.1:8421", Path("/h/admin-token"), "demo-1", "/clone/.venv/bin/charter"
    )
    assert hint == (
        'export CHARTER_API_URL=http://127.0.0.1:8421 CHARTER_TOKEN="$(cat /h/admin-token)"'
        " && /clone/.venv/bin/charter history demo-1"
    )


def test_the_default_api_is_named_too() -> None:
    hint = explore_command(
        "http://127.0.0.1:8420", Path("/h/admin-token"), "demo-1", "/usr/bin/charter"
    )
    assert hint.startswith("export CHARTER_API_URL=http://127.0.0.1:8420 CHARTER_TOKEN=")


def test_paths_with_spaces_are_quoted() -> None:
    hint = explore_command(
        "http://127.0.0.1:8420",
        Path("/my home/admin-token"),
        "demo-1",
        charter_program("/my clone/bin/charter"),
    )
    assert "\"$(cat '/my home/admin-token')\"" in hint
    assert hint.endswith("&& '/my clone/bin/charter' history demo-1")


def test_the_program_is_the_script_that_runs_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / ".venv" / "bin" / "charter"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    # `make run` starts `.venv/bin/charter`: relative to the clone, shown absolute.
    assert charter_program(".venv/bin/charter") == str(script)
    # Found on the PATH (a wheel installed in an activated venv): its full path.
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}/usr/bin")
    assert charter_program("charter") == str(script)


def test_python_dash_m_charter_is_shown_as_such() -> None:
    main = str(Path(sys.modules["charter"].__file__ or "").parent / "__main__.py")
    assert charter_program(main) == f"{sys.executable} -m charter"
