"""What a witness is configured with: its key and the logs it knows.

The state directory holds by default:

    witness.skey   the cosigner's secret key, Go's `PRIVATE+KEY+<name>+<id>+<base64>`
                   text with type 0x04 (mode 0600, never wider)
    witness.vkey   its verifier key (type 0x04), to paste into a log's tlog-policy
    logs.policy    the known logs: a tlog-policy file whose `log <vkey>` lines name each
                   log by its origin (several lines with one origin = key rotation);
                   `witness`, `group` and `quorum` lines are accepted and ignored, so a
                   deployment's own `charter.policy` can serve as is
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from charter.core.clock import Clock
from charter.core.ed25519 import read_private_file, write_private_file
from charter.core.errors import KeyFileError
from charter.core.errors.log import MalformedKey, MalformedPolicy
from charter.tlog.checkpoint import Cosigner
from charter.tlog.note import Ed25519Verifier
from charter.tlog.policy import parse_policy
from charter.witness.errors import WitnessConfigError

KEY_FILE = "witness.skey"
VKEY_FILE = "witness.vkey"
LOGS_FILE = "logs.policy"
_MAX_KEY_FILE = 4096


@dataclass(frozen=True, slots=True)
class KnownLogs:
    """The log keys a witness trusts, by origin (the key name is the origin)."""

    by_origin: Mapping[str, tuple[Ed25519Verifier, ...]]

    @classmethod
    def of(cls, verifiers: Iterable[Ed25519Verifier]) -> KnownLogs:
        by_origin: dict[str, tuple[Ed25519Verifier, ...]] = {}
        for verifier in verifiers:
            same = by_origin.get(verifier.name, ())
            if any(v.key_id == verifier.key_id for v in same):
                # open_note would refuse every note of that origin as ambiguous.
                raise WitnessConfigError(
                    f"two known keys of {verifier.name} share the key ID {verifier.key_id:08x}"
                )
            by_origin[verifier.name] = (*same, verifier)
        return cls(by_origin)

    def keys(self, origin: str) -> tuple[Ed25519Verifier, ...]:
        return self.by_origin.get(origin, ())


def load_known_logs(path: Path) -> KnownLogs:
    """The `log` lines of a tlog-policy file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WitnessConfigError(f"cannot read the known logs {path}: {exc.strerror}") from None
    try:
        policy = parse_policy(data)
    except MalformedPolicy as exc:
        raise WitnessConfigError(f"{path}: {exc.message}") from None
    return KnownLogs.of(log.verifier for log in policy.logs)


def logs_policy_text(vkeys: Iterable[str]) -> str:
    """A known-logs file listing `vkeys` (each checked to be an Ed25519 log key)."""
    lines = [
        "# Logs this witness cosigns for: one `log <vkey>` line per log key (tlog-policy).",
        "# Several keys with the same name (the origin) are a key rotation.",
    ]
    for vkey in vkeys:
        try:
            Ed25519Verifier.from_vkey(vkey)
        except MalformedKey as exc:
            raise WitnessConfigError(f"not a log vkey: {exc.message}") from None
        lines.append(f"log {vkey}")
    lines.append("quorum none")
    return "\n".join(lines) + "\n"


def write_cosigner_key(path: Path, cosigner: Cosigner) -> None:
    """Write the secret key text to a new 0600 file (never overwriting one)."""
    write_private_file(path, (cosigner.skey + "\n").encode("utf-8"))


def read_cosigner_key(path: Path, clock: Clock | None = None) -> Cosigner:
    """Read a witness secret key file, which must be private to its owner."""
    data = read_private_file(path, _MAX_KEY_FILE)
    try:
        return Cosigner.from_skey(data.decode("utf-8").strip(), clock)
    except (UnicodeDecodeError, MalformedKey):
        # The message never echoes the content: it may be a secret in the wrong format.
        raise KeyFileError(
            f"key file {path} does not hold a witness secret key "
            "(expected PRIVATE+KEY+<name>+<id>+<base64> with key type 0x04)"
        ) from None
