"""Actors: an id, roles and one active public key (docs/wire-format.md and docs/architecture.md).

Keys are checked at registration (canonical, on the curve, not small-order), only the
actor `automation` may hold AUTOMATION and it holds AUTOMATION alone (both also database
constraints), and a rotated key is retired, never deleted, so the history it signed
stays verifiable. Every change is written to system_log in its transaction, with who
made it (`by`: the API token's principal and id; none for a change made on the database
directly, as `charter up` registering the automation actor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import psycopg
from psycopg.types.json import Jsonb

from charter import wire
from charter.core import identifiers
from charter.core.ed25519 import check_public_key
from charter.core.errors import AutomationRolesFixed, Duplicate, Forbidden, Malformed, NotFound
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.errors import translated
from charter.db.queries import query
from charter.engine.records import AUTOMATION_ACTOR_ID, AUTOMATION_ROLE
from charter.wire.engine import Actor

Conn = psycopg.Connection[tuple[Any, ...]]
_ID = identifiers.PRINCIPAL
_ROLE = identifiers.NAME


@dataclass(frozen=True)
class ActorRecord:
    id: str
    roles: tuple[str, ...]
    public_key: str | None
    disabled_at: datetime | None
    created_at: datetime
    key_count: int

    @property
    def disabled(self) -> bool:
        return self.disabled_at is not None

    @property
    def keys(self) -> int:
        return self.key_count

    def to_json(self) -> JsonObject:
        return wire.to_json(self, Actor)


def check_roles(actor_id: str, roles: Sequence[str]) -> list[str]:
    if not isinstance(roles, list | tuple) or not all(isinstance(r, str) for r in roles):
        raise Malformed("roles must be a list of strings")
    for role in roles:
        if not _ROLE.fullmatch(role):
            raise Malformed(f"role {role!r} must match {_ROLE.pattern}")
    if AUTOMATION_ROLE in roles and actor_id != AUTOMATION_ACTOR_ID:
        raise Forbidden(f"only the actor {AUTOMATION_ACTOR_ID!r} may hold {AUTOMATION_ROLE}")
    if actor_id == AUTOMATION_ACTOR_ID and set(roles) != {AUTOMATION_ROLE}:
        raise AutomationRolesFixed(
            f"the automation actor holds the {AUTOMATION_ROLE} role alone: its roles "
            f"cannot be changed (asked for {sorted(set(roles))})"
        )
    return sorted(set(roles))


@dataclass(frozen=True)
class Changer:
    """Who changes an actor: an API token's principal and id."""

    principal: str
    token_id: str


def add_actor(
    conn: Conn,
    actor_id: str,
    public_key: str,
    roles: Sequence[str],
    *,
    by: Changer | None = None,
) -> ActorRecord:
    """Register an actor with its first key."""
    if not isinstance(actor_id, str) or not _ID.fullmatch(actor_id):
        raise Malformed(f"actor id must match {_ID.pattern}")
    check_public_key(public_key)
    clean_roles = check_roles(actor_id, roles)
    with translated(), conn.transaction():
        if (
            conn.execute(query("insert_actor"), {"id": actor_id, "roles": clean_roles}).fetchone()
            is None
        ):
            raise Duplicate(f"actor {actor_id!r} already exists")
        _insert_key(conn, actor_id, public_key)
        record = get_actor(conn, actor_id)
        _log(conn, "actor.added", record, by, "registered", {"roles": [*record.roles]})
    return record


def rotate_key(
    conn: Conn, actor_id: str, public_key: str, *, by: Changer | None = None
) -> ActorRecord:
    """Retire the actor's active key and make `public_key` its key from now on."""
    check_public_key(public_key)
    with translated(), conn.transaction():
        before = get_actor(conn, actor_id)
        conn.execute(query("retire_active_key"), {"actor_id": actor_id})
        _insert_key(conn, actor_id, public_key)
        record = get_actor(conn, actor_id)
        _log(conn, "actor.key_rotated", record, by, "given a new key",
             {"previous_key": before.public_key})  # fmt: skip
    return record


def set_disabled(
    conn: Conn, actor_id: str, disabled: bool, *, by: Changer | None = None
) -> ActorRecord:
    with translated(), conn.transaction():
        row = conn.execute(
            query("set_actor_disabled"), {"id": actor_id, "disabled": disabled}
        ).fetchone()
        if row is None:
            raise NotFound(f"no actor {actor_id!r}")
        record = get_actor(conn, actor_id)
        if disabled:
            _log(conn, "actor.disabled", record, by, "disabled", {})
        else:
            _log(conn, "actor.enabled", record, by, "enabled", {})
    return record


def set_roles(
    conn: Conn, actor_id: str, roles: Sequence[str], *, by: Changer | None = None
) -> ActorRecord:
    clean_roles = check_roles(actor_id, roles)
    with translated(), conn.transaction():
        before = get_actor(conn, actor_id)
        conn.execute(query("set_actor_roles"), {"id": actor_id, "roles": clean_roles})
        record = get_actor(conn, actor_id)
        _log(conn, "actor.roles_set", record, by, f"given the roles {clean_roles}",
             {"roles": [*clean_roles], "previous_roles": [*before.roles]})  # fmt: skip
    return record


def get_actor(conn: Conn, actor_id: str) -> ActorRecord:
    with translated():
        row = conn.execute(query("get_actor"), {"id": actor_id}).fetchone()
    if row is None:
        raise NotFound(f"no actor {actor_id!r}")
    return _record(row)


def list_actors(conn: Conn) -> list[ActorRecord]:
    with translated():
        rows = conn.execute(query("list_actors")).fetchall()
    return [_record(r) for r in rows]


def _log(
    conn: Conn,
    kind: str,
    record: ActorRecord,
    by: Changer | None,
    what: str,
    detail: dict[str, JsonValue],
) -> None:
    """One system_log row for a change to `record` (as it is after the change). Changes
    to the automation actor are warnings: its key signs every automated event."""
    automation = record.id == AUTOMATION_ACTOR_ID
    who = f" by {by.principal}" if by else ""
    subject = "the automation actor" if automation else f"actor {record.id!r}"
    conn.execute(
        query("log_actor_change"),
        {
            "level": "warning" if automation else "info",
            "kind": kind,
            "actor": record.public_key,
            "message": f"{subject} {what}{who}",
            "detail": Jsonb(
                {
                    "actor_id": record.id,
                    "by": by.principal if by else None,
                    "token_id": by.token_id if by else None,
                    "public_key": record.public_key,
                    **detail,
                }
            ),
        },
    )


def _insert_key(conn: Conn, actor_id: str, public_key: str) -> None:
    inserted = conn.execute(
        query("insert_actor_key"), {"public_key": public_key, "actor_id": actor_id}
    ).fetchone()
    if inserted is None:
        raise Duplicate(f"the key {public_key} is already registered")


def _record(row: tuple[Any, ...]) -> ActorRecord:
    return ActorRecord(
        id=row[0],
        roles=tuple(row[1]),
        disabled_at=row[2],
        created_at=cast(datetime, row[3]),
        public_key=row[4],
        key_count=int(row[5]),
    )
