"""The built wheel carries everything Charter reads at run time besides its modules:
migrations, queries, the schema snapshot, the DSL grammar, the example workflows and the
console's assets. (.ci/run installs that wheel in a fresh venv and runs the demo.)"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "charter"


def test_the_wheel_holds_every_data_file_of_the_package(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("charter-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        inside = set(archive.namelist())
    data = {
        "charter/" + path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    assert {"charter/sql/schema.snapshot.sql", "charter/console/static/index.html"} <= data
    assert data - inside == set()
    assert "charter/cli/main.py" in inside
    metadata = next(name for name in inside if name.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "charter = charter.cli.main:main" in archive.read(metadata).decode()
