"""Where the transparency log lives and what signs it, from the environment.

    CHARTER_LOG_DIR        the log directory (default $CHARTER_HOME/log): what is
                           published and mirrored, tiles and checkpoint only
    CHARTER_LOG_STATE_DIR  the sequencer's own files (head index, halt, unpublished
                           checkpoint, witness sizes; default `<CHARTER_LOG_DIR>-state`)
    CHARTER_LOG_KEY_FILE   the log's secret key, Go's PRIVATE+KEY+… text (default
                           $CHARTER_HOME/log-key/log.skey); never in the database, never
                           in the log directory (which is mirrored)
    CHARTER_LOG_SALT_FILE  the 32-byte process-key salt as hex (default beside the key)
    CHARTER_LOG_BATCH_MS   the sequencer's tick (default 250)
    CHARTER_LOG_PUBLIC     1: the /v1/log/ routes need no token (else scope log:read)
    CHARTER_LOG_GAP_SECONDS  how long an event may wait for a missing predecessor before
                           the sequencer halts with log_gap (default 60)
    CHARTER_LOG_POLICY_FILE  the tlog-policy the sequencer publishes under (default
                           charter.policy beside the key): with a quorum other than
                           `none`, each checkpoint is published only once the witnesses
                           on its `witness` lines (URL as the third word) meet the quorum
    CHARTER_LOG_WITNESS_TIMEOUT  seconds each witness gets per checkpoint (default 1)

A log is configured when its key file exists; without one, nothing runs a sequencer and
Charter behaves as it did before the log (events are still queued for it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from charter.core.config import Settings
from charter.core.errors import ConfigurationError
from charter.core.errors.log import LogNotConfigured, MalformedKey
from charter.tlog.entry import SALT_SIZE
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer, valid_name

KEY_DIR = "log-key"


@dataclass(frozen=True, slots=True)
class LogSettings:
    directory: Path
    key_file: Path
    salt_file: Path
    batch_ms: int = 250
    public: bool = False  # CHARTER_LOG_PUBLIC=1: /v1/log/ reads need no token
    gap_seconds: float = 60.0
    policy_file: Path | None = None  # None: charter.policy beside the key
    witness_timeout: float = 1.0
    state_directory: Path | None = None  # None: `<directory>-state`

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LogSettings:
        env = os.environ if environ is None else environ
        home = Settings.from_env(env).home
        key_file = _path(env, "CHARTER_LOG_KEY_FILE") or home / KEY_DIR / "log.skey"
        return cls(
            directory=_path(env, "CHARTER_LOG_DIR") or home / "log",
            key_file=key_file,
            salt_file=_path(env, "CHARTER_LOG_SALT_FILE") or key_file.parent / "log.salt",
            batch_ms=_batch_ms(env.get("CHARTER_LOG_BATCH_MS")),
            public=env.get("CHARTER_LOG_PUBLIC", "") in ("1", "true", "yes"),
            gap_seconds=_seconds(env.get("CHARTER_LOG_GAP_SECONDS"), 60.0),
            policy_file=_path(env, "CHARTER_LOG_POLICY_FILE"),
            witness_timeout=_seconds(env.get("CHARTER_LOG_WITNESS_TIMEOUT"), 1.0),
            state_directory=_path(env, "CHARTER_LOG_STATE_DIR"),
        )

    def log_directory(self) -> LogDirectory:
        """The log directory, with its state directory."""
        return LogDirectory(self.directory, self.state_directory)

    @property
    def policy_path(self) -> Path:
        """The tlog-policy the sequencer publishes under."""
        return self.policy_file or self.key_file.parent / "charter.policy"

    @property
    def configured(self) -> bool:
        return self.key_file.is_file()

    def signer(self) -> Ed25519Signer:
        """The log key; `LogNotConfigured` without one."""
        try:
            text = self.key_file.read_text("ascii").strip()
        except FileNotFoundError:
            raise LogNotConfigured(
                f"no log key at {self.key_file}: run `charter log init --origin ...`"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise MalformedKey(f"cannot read the log key {self.key_file}: {exc}") from None
        return Ed25519Signer.from_skey(text)

    def salt(self) -> bytes:
        """The process-key salt (32 bytes)."""
        try:
            salt = bytes.fromhex(self.salt_file.read_text("ascii").strip())
        except FileNotFoundError:
            raise LogNotConfigured(f"no log salt at {self.salt_file}") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the log salt {self.salt_file}: {exc}") from None
        if len(salt) != SALT_SIZE:
            raise ConfigurationError(f"the log salt {self.salt_file} must be {SALT_SIZE} bytes")
        return salt


def check_origin(origin: str) -> None:
    """A log origin is a schema-less URL prefix (`charter.example.com/prod`): non-empty,
    no spaces, no `+` (a note key name), and no scheme (`https://…` names a resource, not
    a log: verifiers and witnesses match origins byte for byte)."""
    if not valid_name(origin):
        raise ConfigurationError("the origin must be non-empty, without spaces or '+'")
    scheme, colon, rest = origin.partition(":")
    if "://" in origin or (colon and scheme.isalpha() and not rest[:1].isdigit()):
        raise ConfigurationError(
            f"the origin must be a schema-less URL prefix such as charter.example.com/prod,"
            f" not {origin!r}: drop the scheme"
        )


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name)
    return Path(raw).expanduser() if raw else None


def _batch_ms(raw: str | None) -> int:
    if not raw:
        return 250
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(
            f"CHARTER_LOG_BATCH_MS must be a whole number, got {raw!r}"
        ) from None
    if value < 1:
        raise ConfigurationError("CHARTER_LOG_BATCH_MS must be at least 1")
    return value


def _seconds(raw: str | None, default: float) -> float:
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"expected a number of seconds, got {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise ConfigurationError(f"expected a finite, non-negative number of seconds: {raw!r}")
    return value
