"""`charter --version` and the help of every command, through the real entry point:
flags show no `<bool>` type, and at a wide terminal no sentence is broken where the
source happened to wrap it."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from importlib.metadata import version

import pytest
import typer

from charter.cli import main as cli_main
from charter.cli.helptext import Command

WIDE = "200"


def run(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    monkeypatch.setenv("COLUMNS", WIDE)
    monkeypatch.setattr(sys, "argv", ["charter", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    assert exited.value.code == 0
    return capsys.readouterr().out


def commands(group: Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in sorted(getattr(group, "commands", {}).items()):
        yield from commands(command, (*path, name))


def command_at(path: tuple[str, ...]) -> Command:
    found: Command = typer.main.get_command(cli_main.app)
    for name in path:
        found = found.commands[name]
    return found


EVERY_COMMAND = list(commands(typer.main.get_command(cli_main.app)))


def test_version_prints_the_package_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["--version"], monkeypatch, capsys).strip() == f"charter {version('charter')}"


def test_there_are_many_commands() -> None:
    assert len(EVERY_COMMAND) > 50
    assert ("submit",) in EVERY_COMMAND
    assert ("log", "status") in EVERY_COMMAND


def _flat(text: str) -> list[str]:
    """The help's lines without the panels' borders, whitespace collapsed."""
    return [" ".join(re.sub(r"[│╭╮╰╯─]", " ", line).split()) for line in text.splitlines()]


@pytest.mark.parametrize("path", EVERY_COMMAND, ids=lambda path: " ".join(path) or "charter")
def test_help_has_no_bool_type_and_no_sentence_broken_by_the_source(
    path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = run([*path, "--help"], monkeypatch, capsys)
    assert "<bool>" not in shown
    lines = _flat(shown)
    command = command_at(path)
    paragraphs = inspect.cleandoc(command.help or "").partition("\f")[0].split("\n\n")
    for paragraph in paragraphs:
        if paragraph.startswith("\b"):
            continue  # kept as written on purpose
        # Its start, up to where a 200-column terminal itself may wrap, is on one line.
        words = " ".join(paragraph.split())
        head = words[:150].rsplit(" ", 1)[0] if len(words) > 150 else words
        head = re.sub(r"\[/?[a-z ]+\]", "", head)  # rich markup is not shown
        assert any(head in line for line in lines), (head, shown)
