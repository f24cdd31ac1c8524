"""`charter log`: create the transparency log, run its sequencer, show its status."""

from __future__ import annotations

import json
import secrets
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from charter.cli.options import LogFormat, LogFormatName, LogLevel, LogLevelName, setup_telemetry
from charter.core.config import Settings
from charter.core.ed25519 import write_private_file
from charter.core.errors import ConfigurationError
from charter.tlog.checkpoint import Checkpoint, sign_checkpoint
from charter.tlog.config import LogSettings
from charter.tlog.entry import SALT_SIZE
from charter.tlog.logdir import LogDirectory, write_atomically
from charter.tlog.merkle import EMPTY_ROOT
from charter.tlog.note import Ed25519Signer, valid_name

app = typer.Typer(
    help="The transparency log: every event, in a witnessed Merkle log outside the database.",
    no_args_is_help=True,
)

HALT_EXIT = 3


@app.command("init")
def init(
    origin: Annotated[
        str,
        typer.Option(
            "--origin",
            envvar="CHARTER_LOG_ORIGIN",
            help="The log's name, a schema-less URL such as charter.example.com/prod.",
        ),
    ],
) -> None:
    """Create the log key, the process-key salt, a policy template and the empty log.

    The key and salt go to CHARTER_LOG_KEY_FILE / CHARTER_LOG_SALT_FILE (default
    $CHARTER_HOME/log-key/), never into the database or the (mirrored) log directory.
    """
    settings = LogSettings.from_env()
    if not valid_name(origin):
        raise ConfigurationError("the origin must be non-empty, without spaces or '+'")
    if settings.key_file.exists():
        raise ConfigurationError(f"{settings.key_file} already exists: the log is initialised")
    log = LogDirectory(settings.directory)
    if log.exists():
        raise ConfigurationError(f"{settings.directory} already holds a log")
    signer = Ed25519Signer.generate(origin)
    vkey = signer.verifier().vkey
    settings.key_file.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(settings.key_file, (signer.skey + "\n").encode("ascii"))
    write_private_file(settings.salt_file, (secrets.token_bytes(SALT_SIZE).hex() + "\n").encode())
    key_dir = settings.key_file.parent
    write_atomically(key_dir / "log.vkey", (vkey + "\n").encode())
    policy = key_dir / "charter.policy"
    write_atomically(
        policy,
        f"# tlog-policy for {origin}: add witnesses and a quorum before relying on it\n"
        f"log {vkey}\nquorum none\n".encode(),
    )
    log.write_checkpoint(sign_checkpoint(Checkpoint(origin, 0, EMPTY_ROOT), signer))
    typer.echo(f"origin     {origin}")
    typer.echo(f"vkey       {vkey}")
    typer.echo(f"key        {settings.key_file} (secret, 0600)")
    typer.echo(f"salt       {settings.salt_file} (auditor-confidential, 0600)")
    typer.echo(f"policy     {policy}")
    typer.echo(f"log        {settings.directory}")


@app.command("sequence")
def sequence(
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
) -> None:
    """Run the sequencer alone: lead (or stand by), integrate queued events until stopped.

    Exits 3 when it halts (db_behind_log, log_behind_db, log_gap, ...), 0 on SIGINT/SIGTERM.
    """
    from charter.db.embedded import database_url
    from charter.tlog.background import configured_sequencer

    setup_telemetry(log_level, log_format, "charter-log")
    settings = LogSettings.from_env()
    settings.signer()  # a missing key or salt fails before the database is opened
    settings.salt()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with database_url(Settings.from_env()) as url, configured_sequencer(url, settings) as seq:
        halt = seq.run(stop)
    if halt is not None:
        typer.echo(f"error: log halted ({halt.code}): {halt.message}", err=True)
        raise typer.Exit(HALT_EXIT)


@app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The log's origin, size and halt, read from the log directory."""
    from charter.tlog.status import log_status

    report = log_status(LogSettings.from_env().directory)
    if as_json:
        typer.echo(json.dumps(report, sort_keys=True))
        return
    for key, value in report.items():
        typer.echo(f"{key:13} {value}")


@app.command("proof")
def proof(
    event_hash: Annotated[str, typer.Argument(help="The event's hash (64 hex).")],
) -> None:
    """Print a c2sp.org/tlog-proof@v1 of the event against the latest checkpoint."""
    from charter.db.database import Role, connect
    from charter.db.embedded import database_url
    from charter.tlog import store
    from charter.tlog.serving import inclusion_proof

    event_hash = event_hash.strip().lower()
    with database_url(Settings.from_env()) as url, connect(url, Role.READER) as conn:
        index = store.index_of(conn, event_hash)
    log = LogDirectory(LogSettings.from_env().directory)
    typer.echo(inclusion_proof(log, index, event_hash), nl=False)


@app.command("mirror")
def mirror(
    source: Annotated[str, typer.Argument(help="A log directory or the log's URL (…/v1/log/).")],
    destination: Annotated[Path, typer.Argument(help="The mirror directory.", file_okay=False)],
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="The tlog-policy (default: as charter verify --log).",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", envvar="CHARTER_TOKEN", help="log:read token.")
    ] = None,
) -> None:
    """Copy a log after checking it: policy, every tile against the root, consistency with
    what the mirror held, no two entries for one seq. Exits 3 when the source is refused."""
    from charter.cli.verify_log import default_policy
    from charter.tlog.mirror import MirrorRefused
    from charter.tlog.mirror import mirror as copy_log
    from charter.tlog.policy import parse_policy

    path = policy or default_policy(Settings.from_env(), LogSettings.from_env())
    try:
        trusted = parse_policy(path.read_bytes())
    except OSError as exc:
        raise ConfigurationError(f"cannot read the policy {path}: {exc}") from None
    try:
        result = copy_log(source, destination, trusted, token)
    except MirrorRefused as exc:
        typer.echo(f"error: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(HALT_EXIT) from None
    typer.echo(f"mirrored size {result.size} (was {result.old_size}), {result.written} files")
