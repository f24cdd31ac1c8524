"""The repository's texts stand on their own: no pointer to a document that is not in it,
and every `docs/…` page a comment or a page names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".sql", ".js", ".html", ".css", ".json", ".toml", ".lark", ".txt"}
# Built from pieces so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        (
            r"(?-i:DESIGN)" + r"\.md",  # docs/design.md is ours: only the upper-case name
            r"DESIGN" + " \u00a7",
            "^(?!.*RFC [0-9]{4}).*\u00a7",  # a section sign is for RFC sections only
            r"\b" + "iss" + r"ue [0-9]+",
            r"\b" + "axi" + r"oms? ?[0-9]",
            r"\b(first|second) " + "se" + r"ed\b",
            r"STYLE" + "(\\.md| \u00a7)",
            r"shared " + "design",
            r"\.\./" + "shared",
        )
    ),
    re.IGNORECASE,
)
# Tools that were used to look at the code belong in bench/RESULTS.md's history, if anywhere.
TOOLS = re.compile("py-" + "spy|c" + "Profile|pyinstru" + "ment", re.IGNORECASE)
HISTORY = ROOT / "bench" / "RESULTS.md"
DOC_REFERENCE = re.compile(r"\bdocs/([a-z0-9-]+\.md)")


def _texts() -> list[Path]:
    roots = [ROOT / "src", ROOT / "tests", ROOT / "docs", ROOT / "bench"]
    files = [p for r in roots for p in r.rglob("*") if p.suffix in TEXT_SUFFIXES]
    files += [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
    return sorted(p for p in files if p.is_file() and ".venv" not in p.parts)


TEXTS = _texts()


def test_there_are_texts_to_check() -> None:
    assert len(TEXTS) > 200


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pointer_to_a_text_outside_the_repository(path: Path) -> None:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    tools = TOOLS if path != HISTORY else None
    found = [
        f"{i}: {line.strip()}"
        for i, line in enumerate(lines, 1)
        if OUTSIDE.search(line) or (tools and tools.search(line))
    ]
    assert not found, f"{path.relative_to(ROOT)} points outside the repository:\n" + "\n".join(
        found
    )


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_docs_page_named_exists(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    missing = sorted({m for m in DOC_REFERENCE.findall(text) if not (ROOT / "docs" / m).exists()})
    assert not missing, f"{path.relative_to(ROOT)} names docs pages that do not exist: {missing}"
