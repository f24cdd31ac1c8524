"""`charter log init`: the log's key, salt, witnessing policy and empty checkpoint.

A log nobody witnesses can be rolled back or forked by whoever restores its host, and no
verifier can tell (a log must never sign two inconsistent trees, but a restored log does
not remember what it signed). So `init` never leaves a deployment silently unwitnessed:

- `--witness URL --witness-key VKEY` (repeatable, in pairs): independent witnesses, each
  asked to cosign every checkpoint; all of them must (or `--witness-quorum K` of them);
- neither: a local witness in `$CHARTER_HOME/local-witness/` for a demo or a trial, named
  by its `file:` URL and labelled everywhere as not independent;
- `--no-witness`: an explicit choice, reported by every status as "rollback and fork
  undetectable".
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from charter.core.config import Settings
from charter.core.ed25519 import write_private_file
from charter.core.errors import ConfigurationError
from charter.core.errors.log import MalformedKey
from charter.tlog.checkpoint import Checkpoint, CosignatureVerifier, sign_checkpoint
from charter.tlog.config import LogSettings, check_origin
from charter.tlog.entry import SALT_SIZE
from charter.tlog.logdir import write_atomically
from charter.tlog.merkle import EMPTY_ROOT
from charter.tlog.note import Ed25519Signer, add_signatures
from charter.tlog.status import NOT_INDEPENDENT, UNDETECTABLE
from charter.tlog.witness_protocol import encode_request

LOCAL_WITNESS_DIR = "local-witness"


@dataclass(frozen=True, slots=True)
class _Witness:
    name: str  # its name in the policy
    vkey: str
    url: str


def init(
    origin: Annotated[
        str,
        typer.Option(
            "--origin",
            envvar="CHARTER_LOG_ORIGIN",
            help="The log's name, a schema-less URL such as charter.example.com/prod.",
        ),
    ],
    witness_urls: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            metavar="URL",
            help="An independent witness's URL (its tlog-witness prefix); repeatable, each"
            " with its --witness-key, in the same order.",
            show_default=False,
        ),
    ] = None,
    witness_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--witness-key",
            metavar="VKEY",
            help="The vkey `charter witness init` printed for that witness (type 0x04).",
            show_default=False,
        ),
    ] = None,
    witness_quorum: Annotated[
        int | None,
        typer.Option(
            "--witness-quorum",
            min=1,
            metavar="K",
            help="With several --witness: how many must cosign each checkpoint (default: all).",
            show_default=False,
        ),
    ] = None,
    no_witness: Annotated[
        bool,
        typer.Option(
            "--no-witness",
            help="Publish without any witness: a rollback or fork of the log is then"
            " undetectable (every status says so).",
        ),
    ] = False,
) -> None:
    """Create the log key, the process-key salt, the witnessing policy and the empty log.

    Without --witness or --no-witness, a local witness on this host is set up for a demo:
    it is not independent (a restore of the whole host goes unseen). The key and salt go
    to CHARTER_LOG_KEY_FILE / CHARTER_LOG_SALT_FILE (default $CHARTER_HOME/log-key/),
    never into the database or the (mirrored) log directory.
    """
    settings = LogSettings.from_env()
    check_origin(origin)
    witnesses = _witnesses(witness_urls or [], witness_keys or [], no_witness)
    if witness_quorum is not None and witness_quorum > max(1, len(witnesses)):
        raise typer.BadParameter(
            f"--witness-quorum {witness_quorum}: only {len(witnesses)} witness(es)"
        )
    if settings.key_file.exists():
        raise ConfigurationError(f"{settings.key_file} already exists: the log is initialised")
    log = settings.log_directory()
    if log.exists():
        raise ConfigurationError(f"{settings.directory} already holds a log")
    local_dir = Settings.from_env().home / LOCAL_WITNESS_DIR
    local = not no_witness and not witnesses
    if local and local_dir.exists() and any(local_dir.iterdir()):
        raise ConfigurationError(f"{local_dir} already exists: remove it, or pass --witness")

    signer = Ed25519Signer.generate(origin)
    vkey = signer.verifier().vkey
    settings.key_file.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(settings.key_file, (signer.skey + "\n").encode("ascii"))
    write_private_file(settings.salt_file, (secrets.token_bytes(SALT_SIZE).hex() + "\n").encode())
    write_atomically(settings.key_file.parent / "log.vkey", (vkey + "\n").encode())
    note = sign_checkpoint(Checkpoint(origin, 0, EMPTY_ROOT), signer)
    if local:
        witness, note = _local_witness(local_dir, origin, vkey, note)
        witnesses = [witness]
    policy = settings.policy_path
    text = _policy_text(origin, vkey, witnesses, witness_quorum, local)
    write_atomically(policy, text.encode())
    log.write_checkpoint(note)
    typer.echo(f"origin     {origin}")
    typer.echo(f"vkey       {vkey}")
    typer.echo(f"key        {settings.key_file} (secret, 0600)")
    typer.echo(f"salt       {settings.salt_file} (auditor-confidential, 0600)")
    typer.echo(f"policy     {policy}")
    typer.echo(f"log        {settings.directory}")
    if local:
        typer.echo(f"witness    {local_dir} ({NOT_INDEPENDENT})")
        typer.echo("           for production: charter log init --witness URL --witness-key VKEY")
    elif no_witness:
        typer.echo(f"witness    none: {UNDETECTABLE}")
    else:
        need = witness_quorum or len(witnesses)
        typer.echo(f"witness    {', '.join(w.url for w in witnesses)} ({need} must cosign)")
        typer.echo(f"           each must know this log: charter witness init ... --log {vkey}")


def _witnesses(urls: list[str], keys: list[str], none: bool) -> list[_Witness]:
    if none and (urls or keys):
        raise typer.BadParameter("--no-witness and --witness exclude each other")
    if len(urls) != len(keys):
        raise typer.BadParameter(
            f"give one --witness-key per --witness ({len(urls)} URL(s), {len(keys)} key(s))"
        )
    witnesses = []
    for number, (url, key) in enumerate(zip(urls, keys, strict=True), start=1):
        if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
            raise typer.BadParameter(f"--witness {url!r}: an http:// or https:// URL")
        try:
            CosignatureVerifier.from_vkey(key)
        except MalformedKey as exc:
            raise typer.BadParameter(f"--witness-key {key!r}: {exc.message}") from None
        witnesses.append(_Witness(f"w{number}", key, url.rstrip("/")))
    return witnesses


def _local_witness(
    directory: Path, origin: str, log_vkey: str, note: bytes
) -> tuple[_Witness, bytes]:
    """A new local witness that knows this log, and the empty checkpoint it cosigned."""
    from charter.witness.local import create_local_witness, load_witness, local_witness_url

    cosigner = create_local_witness(directory, f"{origin}/local-witness", log_vkey)
    cosigned = load_witness(directory).add_checkpoint(encode_request(0, [], note))
    witness = _Witness("local", cosigner.verifier().vkey, local_witness_url(directory))
    return witness, add_signatures(note, [cosigned.signature])


def _policy_text(
    origin: str, vkey: str, witnesses: list[_Witness], threshold: int | None, local: bool
) -> str:
    if local:
        head = [
            f"# tlog-policy for {origin}, with a local witness on this host: it is not",
            "# independent (a restore of the whole host goes unseen). For production name",
            "# witnesses under other administrations: `witness <name> <vkey> <url>`.",
        ]
    elif not witnesses:
        head = [f"# tlog-policy for {origin}, without witnesses (--no-witness): {UNDETECTABLE}."]
    else:
        head = [f"# tlog-policy for {origin}: its witnesses and how many must cosign."]
    lines = [*head, f"log {vkey}"]
    lines += [f"witness {w.name} {w.vkey} {w.url}" for w in witnesses]
    if len(witnesses) > 1:
        members = " ".join(w.name for w in witnesses)
        lines.append(f"group witnesses {threshold or 'all'} {members}")
        lines.append("quorum witnesses")
    else:
        lines.append(f"quorum {witnesses[0].name if witnesses else 'none'}")
    return "\n".join(lines) + "\n"
