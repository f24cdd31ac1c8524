"""`charter witness`: run a C2SP tlog-witness that cosigns a log's checkpoints."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from charter.cli.options import LogFormat, LogFormatName, LogLevel, LogLevelName, setup_telemetry
from charter.core.errors import CharterError, KeyFileError
from charter.core.errors.log import CheckpointUntrusted, LogProofInvalid
from charter.tlog.checkpoint import Cosigner
from charter.tlog.note import b64decode, b64encode
from charter.tlog.witness_protocol import AddCheckpoint, MalformedWitnessRequest
from charter.witness.config import (
    KEY_FILE,
    LOGS_FILE,
    VKEY_FILE,
    logs_policy_text,
    write_cosigner_key,
)
from charter.witness.errors import (
    CheckpointEquivocation,
    SizeConflict,
    UnknownLog,
    WitnessConfigError,
)
from charter.witness.local import load_witness

DEFAULT_PORT = 8430
EXIT_CONFLICT = 3
EXIT_BAD_PROOF = 4
EXIT_UNTRUSTED = 5

app = typer.Typer(
    help="A C2SP tlog-witness: cosigns a log's checkpoints that extend what it saw before.",
    no_args_is_help=True,
)

StateDir = Annotated[
    Path,
    typer.Option(
        "--state", envvar="CHARTER_WITNESS_STATE",
        help="The witness directory: key, known logs, latest checkpoints, evidence.",
    ),
]  # fmt: skip
KeyOption = Annotated[
    Path | None,
    typer.Option("--key", help=f"The witness secret key file [default: STATE/{KEY_FILE}]."),
]
LogsOption = Annotated[
    Path | None,
    typer.Option(
        "--policy", "--logs",
        help="tlog-policy file whose `log` lines are the known logs "
        f"[default: STATE/{LOGS_FILE}].",
    ),
]  # fmt: skip


@app.command("init")
def init(
    name: Annotated[
        str, typer.Option("--name", help="The witness's key name, e.g. audit.example.org/w1.")
    ],
    state: Annotated[
        Path,
        typer.Option(
            "--state",
            "--out",
            envvar="CHARTER_WITNESS_STATE",
            help="The witness directory to create (or complete).",
        ),
    ],
    log: Annotated[
        list[str] | None,
        typer.Option("--log", help="A log's vkey to cosign for (repeatable)."),
    ] = None,
) -> None:
    """Create the witness directory: a new key (0600), its vkey and the known logs file.

    Prints the vkey (type 0x04): put it in the log's tlog-policy as
    `witness <name> <vkey> <url>`.
    """
    key_path, logs_path = state / KEY_FILE, state / LOGS_FILE
    if key_path.exists():
        raise KeyFileError(f"{key_path} already exists; not overwriting it")
    if log and logs_path.exists():
        raise WitnessConfigError(f"{logs_path} already exists: add the `log` lines there")
    policy = logs_policy_text(log or [])  # checks the vkeys before writing anything
    state.mkdir(parents=True, exist_ok=True)
    cosigner = Cosigner.generate(name)
    write_cosigner_key(key_path, cosigner)
    vkey = cosigner.verifier().vkey
    (state / VKEY_FILE).write_text(vkey + "\n", encoding="utf-8")
    if not logs_path.exists():
        logs_path.write_text(policy, encoding="utf-8")
    typer.echo(vkey)


@app.command("serve")
def serve(
    state: StateDir,
    key: KeyOption = None,
    policy: LogsOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    log_level: LogLevel = LogLevelName.info,
    log_format: LogFormat = LogFormatName.text,
) -> None:
    """Serve POST /add-checkpoint and GET /<sha256(origin)>/checkpoint until SIGINT/SIGTERM."""
    import uvicorn

    from charter.witness.server import create_witness_app

    setup_telemetry(log_level, log_format, "charter-witness")
    witness = load_witness(state, key, policy)
    swept = witness.state.sweep_temporaries()
    if swept:
        typer.echo(f"swept   {swept} temporary file(s) an earlier crash left behind")
    origins = ", ".join(sorted(witness.logs.by_origin)) or "none: edit the known logs file"
    typer.echo(f"witness {witness.cosigner.verifier().vkey}")
    typer.echo(f"logs    {origins}")
    typer.echo(f"http    http://{host}:{port}/add-checkpoint  (Ctrl-C stops)")
    config = uvicorn.Config(
        create_witness_app(witness),
        host=host,
        port=port,
        log_config=None,
        log_level=None,
        access_log=False,
    )
    uvicorn.Server(config).run()


@app.command("cosign")
def cosign(
    state: StateDir,
    request: Annotated[
        Path | None,
        typer.Argument(help="An add-checkpoint request body; - or nothing reads stdin."),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Instead of a request: the signed checkpoint file."),
    ] = None,
    old: Annotated[
        int | None,
        typer.Option("--old", min=0, help="With --checkpoint: the size the witness holds."),
    ] = None,
    proof: Annotated[
        Path | None,
        typer.Option("--proof", help="With --checkpoint: base64 proof hashes, one a line."),
    ] = None,
    key: KeyOption = None,
    policy: LogsOption = None,
) -> None:
    """Cosign offline, with the same checks and state as `serve`; prints the cosignature.

    Exit codes: 0 cosigned, 3 size conflict (the witness's size is printed), 4 bad proof or
    equivocation, 5 unknown log or bad log signature, 1 anything else.
    """
    witness = load_witness(state, key, policy)
    body = _request_body(request, checkpoint, old, proof)
    try:
        cosigned = witness.add_checkpoint(body)
    except SizeConflict as exc:
        typer.echo(f"conflict: the witness holds size {exc.latest_size}", err=True)
        raise typer.Exit(EXIT_CONFLICT) from None
    except (LogProofInvalid, CheckpointEquivocation) as exc:
        typer.echo(f"refused: {exc.message}", err=True)
        raise typer.Exit(EXIT_BAD_PROOF) from None
    except (UnknownLog, CheckpointUntrusted) as exc:
        typer.echo(f"untrusted: {exc.message}", err=True)
        raise typer.Exit(EXIT_UNTRUSTED) from None
    sys.stdout.write(cosigned.response().decode("utf-8"))


def _request_body(
    request: Path | None, checkpoint: Path | None, old: int | None, proof: Path | None
) -> bytes:
    if checkpoint is None:
        if old is not None or proof is not None:
            raise MalformedWitnessRequest("--old and --proof go with --checkpoint")
        if request is None or str(request) == "-":
            return sys.stdin.buffer.read()
        return _read(request)
    if request is not None:
        raise MalformedWitnessRequest("give a request or --checkpoint, not both")
    if old is None:
        raise MalformedWitnessRequest("--checkpoint needs --old (the size the witness holds)")
    hashes: list[bytes] = []
    if proof is not None:
        for line in _read(proof).decode("ascii", "replace").split():
            try:
                hashes.append(b64decode(line))
            except ValueError:
                raise MalformedWitnessRequest("a proof line is one base64 hash") from None
    return AddCheckpoint(old, tuple(hashes), _read(checkpoint)).encode()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CharterError(f"cannot read {path}: {exc.strerror}") from None


@app.command("show")
def show(
    state: StateDir,
    key: KeyOption = None,
    policy: LogsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """The witness's key, the known logs and the latest cosigned checkpoint of each."""
    witness = load_witness(state, key, policy)
    latest = {x.checkpoint.origin: x for x in witness.state.all_latest()}
    logs: list[dict[str, Any]] = []
    for origin in sorted(set(witness.logs.by_origin) | set(latest)):
        held = latest.get(origin)
        logs.append(
            {
                "origin": origin,
                "known": origin in witness.logs.by_origin,
                "keys": [v.vkey for v in witness.logs.keys(origin)],
                "size": held.checkpoint.size if held else None,
                "root": b64encode(held.checkpoint.root) if held else None,
                "cosigned_at": _time(held.cosigned_at) if held else None,
            }
        )
    evidence = [str(p.relative_to(state)) for p in witness.state.evidence_files()]
    report = {"witness": witness.cosigner.verifier().vkey, "logs": logs, "refused": evidence}
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"witness  {report['witness']}")
    for entry in logs:
        mark = "" if entry["known"] else "  (no longer a known log)"
        if entry["size"] is None:
            typer.echo(f"{entry['origin']}  nothing cosigned yet{mark}")
        else:
            typer.echo(
                f"{entry['origin']}  size {entry['size']}  root {entry['root']}  "
                f"cosigned {entry['cosigned_at']}{mark}"
            )
    typer.echo(f"refused  {len(evidence)} checkpoint(s) kept as evidence under {state}/refused")
    for path in evidence:
        typer.echo(f"  {path}")


def _time(timestamp: int | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
