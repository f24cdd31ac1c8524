"""`charter machine`: register a machine's DPoP key and execute runs for its target."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
from pathlib import Path
from typing import Annotated

import typer

from charter.automations.dpop import public_jwk as jwk_of
from charter.automations.dpop import thumbprint
from charter.cli.options import LogFormat, LogFormatName, LogLevel, LogLevelName, setup_telemetry
from charter.core import identifiers
from charter.core.config import Settings
from charter.core.ed25519 import SecretKey, read_secret_key_file, write_secret_key_file
from charter.core.errors import ConfigurationError, KeyFileError
from charter.machine.client import DEFAULT_WAIT_SECONDS, MachineClient, register_machine
from charter.machine.executor import ExecutorOptions, RunExecutor
from charter.machine.registry import default_registry

app = typer.Typer(
    help="Machines: DPoP-authenticated executors of automation runs for a target.",
    no_args_is_help=True,
)

_NAME = identifiers.NAME


def machines_dir(settings: Settings) -> Path:
    """Where machine keys live: $CHARTER_HOME/machines."""
    return settings.home / "machines"


def key_path(settings: Settings, machine_id: str) -> Path:
    return machines_dir(settings) / f"{machine_id}.key"


@app.command("register")
def register(
    target: Annotated[str, typer.Option(help="The target whose runs this machine executes.")],
    machine_id: Annotated[
        str | None, typer.Option("--id", help="The machine id (default: <target>-<random>).")
    ] = None,
    principal: Annotated[
        str | None,
        typer.Option(help="Register for this principal (needs a '*' token; default: yours)."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the registered machine and its key file as JSON."),
    ] = False,
) -> None:
    """Make a key pair in $CHARTER_HOME/machines/<id>.key (0600) and register its thumbprint.

    Needs CHARTER_API_URL and CHARTER_TOKEN: a token with the automations:write scope
    (or '*'). The machine claims the runs of the token principal's automations that
    target TARGET.
    """
    settings = Settings.from_env()
    if not settings.token:
        raise ConfigurationError("set CHARTER_TOKEN to a token with the automations:write scope")
    if not _NAME.fullmatch(target):
        raise ConfigurationError(f"--target must match {_NAME.pattern}")
    chosen = machine_id or f"{target[:100]}-{secrets.token_hex(4)}"
    if not _NAME.fullmatch(chosen):
        raise ConfigurationError(f"--id must match {_NAME.pattern}")
    path = key_path(settings, chosen)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = SecretKey.generate()
    write_secret_key_file(path, key)  # refuses to overwrite an existing machine key
    try:
        machine = register_machine(
            settings.api_url,
            settings.token,
            key,
            target=target,
            machine_id=chosen,
            principal=principal,
        )
    except BaseException:
        # Nothing registered: leave no orphan key behind.
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    if as_json:
        typer.echo(json.dumps({**machine, "key_file": str(path)}, indent=2))
        return
    typer.echo(f"machine {machine['id']} registered for target {machine['target']}")
    typer.echo(f"principal {machine['principal']}")
    typer.echo(f"thumbprint {machine['thumbprint']}")
    typer.echo(f"key {path}")


@app.command("show")
def show(
    machine_id: Annotated[str | None, typer.Option("--id", help="The machine id.")] = None,
) -> None:
    """Print a local machine's id, key file and DPoP key thumbprint."""
    settings = Settings.from_env()
    chosen = _machine_id(settings, machine_id)
    key = read_secret_key_file(key_path(settings, chosen))
    typer.echo(f"machine {chosen}")
    typer.echo(f"key {key_path(settings, chosen)}")
    typer.echo(f"thumbprint {thumbprint(jwk_of(key))}")


@app.command("run")
def run(
    machine_id: Annotated[
        str | None, typer.Option("--id", help="The machine id (default: the only local one).")
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Claim at most one run, execute it and exit.")
    ] = False,
    heartbeat: Annotated[
        float, typer.Option(min=0.05, help="Seconds between lease renewals while a step runs.")
    ] = 10.0,
    lease_seconds: Annotated[
        float, typer.Option(min=1.0, max=600.0, help="How long each lease holds.")
    ] = 30.0,
    max_attempts: Annotated[
        int, typer.Option(min=1, help="Claims of a run before a transient failure fails it.")
    ] = 5,
    wait: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=30.0,
            help="Seconds each claim waits for a run to be admitted (a long poll; 0: none).",
        ),
    ] = DEFAULT_WAIT_SECONDS,
    poll: Annotated[
        float,
        typer.Option(
            min=0.05,
            help="Least seconds between empty claims; after a failed claim this doubles "
            "up to 10 s.",
        ),
    ] = 1.0,
    slots: Annotated[
        int, typer.Option(min=1, max=64, help="Runs executed at a time, each under its lease.")
    ] = 1,
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Same as --log-level debug.")
    ] = False,
) -> None:
    """Claim runs for this machine's target and execute their plans until SIGTERM/Ctrl-C.

    Ships the http.request and charter.submit action hosts; charter.submit reads
    processes with CHARTER_TOKEN (processes:read).
    """
    setup_telemetry(LogLevelName.debug if verbose else log_level, log_format, "charter-machine")
    if heartbeat >= lease_seconds:
        raise ConfigurationError("--heartbeat must be shorter than --lease-seconds")
    settings = Settings.from_env()
    chosen = _machine_id(settings, machine_id)
    key = read_secret_key_file(key_path(settings, chosen))
    options = ExecutorOptions(heartbeat=heartbeat, max_attempts=max_attempts)
    executed = asyncio.run(
        _run(
            settings,
            key,
            options,
            lease_seconds=lease_seconds,
            once=once,
            wait=wait,
            poll=poll,
            slots=slots,
        )
    )
    typer.echo(f"machine {chosen} stopped; executed {executed} run(s)", err=True)


async def _run(
    settings: Settings,
    key: SecretKey,
    options: ExecutorOptions,
    *,
    lease_seconds: float,
    once: bool,
    wait: float,
    poll: float,
    slots: int,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with MachineClient(settings.api_url, key, lease_seconds=lease_seconds, wait=wait) as api:
        executor = RunExecutor(api, default_registry(settings), options)
        return await executor.run(stop, once=once, poll=poll, max_poll=max(poll, 10.0), slots=slots)


def _machine_id(settings: Settings, machine_id: str | None) -> str:
    if machine_id is not None:
        if not _NAME.fullmatch(machine_id):
            raise ConfigurationError(f"--id must match {_NAME.pattern}")
        return machine_id
    folder = machines_dir(settings)
    found = sorted(p.stem for p in folder.glob("*.key")) if folder.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise KeyFileError(f"no machine key in {folder}; run: charter machine register")
    raise ConfigurationError(f"several machines in {folder} ({', '.join(found)}); pass --id")
