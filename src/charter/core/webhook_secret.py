"""Fresh webhook secrets in the Standard Webhooks format, made where the automations
service generates one and where the SDK rotates one."""

from __future__ import annotations

import base64
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105 (the Standard Webhooks prefix, not a secret)


def new_secret() -> str:
    """A fresh webhook secret: `whsec_` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")
