"""`charter actors`: register, list and change actors over the API.

The automation actor is guarded by the server: its roles never change (AUTOMATION
alone), and its key and status change only with a `*` token; a refusal is one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from charter.cli import remote, tables
from charter.core.ed25519 import read_secret_key_file
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject, JsonValue

app = typer.Typer(help="Actors: an id, roles and an Ed25519 public key.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _public_key(public_key: str | None, key_file: Path | None) -> str:
    if (public_key is None) == (key_file is None):
        raise Malformed("give exactly one of --public-key and --key-file")
    if key_file is not None:
        return read_secret_key_file(key_file).public_key_hex
    assert public_key is not None
    return public_key


@app.command("add")
def add(
    actor_id: Annotated[str, typer.Argument(help="The actor's id, e.g. ada or analyst-7.")],
    role: Annotated[list[str], typer.Option("--role", help="A role to grant (repeatable).")],
    public_key: Annotated[str | None, typer.Option(help="The actor's public key (64 hex).")] = None,
    key_file: Annotated[
        Path | None, typer.Option(help="A secret key file; its public key is registered.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Register an actor with its public key and roles."""
    with remote.client() as api:
        actor = api.add_actor(actor_id, _public_key(public_key, key_file), role).raw
    if as_json:
        remote.print_json(actor)
    else:
        typer.echo(f"added {actor['id']} ({_roles(actor.get('roles'))})")


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every actor with its roles and active key."""
    with remote.client() as api:
        actors = [actor.raw for actor in api.actors()]
    if as_json:
        remote.print_json({"actors": list(actors)})
        return
    table = Table("id", "roles", "public key", "keys", "disabled")
    for actor in actors:
        table.add_row(
            str(actor["id"]),
            _roles(actor.get("roles")),
            remote.short(actor.get("public_key"), 16),
            str(actor.get("keys", "")),
            "yes" if actor.get("disabled") else "",
        )
    tables.show(tables.whole(table, "id"))


def _roles(roles: JsonValue) -> str:
    return ", ".join(str(r) for r in roles) if isinstance(roles, list) else ""


@app.command("rotate")
def rotate(
    actor_id: Annotated[str, typer.Argument(help="The actor whose key to replace.")],
    public_key: Annotated[str | None, typer.Option(help="The new public key (64 hex).")] = None,
    key_file: Annotated[
        Path | None, typer.Option(help="A secret key file; its public key becomes the key.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Give an actor a new key; the old one is retired and still verifies its events
    (the automation actor's: a `*` token only)."""
    with remote.client() as api:
        actor = api.rotate_key(actor_id, _public_key(public_key, key_file)).raw
    _done(
        actor,
        as_json,
        f"rotated the key of {actor['id']}: {remote.short(actor.get('public_key'), 16)}",
    )


@app.command("roles")
def roles(
    actor_id: Annotated[str, typer.Argument(help="The actor whose roles to replace.")],
    role: Annotated[list[str], typer.Option("--role", help="A role it holds (repeatable).")],
    as_json: JsonFlag = False,
) -> None:
    """Replace an actor's roles (never the automation actor's: it holds AUTOMATION alone)."""
    with remote.client() as api:
        actor = api.set_roles(actor_id, role).raw
    _done(actor, as_json, f"{actor['id']} now holds {_roles(actor.get('roles'))}")


@app.command("disable")
def disable(
    actor_id: Annotated[str, typer.Argument(help="The actor to disable.")],
    as_json: JsonFlag = False,
) -> None:
    """Disable an actor: its key signs nothing new (the automation actor: a `*` token only)."""
    with remote.client() as api:
        actor = api.disable_actor(actor_id).raw
    _done(actor, as_json, f"disabled {actor['id']}")


@app.command("enable")
def enable(
    actor_id: Annotated[str, typer.Argument(help="The actor to enable again.")],
    as_json: JsonFlag = False,
) -> None:
    """Enable a disabled actor again (the automation actor: a `*` token only)."""
    with remote.client() as api:
        actor = api.enable_actor(actor_id).raw
    _done(actor, as_json, f"enabled {actor['id']}")


def _done(actor: JsonObject, as_json: bool, line: str) -> None:
    if as_json:
        remote.print_json(actor)
    else:
        typer.echo(line)
