"""The machine registry: each machine's DPoP key, target and principal, registered,
listed and disabled by the administration API (bearer tokens)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter import wire
from charter.automations.dpop import thumbprint
from charter.core.errors import InvalidPublicKey, Malformed, NotFound
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.rows import RowRecord
from charter.db.errors import translated
from charter.db.queries import query
from charter.wire.automations import Machine

Conn = psycopg.Connection[tuple[Any, ...]]


@dataclass(frozen=True)
class MachineRecord(RowRecord):
    id: str
    target: str
    principal: str
    thumbprint: str
    public_jwk: JsonObject
    created_at: datetime
    disabled_at: datetime | None

    def to_json(self) -> JsonObject:
        return wire.to_json(self, Machine)


@dataclass(frozen=True)
class MachineStatus:
    """A machine as the operator sees it: the record, when it last proved itself (while
    that proof is remembered) and how many runs it holds a lease on now."""

    machine: MachineRecord
    last_seen_at: datetime | None
    runs_in_progress: int

    def to_json(self) -> JsonObject:
        return wire.to_json({**vars(self.machine), **vars(self)}, Machine)


def register_machine(
    conn: Conn,
    *,
    machine_id: str,
    target: str,
    principal: str,
    public_jwk: JsonValue,
    now: datetime | None = None,
) -> MachineRecord:
    """Register a machine's DPoP key (Duplicate if the id or the key is taken)."""
    try:
        print_ = thumbprint(public_jwk)
    except InvalidPublicKey as exc:
        raise Malformed(exc.message, field="public_jwk") from None
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("register_machine"),
            {
                "id": machine_id,
                "target": target,
                "principal": principal,
                "thumbprint": print_,
                "public_jwk": Jsonb(public_jwk),
                "now": now,
            },
        ).fetchone()
    assert row is not None
    return MachineRecord.from_dict(row)


def list_machines(conn: Conn, principal: str, *, everyone: bool = False) -> list[MachineStatus]:
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            query("list_machines"), {"principal": principal, "all": everyone}
        ).fetchall()
    return [
        MachineStatus(MachineRecord.from_dict(r), r["last_seen_at"], int(r["runs_in_progress"]))
        for r in rows
    ]


def set_machine_disabled(
    conn: Conn,
    machine_id: str,
    principal: str,
    *,
    disabled: bool,
    everyone: bool = False,
    now: datetime | None = None,
) -> MachineRecord:
    """Disable or re-enable a machine; NotFound for another principal's machine too."""
    with translated(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            query("set_machine_disabled"),
            {
                "id": machine_id,
                "principal": principal,
                "all": everyone,
                "disabled": disabled,
                "now": now,
            },
        ).fetchone()
    if row is None:
        raise NotFound(f"no machine {machine_id}")
    return MachineRecord.from_dict(row)
