"""`charter hold` and `charter release`: sign a `charter:hold` or `charter:release` event
with a key file and submit it. A process under legal hold is never archived or erased;
the workflow's `retention` block says who may hold one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from charter.cli import remote
from charter.core.ed25519 import read_secret_key_file
from charter.core.errors import Malformed
from charter.dsl.migration import REASON_PATTERN
from charter.dsl.model import HOLD_ACTION, RELEASE_ACTION

ProcessArgument = Annotated[str, typer.Argument(help="The process.", show_default=False)]
ReasonOption = Annotated[
    str, typer.Option(help="A ticket reference, e.g. LEGAL-2026-17 (no free text).")
]
KeyFileOption = Annotated[Path, typer.Option(help="The secret key file of a hold role.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")]


def _submit(action: str, process: str, reason: str, key_file: Path, as_json: bool) -> None:
    if not REASON_PATTERN.fullmatch(reason):
        raise Malformed(
            f"--reason {reason!r}: a ticket reference matching {REASON_PATTERN.pattern}"
        )
    key = read_secret_key_file(key_file)
    with remote.client() as api:
        accepted = api.submit(key, process, action, {"reason": reason})
    if as_json:
        remote.print_json(accepted.raw)
        return
    verb = "held" if action == HOLD_ACTION else "released"
    typer.echo(f"{verb}: {process} seq {accepted.seq} hash {accepted.hash}")


def hold(
    process: ProcessArgument,
    reason: ReasonOption,
    key_file: KeyFileOption,
    as_json: JsonOption = False,
) -> None:
    """Put a process under legal hold with a signed charter:hold event: it is never
    archived nor erased until released."""
    _submit(HOLD_ACTION, process, reason, key_file, as_json)


def release(
    process: ProcessArgument,
    reason: ReasonOption,
    key_file: KeyFileOption,
    as_json: JsonOption = False,
) -> None:
    """Lift a process's legal hold with a signed charter:release event."""
    _submit(RELEASE_ACTION, process, reason, key_file, as_json)
