"""The machine gate: how the service lets a machine's request in, and how a claim waits.

Every `/v1/machine/` request is authenticated by a DPoP proof alone (RFC 9449, `dpop`).
`prove` checks the proof (form, signature, htm, htu, iat) before any database work, so
a forgery costs no connection; `MachineGate.admitted` then admits it (a registered,
enabled machine's key; the `jti` recorded, a replay refused) in the transaction that
does the request's work. `MachineGate.claim` is the claim with its long poll, and
`MachineGate.released` wakes the claims waiting for a run released to the queue.
The API's routes only map HTTP onto these (api/routes_machine.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from anyio import to_thread

from charter.automations import leases
from charter.automations.dpop import (
    IAT_WINDOW_SECONDS,
    CheckedProof,
    MachineIdentity,
    admit,
    check_proof,
    request_htu,
)
from charter.automations.ledger import RunRecord
from charter.automations.proof_store import DatabaseProofStore
from charter.automations.wakeups import RunWakeups, run_hint
from charter.core.clock import Clock
from charter.core.errors import CharterError
from charter.core.errors.automations import InvalidDpop
from charter.db.database import Database, Role, pipelined_transaction
from charter.db.hints import send_hints

Conn = psycopg.Connection[tuple[Any, ...]]

_JTI_MEMORY = timedelta(seconds=3 * IAT_WINDOW_SECONDS)
MAX_WAIT_SECONDS = 30.0  # a long-poll claim's longest wait (proxies cut idle requests)


@dataclass(frozen=True)
class Proven:
    """A request whose DPoP proof passed every check that needs no database."""

    proof: CheckedProof
    now: datetime


def prove(proofs: Sequence[str], *, method: str, path: str, origin: str, now: datetime) -> Proven:
    """The request's one DPoP proof (`proofs`: its `DPoP` headers), checked at `now`
    against its method and the URL a client behind the public `origin` (Settings.api_url:
    a proxy in front of the API changes nothing) used for `path`."""
    if len(proofs) != 1:
        raise InvalidDpop("a machine request needs exactly one DPoP header")
    url = request_htu(origin, path)
    checked = check_proof(proofs[0], method=method, url=url, now=now, window=IAT_WINDOW_SECONDS)
    return Proven(checked, now)


class MachineGate:
    """The machine API's side of the database: admission, claims and their waits."""

    def __init__(self, database: Database, clock: Clock, wakeups: RunWakeups) -> None:
        self.database = database
        self.clock = clock
        self.wakeups = wakeups

    @contextmanager
    def admitted(self, proven: Proven) -> Iterator[tuple[Conn, MachineIdentity]]:
        """One transaction that admits the proof and then does the request's work.

        The `jti` commits with the work: one commit per request. If the work fails its
        transaction rolls back, so the `jti` is recorded again on its own: a proof is
        spent whether or not its request succeeded. In pipeline mode: BEGIN travels with
        the machine's lookup and the pruning with the `jti`'s insert, two round trips
        fewer.
        """
        db_now = self.clock.now_or_none()
        machine: MachineIdentity | None = None
        try:
            with self.database.connection(Role.ENGINE) as conn, pipelined_transaction(conn):
                store = DatabaseProofStore(conn, now=db_now)
                machine = admit(store, proven.proof, now=proven.now, window=IAT_WINDOW_SECONDS)
                yield conn, machine
        except BaseException:
            if machine is not None:
                with (
                    contextlib.suppress(CharterError),
                    self.database.connection(Role.ENGINE) as conn,
                    conn.transaction(),
                ):
                    DatabaseProofStore(conn, now=db_now).remember_jti(
                        proven.proof.jti, machine.id, proven.now + _JTI_MEMORY
                    )
            raise

    async def claim(
        self,
        proven: Proven,
        *,
        lease_seconds: float,
        wait: float,
        start: bool,
        disconnected: Callable[[], Awaitable[bool]],
    ) -> leases.Claim | None:
        """Claim a run for the proven machine, or None. With `wait` > 0 this is a long
        poll: when nothing is claimable it waits, holding no database connection, until
        a hint says a run of the machine's target was admitted (or a re-check finds
        one), and answers None only when the wait is over. The proof is spent once, by
        the first attempt. `disconnected` says whether the client went away."""
        claimed, machine = await to_thread.run_sync(
            self._claim_admitted, proven, lease_seconds, start
        )
        if claimed is None and wait > 0:
            claimed = await self._long_poll(machine, lease_seconds, wait, start, disconnected)
        return claimed

    def _claim_admitted(
        self, proven: Proven, lease_seconds: float, start: bool
    ) -> tuple[leases.Claim | None, MachineIdentity]:
        """The first attempt: the proof admitted (its jti spent) and a claim, one commit."""
        with self.admitted(proven) as (conn, machine):
            claimed = leases.claim_run(
                conn,
                machine,
                lease_seconds=lease_seconds,
                now=self.clock.now_or_none(),
                start=start,
            )
        return claimed, machine

    async def _long_poll(
        self,
        machine: MachineIdentity,
        lease_seconds: float,
        wait: float,
        start: bool,
        disconnected: Callable[[], Awaitable[bool]],
    ) -> leases.Claim | None:
        """Claim again whenever a hint for the machine's runs arrives, and every re-check
        interval in case one was lost, until a run is claimed or `wait` seconds pass.

        The waiter is registered before each check and cleared before it, so a hint that
        arrives while a check runs makes the next one start at once. A client that went
        away is not handed a run (it would sit leased to nobody until the lease lapsed),
        and a stopping server answers its waiting claims at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        wakeups = self.wakeups
        with wakeups.waiting(machine.principal, machine.target) as woken:
            while True:
                woken.clear()
                if wakeups.draining or await disconnected():
                    return None
                claimed = await to_thread.run_sync(self._claim_again, machine, lease_seconds, start)
                left = deadline - loop.time()
                if claimed is not None or left <= 0:
                    return claimed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=min(wakeups.recheck, left))

    def _claim_again(
        self, machine: MachineIdentity, lease_seconds: float, start: bool
    ) -> leases.Claim | None:
        """A later attempt of a long poll: the proof is spent already, but the machine
        must still be registered and enabled."""
        with self.database.connection(Role.ENGINE) as conn, conn.transaction():
            current = DatabaseProofStore(conn).machine_by_thumbprint(machine.thumbprint)
            if current is None or current.disabled or current.id != machine.id:
                raise InvalidDpop(f"machine {machine.id} was disabled while its claim waited")
            return leases.claim_run(
                conn,
                current,
                lease_seconds=lease_seconds,
                now=self.clock.now_or_none(),
                start=start,
            )

    def released(self, run: RunRecord) -> None:
        """After a release commits: a run claimable at once (a stopping machine's
        release) wakes the machines waiting for its target."""
        if run.retry_at is not None and run.retry_at <= self.clock.now():
            with self.database.connection(Role.ENGINE) as conn:
                send_hints(conn, [run_hint(run.principal, run.target)])
