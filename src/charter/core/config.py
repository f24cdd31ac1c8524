"""Settings read from the environment (docs/operations.md), with sane defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from charter.core.errors import ConfigurationError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8420


def _default_home() -> Path:
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "charter"


@dataclass(frozen=True)
class Settings:
    """Everything Charter reads from its environment."""

    database_url: str | None = None
    home: Path = field(default_factory=_default_home)
    automation_secret_key: str | None = None
    api_url: str = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
    token: str | None = None
    clock_skew_seconds: float = 300.0
    max_body_bytes: int = 2 * 1024 * 1024
    # Automatic events in a row before the engine stops a cascade (docs/automation.md).
    max_auto_cascade: int = 100

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        home = env.get("CHARTER_HOME")
        return cls(
            database_url=env.get("CHARTER_DATABASE_URL") or None,
            home=Path(home).expanduser() if home else _default_home(),
            automation_secret_key=env.get("AUTOMATION_ACTOR_SK") or None,
            api_url=env.get("CHARTER_API_URL") or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
            token=env.get("CHARTER_TOKEN") or None,
            clock_skew_seconds=_float(env, "CHARTER_CLOCK_SKEW_SECONDS", 300.0),
            max_auto_cascade=_positive_int(env, "CHARTER_MAX_AUTO_CASCADE", 100),
        )

    @property
    def pgdata(self) -> Path:
        """Where the embedded PostgreSQL keeps its data."""
        return self.home / "pgdata"


def admin_token_path(settings: Settings) -> Path:
    """Where `charter up` keeps its admin (`*`) API token, mode 0600."""
    return settings.home / "admin-token"


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None
    if value != value or value < 0 or value == float("inf"):
        raise ConfigurationError(f"{name} must be a finite, non-negative number")
    return value


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ConfigurationError(f"{name} must be at least 1, got {value}")
    return value
