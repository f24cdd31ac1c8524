"""The DPoP proof store in the database (`dpop.ProofStore`): registered machines by
key thumbprint, and the `jti` of every proof seen while it could still be replayed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from charter.automations.dpop import MachineIdentity
from charter.db.errors import translated
from charter.db.queries import query

Conn = psycopg.Connection[tuple[Any, ...]]


class DatabaseProofStore:
    """The DPoP proof store on one connection (its caller commits)."""

    def __init__(self, conn: Conn, *, now: datetime | None = None) -> None:
        self._conn = conn
        self._now = now

    def machine_by_thumbprint(self, thumbprint: str) -> MachineIdentity | None:
        with translated(), self._conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(query("machine_by_thumbprint"), {"thumbprint": thumbprint}).fetchone()
        return MachineIdentity(**row) if row else None

    def remember_jti(self, jti: str, machine_id: str, expires_at: datetime) -> bool:
        with translated():
            # Opportunistic pruning: expired rows can never match a proof in the window.
            self._conn.execute(query("prune_dpop_proofs"), {"now": self._now})
            row = self._conn.execute(
                query("remember_dpop_jti"),
                {"jti": jti, "machine_id": machine_id, "expires_at": expires_at, "now": self._now},
            ).fetchone()
        return row is not None
