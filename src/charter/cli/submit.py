"""`charter submit`: sign an event with a key file and submit it, retrying a stale head."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from charter.cli import remote
from charter.client import CharterClient
from charter.core import ijson
from charter.core.ed25519 import read_secret_key_file
from charter.core.envelope import Envelope, sign
from charter.core.errors import Malformed, StalePrev, UnknownProcess
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339


def submit(
    key_file: Annotated[Path, typer.Option(help="The actor's secret key file.")],
    process: Annotated[str, typer.Option(help="The process id (new or existing).")],
    workflow: Annotated[str, typer.Option(help="The workflow path the process runs.")],
    action: Annotated[str, typer.Option(help="The action to take.")],
    input_: Annotated[
        str, typer.Option("--input", help="The input: a JSON object, or @FILE to read one.")
    ] = "{}",
    retries: Annotated[
        int, typer.Option(min=0, help="How often to re-read the head and re-sign on stale_prev.")
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")] = False,
) -> None:
    """Sign an event (prev = the process head, null for a new process) and submit it."""
    key = read_secret_key_file(key_file)
    data = _input(input_)
    with remote.client() as api:
        head = _head(api, process)
        for attempt in range(retries + 1):
            envelope = Envelope(
                v=1,
                process=process,
                workflow=workflow,
                action=action,
                input=data,
                prev=head,
                actor=key.public_key_hex,
                at=format_rfc3339(datetime.now(UTC)),
            )
            try:
                accepted = api.submit(sign(envelope, key))
                break
            except StalePrev:
                # Someone else extended the chain first: read the new head, sign again.
                if attempt == retries:
                    raise
                head = _head(api, process)
                typer.echo(f"stale head; re-signed on the new head (retry {attempt + 1})", err=True)
    if as_json:
        remote.print_json(accepted)
        return
    state = accepted["process"]["state"] if isinstance(accepted["process"], dict) else "?"
    typer.echo(f"accepted {process} seq {accepted['seq']} hash {accepted['hash']} state {state}")


def _head(api: CharterClient, process_id: str) -> str | None:
    """The process head; None when the process does not exist yet (the event creates it)."""
    try:
        head = api.process(process_id)["head"]
    except UnknownProcess:
        return None
    return head if isinstance(head, str) else None


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
