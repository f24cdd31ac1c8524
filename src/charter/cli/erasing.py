"""`charter erase`: sign a `charter:erase` event with a key file and submit it, so that
personal values of a process's events are erased under the workflow's `erasure` rules.

There is no route of its own: the erasure is an event like any other (`POST /v1/events`),
decided, chained and logged as one. The command only builds its fixed input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from charter.cli import remote
from charter.core import pointers as json_pointers
from charter.core.ed25519 import read_secret_key_file
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.erasure import BASIS_PATTERN, HASH_PATTERN, REQUEST_PATTERN
from charter.dsl.model import ERASE_ACTION


def erase_input(basis: str, request: str, pointers: list[str], events: list[str]) -> JsonObject:
    """The input of the erase event; Malformed for a value the engine would refuse."""
    if not BASIS_PATTERN.fullmatch(basis):
        raise Malformed(f"--basis {basis!r}: a legal basis matching {BASIS_PATTERN.pattern}")
    if not REQUEST_PATTERN.fullmatch(request):
        raise Malformed(
            f"--request {request!r}: a ticket reference matching {REQUEST_PATTERN.pattern} "
            "(no free text: it stays in the permanent record)"
        )
    for pointer in pointers:
        if not json_pointers.is_pointer(pointer):
            raise Malformed(f"--pointer {pointer!r}: a JSON pointer such as /name")
    for event in events:
        if not HASH_PATTERN.fullmatch(event):
            raise Malformed(f"--event {event!r}: an event hash (64 lowercase hex characters)")
    scope: dict[str, JsonValue] = {
        "events": list(dict.fromkeys(events)) if events else "all",
        "pointers": list(dict.fromkeys(pointers)) if pointers else "all",
    }
    return {"basis": basis, "request": request, "scope": scope}


def erase(
    process: Annotated[str, typer.Argument(help="The process whose values to erase.")],
    basis: Annotated[
        str, typer.Option(help="The legal basis, one the workflow's erasure block lists.")
    ],
    request: Annotated[
        str, typer.Option(help="The data subject's request as a ticket reference (DSR-2026-0042).")
    ],
    key_file: Annotated[Path, typer.Option(help="The secret key file of an erasure role.")],
    pointer: Annotated[
        list[str] | None,
        typer.Option(
            "--pointer",
            metavar="POINTER",
            help="Erase only this personal field (a JSON pointer, e.g. /name); repeatable. "
            "Default: every personal field.",
            show_default=False,
        ),
    ] = None,
    event: Annotated[
        list[str] | None,
        typer.Option(
            "--event",
            metavar="HASH",
            help="Erase only the values of this event (its hash); repeatable. Default: "
            "every event of the process.",
            show_default=False,
        ),
    ] = None,
    retries: Annotated[
        int, typer.Option(min=0, help="How often to re-sign on the new head after a stale_prev.")
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")] = False,
) -> None:
    """Erase personal values of a process's events (GDPR Art. 17) with a signed
    charter:erase event.

    The values leave the disclosures kept beside the events; the process data keeps
    {"erased": true} where they, or anything computed from them, were. Every signature,
    chain link and log proof still verifies. The workflow's erasure block says who may
    erase, from which states and on which bases."""
    data = erase_input(basis, request, pointer or [], event or [])
    key = read_secret_key_file(key_file)

    def said_stale(retry: int) -> None:
        typer.echo(f"stale head; re-signed on the new head (retry {retry})", err=True)

    with remote.client() as api:
        accepted = api.submit(
            key, process, ERASE_ACTION, data, stale_retries=retries, on_stale=said_stale
        )
    if as_json:
        remote.print_json(accepted.raw)
        return
    typer.echo(f"erased: {process} seq {accepted.seq} hash {accepted.hash}")
