"""Ids typed by hand: a process named whole or by a unique prefix of its id."""

from __future__ import annotations

import typer

from charter.core.errors import UnknownProcess
from charter.sdk.client import Client

AMBIGUOUS_EXIT = 2


def resolve_process(api: Client, typed: str) -> str:
    """The id of the process `typed` names: itself, or the one process whose id starts
    with it. An ambiguous prefix prints the candidates and exits 2."""
    try:
        return api.process(typed).id
    except UnknownProcess:
        pass
    found = [p.id for p in api.processes(q=typed, limit=5).items]
    if not found:
        raise UnknownProcess(f"no process id is or starts with {typed!r}")
    if len(found) > 1:
        more = ", ..." if len(found) == 5 else ""
        typer.echo(
            f"error: {typed!r} is the start of several process ids: {', '.join(found[:4])}{more}"
            " — type more of it",
            err=True,
        )
        raise typer.Exit(AMBIGUOUS_EXIT)
    return found[0]
