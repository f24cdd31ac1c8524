"""What the CLI commands that talk to the API share: the client and JSON output."""

from __future__ import annotations

import json

import typer

from charter.core.jsontypes import JsonValue
from charter.sdk.client import Client


def client() -> Client:
    """A client for CHARTER_API_URL with CHARTER_TOKEN (tests replace this function).

    The commands print what the API answered: a result's `raw` object (`--json`, and
    the tables read it too)."""
    return Client.from_env()


def print_json(value: JsonValue) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def short(value: object, length: int = 12) -> str:
    """A hash or key shortened for tables; the full value is in `--json`."""
    return str(value)[:length] if value else "-"
