"""`charter keys`: make Ed25519 key files and show their public keys."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from charter.core.ed25519 import SecretKey, read_secret_key_file, write_secret_key_file
from charter.core.errors import KeyFileError

app = typer.Typer(
    help="Ed25519 keys: an actor is its public key; the secret key stays in a 0600 file.",
    no_args_is_help=True,
)


@app.command("new")
def new(
    out: Annotated[Path, typer.Option("--out", help="Where to write the secret key (0600).")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
) -> None:
    """Write a new secret key file and print its public key (the actor id)."""
    if not force and out.exists():
        raise KeyFileError(f"{out} already exists; pass --force to replace it")
    key = SecretKey.generate()
    write_secret_key_file(out, key, overwrite=force)
    typer.echo(key.public_key_hex)


@app.command("public")
def public(
    file: Annotated[Path, typer.Argument(help="A secret key file.")],
) -> None:
    """Print the public key of a secret key file."""
    typer.echo(read_secret_key_file(file).public_key_hex)
