"""Every workflow shown in docs/dsl.md and examples/ is checked, so the docs cannot rot."""

from __future__ import annotations

import html
import itertools
import re
from pathlib import Path

import pytest

from charter.core import ijson
from charter.core.jsontypes import JsonValue
from charter.dsl.validate import Problem, validate_workflow

ROOT = Path(__file__).parents[2]
DSL_DOC = ROOT / "docs" / "dsl.md"
FENCE = re.compile(r"^```json (workflow|broken-workflow)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
# A broken example may be followed by "gives" and a table of its exact problems.
ROW = re.compile(r"^\| `(?P<pointer>[^`]*)` \| (?P<message>.*) \|$")


def blocks(kind: str) -> list[tuple[int, JsonValue, str]]:
    """(line, parsed workflow, the text after the block) for each block of `kind`."""
    text = DSL_DOC.read_text()
    found = []
    for match in FENCE.finditer(text):
        if match[1] == kind:
            line = text.count("\n", 0, match.start()) + 1
            found.append((line, ijson.loads(match[2]), text[match.end() :]))
    return found


def expected_table(after: str) -> list[Problem] | None:
    lines = after.lstrip("\n").splitlines()
    if not lines or lines[0] != "gives":
        return None
    # The table right after "gives", up to the first line that is not one of its rows.
    rest = itertools.dropwhile(lambda line: not line.strip(), lines[1:])
    table = itertools.takewhile(lambda line: line.startswith("|"), rest)
    rows = [ROW.match(line) for line in table if line.startswith("| `")]
    return [Problem(m["pointer"], html.unescape(m["message"])) for m in rows if m]


def test_the_reference_has_examples_of_both_kinds() -> None:
    assert len(blocks("workflow")) >= 5
    assert len(blocks("broken-workflow")) >= 3


@pytest.mark.parametrize(("line", "doc"), [(line, doc) for line, doc, _ in blocks("workflow")])
def test_documented_workflows_validate(line: int, doc: JsonValue) -> None:
    assert validate_workflow(doc) == [], f"docs/dsl.md line {line}"


@pytest.mark.parametrize(("line", "doc", "after"), blocks("broken-workflow"))
def test_documented_broken_workflows_have_problems(line: int, doc: JsonValue, after: str) -> None:
    problems = validate_workflow(doc)
    assert problems, f"docs/dsl.md line {line} should be broken"
    table = expected_table(after)
    if table is not None:
        found = [(p.pointer, p.message) for p in problems]
        assert found == [(t.pointer, t.message) for t in table], f"docs/dsl.md line {line}"


def test_a_documented_table_is_checked() -> None:
    assert any(expected_table(after) for _, _, after in blocks("broken-workflow"))


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.json")), ids=lambda p: p.name)
def test_example_files_validate(path: Path) -> None:
    assert validate_workflow(ijson.loads(path.read_bytes())) == []
