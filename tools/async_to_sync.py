"""Write the blocking SDK client (src/charter/sdk/client.py) from the asyncio one (aio.py).

    python tools/async_to_sync.py           # rewrite client.py
    python tools/async_to_sync.py --check   # exit 1, with a diff, if client.py is stale

aio.py is the only hand-written client. The rewrite keeps its comments and docstrings
and its layout, and changes only:

- `if ASYNC: ... else: ...` statements: the `else:` body alone stays, dedented (an
  `if ASYNC:` without an `else:` goes away whole); the `ASYNC = True` line goes too,
  with the comment right above it;
- `async def` / `async with` / `async for` lose their `async`, and `await` goes;
- the names in NAMES and the dotted names in DOTTED, in code and, for the names, in
  comments and strings too (`await x` and `async with` likewise), so docstrings follow.

Then `ruff check --fix` sorts the imports, drops the ones left unused and makes
`yield from y` of `for x in y: yield x` (an async generator cannot `yield from`; the
fix is "unsafe" only for generators that are sent values, which these are not), and
`ruff format` lays the file out like the rest of the project.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import itertools
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "charter" / "sdk" / "aio.py"
TARGET = ROOT / "src" / "charter" / "sdk" / "client.py"
MARKER = "ASYNC"

HEADER = """\
# Generated from src/charter/sdk/aio.py by tools/async_to_sync.py: do not edit by hand.
# Change aio.py, then run `python tools/async_to_sync.py` (`make lint` checks the two agree).
"""

# One name for another, wherever the name stands alone.
NAMES = {
    "AsyncClient": "Client",
    "AsyncIterator": "Iterator",
    "asynccontextmanager": "contextmanager",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
    "aread": "read",
    "aiter_lines": "iter_lines",
    "anext": "next",
    "adrive": "drive",
    "arequest": "request",
}
# `module.name` for another dotted name, in code.
DOTTED = {("asyncio", "sleep"): "time.sleep"}

_WORD = re.compile(r"\b(" + "|".join(map(re.escape, NAMES)) + r")\b")
_KEYWORD = re.compile(r"\basync (?=def\b|with\b|for\b)|\bawait ")


def convert(source: str) -> str:
    """The blocking client's source, before ruff sorts and formats it."""
    return HEADER + _rewrite_tokens(_keep_sync_branches(source))


# --- `if ASYNC:` -------------------------------------------------------------------------


def _keep_sync_branches(source: str) -> str:
    """`source` with each `if ASYNC:` replaced by its `else:` body, and without the
    `ASYNC = ...` line and the comment lines right above it."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # 0-based lines [start, end), and the new
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(_is_marker(t) for t in node.targets):
            start = node.lineno - 1
            while start > 0 and lines[start - 1].lstrip().startswith("#"):
                start -= 1
            edits.append((start, _end(node), []))
        elif isinstance(node, ast.If) and _is_marker(node.test):
            if not lines[node.lineno - 1].lstrip().startswith("if "):
                _refuse(node.lineno, f"`if {MARKER}:` must be an `if` of its own, not an `elif`")
            edits.append((node.lineno - 1, _end(node), _else_body(node, lines)))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id == MARKER and not _replaced(node, edits):
            _refuse(node.lineno, f"{MARKER} may only be tested by `if {MARKER}:`")
    edits.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(edits):
        if start < end:
            _refuse(start + 1, f"`if {MARKER}:` inside another `if {MARKER}:`")
    for start, end, new in reversed(edits):
        lines[start:end] = new
    return "".join(lines)


def _replaced(node: ast.expr, edits: list[tuple[int, int, list[str]]]) -> bool:
    return any(start < node.lineno <= end for start, end, _ in edits)


def _is_marker(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == MARKER


def _end(node: ast.stmt) -> int:
    assert node.end_lineno is not None
    return node.end_lineno


def _refuse(line: int, why: str) -> NoReturn:
    raise SystemExit(f"{SOURCE.relative_to(ROOT)}:{line}: {why}")


def _else_body(node: ast.If, lines: list[str]) -> list[str]:
    """The lines after `else:` up to the end of the statement, one level less indented."""
    if not node.orelse:
        return []
    first = node.orelse[0]
    if lines[first.lineno - 1].lstrip().startswith("elif"):
        _refuse(first.lineno, f"`if {MARKER}:` takes an `else:`, not an `elif`")
    pattern = re.compile(" " * node.col_offset + r"else\s*:\s*(#.*)?\n?")
    between = range(_end(node.body[-1]), first.lineno - 1)
    found = [number for number in between if pattern.fullmatch(lines[number])]
    if not found:
        _refuse(node.lineno, f"the `else:` of `if {MARKER}:` is not on a line of its own")
    width = first.col_offset - node.col_offset
    return [_dedent(line, width) for line in lines[found[0] + 1 : _end(node)]]


def _dedent(line: str, width: int) -> str:
    blank = len(line) - len(line.lstrip(" "))
    return line[min(width, blank) :]


# --- names and keywords ------------------------------------------------------------------


def _rewrite_tokens(source: str) -> str:
    """Rename and drop tokens in place: the text between them stays as it is."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(position: tuple[int, int]) -> int:
        row, column = position
        return offsets[row - 1] + column

    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: list[tuple[int, int, str]] = []
    for index, token in enumerate(tokens):
        start, end = at(token.start), at(token.end)
        if token.type == tokenize.NAME and token.string in ("async", "await"):
            # The keyword and the space after it.
            edits.append((start, at(tokens[index + 1].start), ""))
        elif token.type == tokenize.NAME and token.string in NAMES:
            edits.append((start, end, NAMES[token.string]))
        elif token.type == tokenize.NAME and index + 2 < len(tokens):
            dotted = (token.string, tokens[index + 2].string)
            if tokens[index + 1].string == "." and dotted in DOTTED:
                edits.append((start, at(tokens[index + 2].end), DOTTED[dotted]))
        elif token.type in _TEXT:
            edits.append((start, end, _rewrite_text(token.string)))
    out = source
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


# Comments and strings; an f-string's literal parts are their own tokens from 3.12 on.
_TEXT = {tokenize.COMMENT, tokenize.STRING} | (
    {tokenize.FSTRING_MIDDLE} if hasattr(tokenize, "FSTRING_MIDDLE") else set()
)


def _rewrite_text(text: str) -> str:
    return _WORD.sub(lambda m: NAMES[m.group(1)], _KEYWORD.sub("", text))


# --- ruff --------------------------------------------------------------------------------


def _ruff(*args: str, source: str) -> str:
    command = [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(TARGET), "-"]
    done = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        command, input=source, capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed on the generated client:\n{done.stderr}")
    return done.stdout


def generate() -> str:
    """What client.py should hold now."""
    code = convert(SOURCE.read_text())
    fixes = ("--fix", "--unsafe-fixes", "--select", "I001,F401,UP028")
    code = _ruff("check", *fixes, "--quiet", source=code)
    return _ruff("format", "--quiet", source=code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if client.py is not what would be written"
    )
    options = parser.parse_args(argv)
    wanted = generate()
    current = TARGET.read_text() if TARGET.exists() else ""
    if not options.check:
        if current != wanted:
            TARGET.write_text(wanted)
        return 0
    if current == wanted:
        return 0
    relative = TARGET.relative_to(ROOT)
    diff = difflib.unified_diff(
        current.splitlines(keepends=True),
        wanted.splitlines(keepends=True),
        f"{relative} (as it is)",
        f"{relative} (as aio.py makes it)",
        n=1,
    )
    shown = list(diff)
    sys.stderr.writelines(shown[:60])
    if len(shown) > 60:
        sys.stderr.write(f"... {len(shown) - 60} more diff lines\n")
    sys.stderr.write(f"{relative} is stale: run `python tools/async_to_sync.py`\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
