"""What the CLI commands that talk to the API share: the client and JSON output."""

from __future__ import annotations

import json

import typer

from charter.client import CharterClient
from charter.core.jsontypes import JsonValue


def client() -> CharterClient:
    """A client for CHARTER_API_URL with CHARTER_TOKEN (tests replace this function)."""
    return CharterClient.from_env()


def print_json(value: JsonValue) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def short(value: object, length: int = 12) -> str:
    """A hash or key shortened for tables; the full value is in `--json`."""
    return str(value)[:length] if value else "-"
