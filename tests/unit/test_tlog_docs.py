"""The Python example in docs/transparency-log.md runs, so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "transparency-log.md"
FENCE = re.compile(r"^```python\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def test_the_documented_example_runs() -> None:
    blocks = FENCE.findall(DOC.read_text())
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})
