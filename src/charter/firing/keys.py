"""The automation actor's key: made once, kept out of the database, checked at start.

The secret lives in `AUTOMATION_ACTOR_SK` or, for `charter up`, in
`$CHARTER_HOME/automation.key` (mode 0600); the database holds only the public key
of the actor `automation` (keys are never co-located: the automation key is not kept in the
database).
"""

from __future__ import annotations

from pathlib import Path

from charter.core.config import Settings
from charter.core.ed25519 import SecretKey, read_secret_key_file, write_secret_key_file
from charter.core.errors import CharterError, InvalidSecretKey
from charter.db.database import Database, Role
from charter.db.queries import query
from charter.engine import actors
from charter.engine.records import AUTOMATION_ACTOR_ID, AUTOMATION_ROLE


class AutomationKeyError(CharterError):
    """The automation key is missing or does not match the automation actor."""

    code = "automation_key"


def key_file(settings: Settings) -> Path:
    return settings.home / "automation.key"


def registered_public_key(database: Database) -> str | None:
    """The automation actor's active public key, or None if it is not registered."""
    with database.connection(Role.READER) as conn:
        row = conn.execute(query("automation_actor_keys")).fetchone()
    return str(row[0]) if row else None


def load_secret(settings: Settings) -> SecretKey:
    """The worker's secret: AUTOMATION_ACTOR_SK, else the key file `charter up` made."""
    if settings.automation_secret_key:
        try:
            return SecretKey.from_hex(settings.automation_secret_key.strip())
        except InvalidSecretKey:
            raise AutomationKeyError(
                "AUTOMATION_ACTOR_SK is not a secret key (64 lowercase hex characters)"
            ) from None
    path = key_file(settings)
    if not path.exists():
        raise AutomationKeyError(
            f"no automation key: set AUTOMATION_ACTOR_SK, or run `charter up` once to create {path}"
        )
    return read_secret_key_file(path)


def verified_secret(settings: Settings, database: Database) -> SecretKey:
    """The worker's secret, refused unless it matches the registered automation actor."""
    secret = load_secret(settings)
    registered = registered_public_key(database)
    if registered is None:
        raise AutomationKeyError(
            "the automation actor is not registered; `charter up` registers it on first "
            "start, or register it with `charter actors add automation --key-file FILE "
            "--role AUTOMATION`"
        )
    if registered != secret.public_key_hex:
        raise AutomationKeyError(
            "the automation secret key does not match the automation actor's public key "
            f"({registered[:16]}…); refusing to start"
        )
    return secret


def ensure_automation_actor(settings: Settings, database: Database) -> SecretKey:
    """First start: make the key pair (unless given) and register the public key.

    Later starts only verify. A registered actor whose key differs is an error: a
    rotation is an explicit operator act (`charter actors rotate`), never a side effect.
    """
    registered = registered_public_key(database)
    if settings.automation_secret_key or key_file(settings).exists():
        secret = load_secret(settings)
    elif registered is None:
        secret = SecretKey.generate()
        settings.home.mkdir(parents=True, exist_ok=True)
        write_secret_key_file(key_file(settings), secret)
    else:
        raise AutomationKeyError(
            f"the automation actor is registered but {key_file(settings)} is missing and "
            "AUTOMATION_ACTOR_SK is unset"
        )
    if registered is None:
        with database.connection(Role.ENGINE) as conn:
            actors.add_actor(conn, AUTOMATION_ACTOR_ID, secret.public_key_hex, [AUTOMATION_ROLE])
            conn.commit()
    return verified_secret(settings, database)
