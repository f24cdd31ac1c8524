"""What the CLI adds to an error so a newcomer knows the next step."""

from __future__ import annotations

import shlex

from charter.core.config import Settings, admin_token_path
from charter.core.errors import CharterError, Unauthorized


def hint(exc: CharterError, settings: Settings | None = None) -> str | None:
    """The next step after `exc`, or None when its message says enough."""
    if isinstance(exc, Unauthorized):
        return token_hint(settings or Settings.from_env())
    return None


def token_hint(settings: Settings) -> str:
    """Where the CLI takes its token from, and where `charter up` left one."""
    path = shlex.quote(str(admin_token_path(settings)))
    admin = (
        f'`charter up` wrote an admin token to {path} (export CHARTER_TOKEN="$(cat {path})"),'
        " and `charter tokens create` makes others"
    )
    if settings.token:
        return (
            f"CHARTER_TOKEN holds a token the API at {settings.api_url} (CHARTER_API_URL) "
            f"does not accept; {admin}"
        )
    return f"set CHARTER_TOKEN to an API token: {admin}"
