"""`charter log`: create the transparency log, run its sequencer, show its status."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from charter.cli.log_init import init
from charter.cli.options import LogFormat, LogFormatName, LogLevel, LogLevelName, setup_telemetry
from charter.core.config import Settings
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.config import LogSettings

if TYPE_CHECKING:
    from charter.cli.verify_log import Witnesses
    from charter.tlog.mirror import WitnessCheck
    from charter.tlog.policy import Policy

app = typer.Typer(
    help="The transparency log: every event, in a witnessed Merkle log outside the database.",
    no_args_is_help=True,
)

HALT_EXIT = 3


app.command("init")(init)


@app.command("sequence")
def sequence(
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
) -> None:
    """Run the sequencer alone: lead (or stand by), integrate queued events until stopped.

    Exits 3 when it halts (db_behind_log, log_behind_db, log_gap, ...), 0 on SIGINT/SIGTERM.
    """
    from charter.cli.sequencer import configured_sequencer
    from charter.cli.stopping import stop_on_signals
    from charter.db.embedded import database_url

    setup_telemetry(log_level, log_format, "charter-log")
    settings = LogSettings.from_env()
    settings.signer()  # a missing key or salt fails before the database is opened
    settings.salt()
    stop = threading.Event()
    stop_on_signals(stop)
    with database_url(Settings.from_env()) as url, configured_sequencer(url, settings) as seq:
        halt = seq.run(stop)
    if halt is not None:
        typer.echo(f"error: log halted ({halt.code}): {halt.message}", err=True)
        raise typer.Exit(HALT_EXIT)


@app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The log's origin, size, halt and witnessing, read from the log directory and the
    policy (a log without an independent witness says what it cannot detect)."""
    from charter.tlog.status import log_status

    settings = LogSettings.from_env()
    report = log_status(settings.log_directory(), settings.policy_path)
    if as_json:
        typer.echo(json.dumps(report, sort_keys=True))
        return
    for line in status_lines(report):
        typer.echo(line)


def status_lines(report: Mapping[str, object]) -> list[str]:
    """`charter log status` as text: one `name  value` line each, nothing printed as None."""
    witnessing = report["witnessing"]
    assert isinstance(witnessing, dict)
    names = ", ".join(witnessing["witnesses"]) or "none"
    halted = f"{report['halted']}: {report['halt_message']}" if report["halted"] else "no"
    lines = [
        f"origin       {report['origin'] or '(no checkpoint yet)'}",
        f"size         {report['size']}",
        f"cosignatures {report['cosignatures']}",
        f"halted       {halted}",
        f"witnessing   {witnessing['mode']} (witnesses: {names})",
    ]
    if witnessing["warning"]:
        lines.append(f"warning      {witnessing['warning']}")
    return lines


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
    log = LogSettings.from_env().log_directory()
    typer.echo(inclusion_proof(log, index, event_hash), nl=False)


def _witnessed(policy: Policy, asked: Witnesses) -> WitnessCheck:
    """The mirror's check of its source against the witnesses: a refusal names the first
    problem (`log_rollback`, `checkpoint_equivocation`, ...), a witness that cannot be
    read is `witness_unreachable`."""
    from charter.audit.log_check import compare_with_witness
    from charter.core.errors.log import WitnessUnreachable
    from charter.tlog.mirror import REFUSALS, MirrorRefused

    def check(note: bytes, checkpoint: Checkpoint, tiles: Mapping[str, bytes]) -> None:
        problems = asked.ask(
            lambda url, held: compare_with_witness(url, held, policy, note, checkpoint, tiles),
            checkpoint.origin,
        )
        for problem in problems:
            if problem.code == "witness_unreachable":
                raise WitnessUnreachable(problem.message)
            raise REFUSALS.get(problem.code, MirrorRefused)(problem.message)

    return check


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
    witnesses: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            metavar="URL",
            help="Compare the source with the latest checkpoint this witness cosigned (its"
            " monitoring prefix; repeatable) instead of the policy's witnesses, which are"
            " asked by default.",
            show_default=False,
        ),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline", help="Ask no witness: a rolled-back or forked source may go unseen."
        ),
    ] = False,
) -> None:
    """Copy a log after checking it: policy, every tile against the root, consistency with
    what the mirror held, no two entries for one seq, and what the witnesses cosigned.
    Exits 3 when the source is refused, 1 when a witness cannot be read."""
    from charter.cli.verify_log import Witnesses, default_policy, read_policy
    from charter.core.errors.log import WitnessUnreachable
    from charter.tlog.mirror import MirrorRefused
    from charter.tlog.mirror import mirror as copy_log

    if offline and witnesses:
        raise typer.BadParameter("--offline asks no witness: drop --witness, or --offline")
    path = policy or default_policy(Settings.from_env(), LogSettings.from_env())
    trusted = read_policy(path)
    asked = Witnesses.choose(trusted, witnesses or (), offline=offline)
    try:
        result = copy_log(source, destination, trusted, token, _witnessed(trusted, asked))
    except MirrorRefused as exc:
        typer.echo(f"error: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(HALT_EXIT) from None
    except WitnessUnreachable as exc:
        typer.echo(f"error: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"mirrored size {result.size} (was {result.old_size}), {result.written} files")
    typer.echo(asked.note())
