"""A witness on the log's own host, reached without a network: for a demo or a trial.

`charter log init` without `--witness URL` (and without `--no-witness`) creates one in
`$CHARTER_HOME/local-witness/` and names it in the policy by the `file:` URL of that
directory. The sequencer asks it to cosign through the witness's own application, in
process (the same checks, lock and state as `charter witness serve`); a verifier on this
host reads the latest checkpoint it cosigned from the directory.

It is not independent, and says so wherever the log's status is shown: it catches a log
directory rolled back or forked on its own (a restore of the log from an old copy), but
whoever restores the whole host restores the witness with it. A deployment that must
detect that runs a witness elsewhere (`charter witness serve` on another machine, under
another administration) and names it with `--witness URL`.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

from charter.core.errors.log import WitnessUnreachable
from charter.tlog.checkpoint import Cosigner
from charter.tlog.policy import LOCAL_WITNESS_SCHEME
from charter.witness.config import (
    KEY_FILE,
    LOGS_FILE,
    VKEY_FILE,
    load_known_logs,
    logs_policy_text,
    read_cosigner_key,
    write_cosigner_key,
)
from charter.witness.core import Witness
from charter.witness.errors import WitnessConfigError
from charter.witness.state import WitnessState

LOCAL_SCHEME = LOCAL_WITNESS_SCHEME
LOCAL_BASE_URL = "http://local-witness"  # the in-process app's address for httpx
LOCAL_NAME = "local"  # its name in the policy


def is_local(url: str | None) -> bool:
    return bool(url) and str(url).startswith(LOCAL_SCHEME)


def local_witness_url(directory: Path) -> str:
    """The `file:` URL a policy names a local witness by."""
    return directory.resolve().as_uri()


def local_witness_directory(url: str) -> Path:
    """The state directory of a local witness's `file:` URL."""
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        raise WitnessConfigError(f"not a local witness URL: {url!r}")
    return Path(unquote(parts.path))


def create_local_witness(directory: Path, name: str, log_vkey: str) -> Cosigner:
    """A new witness directory that knows one log: key (0600), vkey and known logs."""
    if (directory / KEY_FILE).exists():
        raise WitnessConfigError(f"{directory / KEY_FILE} already exists; not overwriting it")
    policy = logs_policy_text([log_vkey])
    directory.mkdir(parents=True, exist_ok=True)
    cosigner = Cosigner.generate(name)
    write_cosigner_key(directory / KEY_FILE, cosigner)
    (directory / VKEY_FILE).write_text(cosigner.verifier().vkey + "\n", encoding="utf-8")
    (directory / LOGS_FILE).write_text(policy, encoding="utf-8")
    return cosigner


def load_witness(directory: Path, key: Path | None = None, logs: Path | None = None) -> Witness:
    """The witness of a state directory (its key and known logs there, unless given)."""
    cosigner = read_cosigner_key(key or directory / KEY_FILE)
    known = load_known_logs(logs or directory / LOGS_FILE)
    return Witness(cosigner, known, WitnessState(directory, (cosigner.name, cosigner.key_id)))


def local_witness_client(url: str, timeout: float) -> httpx.AsyncClient:
    """An HTTP client whose requests to LOCAL_BASE_URL reach the local witness's app."""
    from charter.witness.server import create_witness_app  # Starlette: only when used

    app = create_witness_app(load_witness(local_witness_directory(url)))
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=LOCAL_BASE_URL, timeout=timeout
    )


def read_local_witness(url: str, origin: str) -> bytes | None:
    """The latest checkpoint the local witness cosigned for `origin` (None if none);
    `WitnessUnreachable` when its directory is not there."""
    directory = local_witness_directory(url)
    if not (directory / KEY_FILE).is_file():
        raise WitnessUnreachable(f"no local witness in {directory}")
    latest = WitnessState(directory).latest(origin)
    return None if latest is None else latest.note
