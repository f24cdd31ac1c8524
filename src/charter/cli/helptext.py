"""How `--help` reads: help text flows to the terminal's width, and flags show no type.

Docstrings and help strings are wrapped in the source to its line length; typer keeps a
command's later paragraphs as written, so at a wide terminal their sentences would break
where the source did. `tidy` joins each paragraph's lines (a paragraph that starts with
`\\b` is kept as written, as click does), and gives flags an empty metavar so the help
shows no `<bool>` type for an option that takes no value.
"""

from __future__ import annotations

import inspect
from typing import Any

# The click command tree typer builds: click's own classes with older typer, its vendored
# copy (`typer._click`) with newer ones; only attributes both have are used.
Command = Any
Parameter = Any


def tidy(command: Command) -> Command:
    """`command` and every command under it, with help fit for any terminal width."""
    if command.help:
        command.help = unwrap(command.help)
    for param in command.params:
        _no_flag_type(param)
    help_option = _help_option(command)
    if help_option is not None:
        _no_flag_type(help_option)
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
    return command


def unwrap(text: str) -> str:
    """`text` with each paragraph on one line (before a `\\f`, as click reads it)."""
    shown, cut, rest = inspect.cleandoc(text).partition("\f")
    paragraphs = [
        paragraph if paragraph.startswith("\b") else " ".join(paragraph.split())
        for paragraph in shown.split("\n\n")
    ]
    return "\n\n".join(paragraphs) + cut + rest


def _no_flag_type(param: Parameter) -> None:
    flag = getattr(param, "is_flag", False) and not getattr(param, "count", False)
    if flag and param.metavar is None:
        param.metavar = ""


def _help_option(command: Command) -> Parameter | None:
    """The `--help` option click makes for `command` (made once, then kept)."""
    get = getattr(command, "get_help_option", None)
    return None if get is None else get(command.context_class(command))
