"""`charter tokens`: bearer tokens for the API, made and revoked on the database directly."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from charter.auth.tokens import (
    DEFAULT_PRINCIPAL,
    SCOPES,
    create_token,
    find_token,
    list_tokens,
    revoke_token,
)
from charter.cli import tables
from charter.core.config import Settings
from charter.core.errors import NotFound
from charter.db.database import Role, connect
from charter.db.embedded import database_url

app = typer.Typer(help="API bearer tokens (stored hashed; shown once).", no_args_is_help=True)


@app.command("create")
def create(
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope", help=f"A scope to grant (repeatable): {', '.join(sorted(SCOPES))}."
        ),
    ],
    name: Annotated[str, typer.Option(help="A label to recognise the token by.")] = "",
    principal: Annotated[
        str, typer.Option(help="Who the token acts for (owner of automations and runs).")
    ] = DEFAULT_PRINCIPAL,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the token and its record (id, scopes, ...) as JSON."),
    ] = False,
) -> None:
    """Create a token and print it once; only its SHA-256 is stored."""
    with database_url(Settings.from_env()) as url, connect(url, Role.ENGINE) as conn:
        token = create_token(conn, scopes=scope, name=name, principal=principal)
        info = find_token(conn, token)
    if info is None:  # it was just committed: only a concurrent revoke-and-purge loses it
        raise NotFound("the token just created is not in the database")
    if as_json:
        # The one time the token can be read: `jq -r .token` gets it.
        typer.echo(json.dumps({"token": token, **info.to_json()}, indent=2))
        return
    # The token alone on stdout, for `export CHARTER_TOKEN=$(charter tokens create ...)`.
    typer.echo(token)
    typer.echo(f"token id {info.id}; it is shown only this once", err=True)


@app.command("list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Every token's id, name, principal, scopes and whether it is revoked (never the token)."""
    with database_url(Settings.from_env()) as url, connect(url, Role.ENGINE) as conn:
        tokens = list_tokens(conn)
        conn.rollback()
    if as_json:
        typer.echo(json.dumps({"tokens": [t.to_json() for t in tokens]}, indent=2))
        return
    table = Table("name", "principal", "scopes", "created", "revoked", "id")
    for token in tokens:
        table.add_row(
            token.name,
            token.principal,
            " ".join(token.scopes),
            token.created_at.isoformat(timespec="seconds"),
            token.revoked_at.isoformat(timespec="seconds") if token.revoked_at else "",
            token.id,
        )
    tables.show(tables.whole(table, "id"))  # whole: `revoke` takes it


@app.command("revoke")
def revoke(token_id: Annotated[str, typer.Argument(help="The token's id (see `list`).")]) -> None:
    """Revoke a token: the API refuses it from now on."""
    with database_url(Settings.from_env()) as url, connect(url, Role.ENGINE) as conn:
        revoke_token(conn, token_id)
    typer.echo(f"revoked {token_id}")
