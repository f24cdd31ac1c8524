"""`charter submit`: sign an event with a key file and submit it, retrying a stale head;
personal input fields go as disclosures beside a v2 envelope (the SDK's submit does it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from charter.cli import remote
from charter.core import ijson
from charter.core.ed25519 import read_secret_key_file
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject


def submit(
    key_file: Annotated[Path, typer.Option(help="The actor's secret key file.")],
    process: Annotated[str, typer.Option(help="The process id (new or existing).")],
    action: Annotated[str, typer.Option(help="The action to take.")],
    workflow: Annotated[
        str | None,
        typer.Option(
            help="The workflow path a new process runs; an existing process's own is used "
            "when left out.",
            show_default=False,
        ),
    ] = None,
    input_: Annotated[
        str, typer.Option("--input", help="The input: a JSON object, or @FILE to read one.")
    ] = "{}",
    retries: Annotated[
        int, typer.Option(min=0, help="How often to re-sign on the new head after a stale_prev.")
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")] = False,
) -> None:
    """Sign an event (prev = the process head, null for a new process) and submit it.

    For an existing process the workflow is the one it runs (read through the API, as the
    head is); a new process needs --workflow.

    Input fields the workflow marks personal ("x-personal": true) are sent as disclosures
    automatically: the signed envelope (v2) holds only their salted digests."""
    key = read_secret_key_file(key_file)
    data = _input(input_)

    def said_stale(retry: int) -> None:
        typer.echo(f"stale head; re-signed on the new head (retry {retry})", err=True)

    with remote.client() as api:
        # The SDK's submit: sign on the head, re-sign on stale_prev (charter.sdk.signing).
        accepted = api.submit(
            key, process, action, data, workflow, stale_retries=retries, on_stale=said_stale
        )
    if as_json:
        remote.print_json(accepted.raw)
        return
    state = accepted.process.state
    typer.echo(f"accepted {process} seq {accepted.seq} hash {accepted.hash} state {state}")


def _input(raw: str) -> JsonObject:
    if raw.startswith("@"):
        try:
            text = Path(raw[1:]).read_bytes()
        except OSError as exc:
            raise Malformed(
                f"cannot read the input file {raw[1:]}: {exc.strerror or exc}"
            ) from None
        value = ijson.loads(text)
    else:
        value = ijson.loads(raw)
    if not isinstance(value, dict):
        raise Malformed("--input must be a JSON object")
    return value
