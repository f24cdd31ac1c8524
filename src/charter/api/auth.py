"""Bearer-token authentication and scopes for reads and administration (docs/api.md).

`require(scope)` is a FastAPI dependency: no token, an unknown or a revoked one is 401
`unauthorized`; a token without the scope (and without `*`) is 403 `forbidden`. Signed
event submission takes no token: the signature is its authority.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from charter.api.state import Services, services
from charter.auth.tokens import TokenInfo, find_token
from charter.core.errors import Forbidden, Unauthorized
from charter.db.database import Role

# auto_error=False: a missing header is our 401 in our shape, not FastAPI's 403.
_bearer = HTTPBearer(auto_error=False, description="A token from `charter tokens create`.")
bearer = _bearer  # for routes that decide per request whether a token is needed


def require(scope: str) -> Callable[..., TokenInfo]:
    """A dependency that admits a request whose bearer token grants `scope`."""

    def admitted(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        context: Annotated[Services, Depends(services)],
    ) -> TokenInfo:
        if credentials is None or not credentials.credentials:
            raise Unauthorized("this request needs a bearer token (Authorization: Bearer ...)")
        # The API reads token hashes as the engine role; reader and worker never see them.
        with context.database.connection(Role.ENGINE) as conn, conn.transaction():
            token = find_token(conn, credentials.credentials)
        if token is None:
            raise Unauthorized("the bearer token is not known")
        if token.revoked_at is not None:
            raise Unauthorized("the bearer token was revoked")
        if not token.grants(scope):
            raise Forbidden(f"the token lacks the scope {scope!r}", scope=scope)
        return token

    admitted.__name__ = f"require_{scope.replace(':', '_').replace('*', 'all')}"
    return admitted
