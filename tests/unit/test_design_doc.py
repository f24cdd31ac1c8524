"""docs/design.md lists every error code with its HTTP status, and only those: the table
and the codes Charter's errors carry must agree both ways, so the page cannot rot."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
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


def _family(cls: type[CharterError]) -> list[type[CharterError]]:
    """`cls` and every class below it."""
    return [cls, *(below for sub in cls.__subclasses__() for below in _family(sub))]


def _charters(cls: type[CharterError]) -> bool:
    """Whether a Charter module defines `cls`: not a test's own class, nor a stand-in the
    SDK makes at run time for a code a server sent that the client does not know."""
    module = sys.modules.get(cls.__module__)
    return cls.__module__.startswith("charter.") and getattr(module, cls.__name__, None) is cls


def _defined() -> set[tuple[str, int]]:
    # Error classes live all over the package: import every module so each is defined.
    for module in pkgutil.walk_packages(charter.__path__, "charter."):
        if not module.name.endswith(".__main__"):  # running it starts the CLI
            importlib.import_module(module.name)
    from charter.api.errors import _HTTP_CODES  # statuses the framework raises by itself

    classes = [cls for cls in _family(CharterError) if _charters(cls)]
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
