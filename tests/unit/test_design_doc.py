"""docs/design.md lists every error code with its HTTP status, and only those: the table
and the codes Charter's errors carry must agree both ways, so the page cannot rot."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import charter
from charter.core.errors import CharterError

DOC = Path(__file__).resolve().parents[2] / "docs" / "design.md"
ROW = re.compile(r"^\| `(?P<code>[a-z0-9_]+)` \| (?P<statuses>[0-9, ]+) \| .+ \|$")


def _documented() -> set[tuple[str, int]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Error codes\n", 1)[1].split("\n## ", 1)[0]
    pairs = set()
    for line in section.splitlines():
        if match := ROW.match(line):
            pairs |= {(match["code"], int(s)) for s in re.findall(r"[0-9]{3}", match["statuses"])}
    return pairs


def _subclasses(cls: type[CharterError]) -> list[type[CharterError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _defined() -> set[tuple[str, int]]:
    # Error classes live all over the package: import every module so each is defined.
    for module in pkgutil.walk_packages(charter.__path__, "charter."):
        if not module.name.endswith(".__main__"):  # running it starts the CLI
            importlib.import_module(module.name)
    from charter.api.errors import _HTTP_CODES  # statuses the framework raises by itself

    classes: list[type[CharterError]] = [CharterError, *_subclasses(CharterError)]
    pairs = {(cls.code, cls.http_status) for cls in classes}
    return pairs | {(code, status) for status, code in _HTTP_CODES.items()}


def test_the_table_has_rows() -> None:
    assert len(_documented()) > 50


def test_every_code_the_errors_carry_is_in_the_table() -> None:
    missing = sorted(_defined() - _documented())
    assert not missing, f"docs/design.md lacks these (code, HTTP status) rows: {missing}"


def test_every_code_in_the_table_is_one_the_errors_carry() -> None:
    extra = sorted(_documented() - _defined())
    assert not extra, f"docs/design.md lists (code, HTTP status) no error carries: {extra}"
