"""Bearer tokens: made once, stored as SHA-256, found by hash, refused once revoked.

The token text is shown to its creator once and never stored; the database keeps only
its SHA-256, so a leaked table grants nothing. Scopes are the fixed set of docs/api.md
(`*` grants every scope).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast
from uuid import UUID

import psycopg

from charter.core import identifiers
from charter.core.errors import Malformed, NotFound
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.errors import translated
from charter.db.queries import query

Conn = psycopg.Connection[tuple[Any, ...]]

TOKEN_PREFIX = "ch_"  # noqa: S105 (a prefix that makes tokens recognisable, not a secret)
ALL_SCOPES = "*"
SCOPES = frozenset(
    {
        "automations:read",
        "automations:write",
        "runs:read",
        "runs:execute",
        "processes:read",
        "personal:read",
        "workflows:write",
        "actors:write",
        "log:read",
        ALL_SCOPES,
    }
)
DEFAULT_PRINCIPAL = "admin"
_PRINCIPAL = identifiers.PRINCIPAL
MAX_NAME = 200


@dataclass(frozen=True)
class TokenInfo:
    """A stored token, without its hash."""

    id: str
    name: str
    principal: str
    scopes: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None

    def grants(self, scope: str) -> bool:
        return ALL_SCOPES in self.scopes or scope in self.scopes

    @property
    def admin(self) -> bool:
        """A `*` token: it sees and changes every principal's automations, runs and
        machines, and may change the automation actor's key and status."""
        return ALL_SCOPES in self.scopes

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "name": self.name,
            "principal": self.principal,
            "scopes": list(self.scopes),
            "created_at": format_rfc3339(self.created_at),
            "revoked_at": format_rfc3339(self.revoked_at) if self.revoked_at else None,
        }


def token_hash(token: str) -> str:
    """The stored form of a token: lowercase hex SHA-256 of its UTF-8 text."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes, deduplicated and sorted; Malformed if none or any is unknown."""
    chosen = sorted(set(scopes))
    if not chosen:
        raise Malformed("a token needs at least one scope")
    unknown = [s for s in chosen if s not in SCOPES]
    if unknown:
        raise Malformed(f"unknown scope(s) {unknown}; choose from {sorted(SCOPES)}")
    return chosen


def create_token(
    conn: Conn, *, scopes: Iterable[str], name: str = "", principal: str = DEFAULT_PRINCIPAL
) -> str:
    """A new token's text, to show once (`find_token` gives its record)."""
    clean = check_scopes(scopes)
    if not _PRINCIPAL.fullmatch(principal):
        raise Malformed(f"principal must match {_PRINCIPAL.pattern}")
    if len(name) > MAX_NAME:
        raise Malformed(f"a token name has at most {MAX_NAME} characters")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with translated(), conn.transaction():
        conn.execute(
            query("insert_token"),
            {
                "name": name,
                "principal": principal,
                "token_hash": token_hash(token),
                "scopes": clean,
            },
        )
    return token


def find_token(conn: Conn, token: str) -> TokenInfo | None:
    """The record of a token's text, revoked or not; None if it was never issued."""
    with translated():
        row = conn.execute(query("token_by_hash"), {"token_hash": token_hash(token)}).fetchone()
    return _info(row) if row else None


def list_tokens(conn: Conn) -> list[TokenInfo]:
    with translated():
        rows = conn.execute(query("list_tokens")).fetchall()
    return [_info(r) for r in rows]


def revoke_token(conn: Conn, token_id: str) -> None:
    """Revoke a token by id; NotFound if there is none."""
    try:
        uuid = UUID(token_id)
    except ValueError:
        raise NotFound(f"no token {token_id!r}") from None
    with translated(), conn.transaction():
        row = conn.execute(query("revoke_token"), {"id": uuid}).fetchone()
    if row is None:
        raise NotFound(f"no token {token_id!r}")


def _info(row: tuple[Any, ...]) -> TokenInfo:
    return TokenInfo(
        id=str(row[0]),
        name=str(row[1]),
        principal=str(row[2]),
        scopes=tuple(cast("list[str]", row[3])),
        created_at=row[4],
        revoked_at=row[5],
    )
