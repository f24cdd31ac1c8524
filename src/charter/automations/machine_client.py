"""The machine's client of the machine API: httpx, a fresh DPoP proof on every request.

Error responses become the CharterError of their code (`lease_lost` is `LeaseLost`,
`invalid_dpop` is `InvalidDpop`, ...); transport failures are raised as httpx's own
exceptions, so `executor.transient_failure` can tell a timeout from a refusal. Every
call must finish, its whole answer read, within `timeout` seconds (15 s by default);
past it the call raises `charter.deadline.DeadlineExceeded`, an httpx timeout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

# leases also defines the journal's error codes, so error_from_response knows them.
from charter import deadline
from charter.automations import leases
from charter.automations.dpop import make_proof, public_jwk
from charter.core import ijson
from charter.core.ed25519 import SecretKey
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339, parse_rfc3339
from charter.sdk.client import Client
from charter.sdk.errors import OK, raise_for_answer
from charter.sdk.protocol import DEFAULT_TIMEOUT
from charter.tracing import traceparent

_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
# How long a claim waits for a run by default (a long poll); the service's cap is 30 s.
DEFAULT_WAIT_SECONDS = 20.0
# A claim answers 200 with a run, or 204 when there is none.
_CLAIMED = frozenset({200, 204})


@dataclass(frozen=True)
class JournalEntry:
    step_id: str
    status: str
    idempotency_key: str
    output: JsonValue
    attempts: int

    @classmethod
    def from_json(cls, value: JsonValue) -> JournalEntry:
        row = _object(value)
        return cls(
            step_id=str(row["step_id"]),
            status=str(row["status"]),
            idempotency_key=str(row["idempotency_key"]),
            output=row.get("output"),
            attempts=int(str(row.get("attempts", 1))),
        )


@dataclass(frozen=True)
class ClaimedRun:
    """A run this machine holds: the plan snapshot, the lease and the journal so far."""

    run_id: str
    plan: JsonValue
    input: JsonValue
    attempts: int
    token: str
    lease_expires_at: datetime
    journal: dict[str, JournalEntry]
    traceparent: str | None = None  # the admitting span's trace, which the steps continue
    started: JournalEntry | None = None  # its first incomplete step, journalled running

    @classmethod
    def from_json(cls, value: JsonValue) -> ClaimedRun:
        body = _object(value)
        run, lease = _object(body["run"]), _object(body["lease"])
        journal_rows = body.get("journal")
        entries = (
            [JournalEntry.from_json(r) for r in journal_rows or []]
            if isinstance(journal_rows, list)
            else []
        )
        return cls(
            run_id=str(run["id"]),
            plan=run.get("plan"),
            input=run.get("input"),
            attempts=int(str(run.get("attempts", 1))),
            token=str(lease["token"]),
            lease_expires_at=parse_rfc3339(str(lease["expires_at"])),
            journal={e.step_id: e for e in entries},
            traceparent=_traceparent(body.get("traceparent")),
            started=JournalEntry.from_json(started) if (started := body.get("started")) else None,
        )


def _traceparent(value: JsonValue) -> str | None:
    """A claim's `traceparent`, if it has the W3C form (anything else starts a new trace)."""
    return value if isinstance(value, str) and _TRACEPARENT.fullmatch(value) else None


class MachineClient:
    """Calls `/v1/machine/...` at `base_url` as the machine whose key is `key`.

    `base_url` must be the API's public origin (what the service compares `htu` with);
    `now` is the clock proofs take their `iat` from. A claim waits up to `wait` seconds
    for a run (a long poll; 0 answers at once); its deadline is `timeout` past that.
    With `start` (the default) every claim also journals the run's first incomplete step
    running and hands it over as `ClaimedRun.started`: no `start_step` request for it.
    """

    def __init__(
        self,
        base_url: str,
        key: SecretKey,
        *,
        now: Callable[[], datetime] | None = None,
        lease_seconds: float = leases.DEFAULT_LEASE_SECONDS,
        timeout: float = DEFAULT_TIMEOUT,
        wait: float = DEFAULT_WAIT_SECONDS,
        http: httpx.AsyncClient | None = None,
        start: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.lease_seconds = lease_seconds
        self.wait = wait
        self.start = start
        self.timeout = timeout  # the deadline of every call, in seconds
        self._now = now or (lambda: datetime.now(UTC))
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> MachineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the protocol -----------------------------------------------------------------

    async def claim(self, wait: float | None = None) -> ClaimedRun | None:
        """Claim a run for this machine's target, or None (204) when there is none
        within `wait` seconds (default: this client's `wait`)."""
        waited = self.wait if wait is None else wait
        body: JsonObject = {"lease_seconds": self.lease_seconds}
        if waited > 0:
            body["wait"] = waited
        if self.start:
            body["start"] = True
        response = await self._request(
            "POST", "/v1/machine/runs/claim", body, extra=waited, expect=_CLAIMED
        )
        if response.status_code == 204:
            return None
        return ClaimedRun.from_json(ijson.loads(response.content))

    async def renew(self, run_id: str, token: str) -> datetime:
        """Renew the lease; LeaseLost when it is not current any more."""
        body = await self._json(
            "POST",
            f"/v1/machine/runs/{_segment(run_id)}/lease",
            {"token": token, "lease_seconds": self.lease_seconds},
        )
        return parse_rfc3339(str(body["expires_at"]))

    async def start_step(self, run_id: str, step_id: str, token: str) -> JournalEntry:
        """Journal the step as running; its entry carries the stable idempotency key."""
        body = await self._json(
            "POST",
            f"/v1/machine/runs/{_segment(run_id)}/steps/{_segment(step_id)}/start",
            {"token": token},
        )
        return JournalEntry.from_json(body["step"])

    async def complete_step(
        self, run_id: str, step_id: str, token: str, output: JsonValue
    ) -> JournalEntry:
        body = await self._json(
            "POST",
            f"/v1/machine/runs/{_segment(run_id)}/steps/{_segment(step_id)}/complete",
            {"token": token, "output": output},
        )
        return JournalEntry.from_json(body["step"])

    async def complete_and_start(
        self, run_id: str, step_id: str, token: str, output: JsonValue, next_step: str
    ) -> JournalEntry:
        """Journal the step's output and the next step running and renew the lease, in
        one request; the next step's entry (with its idempotency key) comes back."""
        body = await self._json(
            "POST",
            f"/v1/machine/runs/{_segment(run_id)}/steps/{_segment(step_id)}/complete",
            {
                "token": token,
                "output": output,
                "next": next_step,
                "lease_seconds": self.lease_seconds,  # renewed at every step, too
            },
        )
        return JournalEntry.from_json(body["next"])

    async def complete_run(self, run_id: str, token: str, output: JsonValue) -> JsonObject:
        body = await self._json(
            "POST",
            f"/v1/machine/runs/{_segment(run_id)}/complete",
            {"token": token, "output": output},
        )
        return _object(body["run"])

    async def finish(
        self, run_id: str, token: str, output: JsonValue, *, step: str | None, claim: bool
    ) -> ClaimedRun | None:
        """Complete the run in one request: journal `step`'s output first (when given)
        and, with `claim`, claim this machine's next run, which comes back (or None)."""
        request: JsonObject = {"token": token, "output": output}
        if step is not None:
            request["step"] = step
        if claim:
            asked: JsonObject = {"lease_seconds": self.lease_seconds}
            if self.start:
                asked["start"] = True
            request["claim"] = asked
        body = await self._json("POST", f"/v1/machine/runs/{_segment(run_id)}/complete", request)
        claimed = body.get("claim")
        return ClaimedRun.from_json(claimed) if claimed is not None else None

    async def fail_run(self, run_id: str, token: str, error: str) -> JsonObject:
        body = await self._json(
            "POST", f"/v1/machine/runs/{_segment(run_id)}/fail", {"token": token, "error": error}
        )
        return _object(body["run"])

    async def release_run(
        self, run_id: str, token: str, error: str, retry_at: datetime | None
    ) -> JsonObject:
        request: JsonObject = {"token": token, "error": error}
        if retry_at is not None:
            request["retry_at"] = format_rfc3339(retry_at)
        body = await self._json("POST", f"/v1/machine/runs/{_segment(run_id)}/release", request)
        return _object(body["run"])

    # --- plumbing ---------------------------------------------------------------------

    def proof(self, method: str, path: str, *, jti: str | None = None) -> str:
        """A DPoP proof for `method` on `path` under this client's base URL."""
        return make_proof(
            self.key, method, self.base_url + path, iat=self._now().timestamp(), jti=jti
        )

    async def _json(self, method: str, path: str, body: JsonObject) -> JsonObject:
        response = await self._request(method, path, body)
        return _object(ijson.loads(response.content))

    async def _request(
        self,
        method: str,
        path: str,
        body: JsonObject,
        *,
        extra: float = 0.0,
        expect: frozenset[int] = OK,
    ) -> httpx.Response:
        """One request with a fresh proof, within `timeout` (+ `extra`: a long poll's
        wait) seconds; its answer, when its status is one of `expect` (any other, a
        redirect too, is the error it stands for: UnexpectedStatus below 400)."""
        headers = {
            "DPoP": self.proof(method, path),
            "Content-Type": "application/json",
            "Accept": "application/json",
            # The step's trace, when there is one: the service's spans join it.
            **traceparent(),
        }
        response = await deadline.arequest(
            self._http,
            self.timeout + extra,
            method,
            self.base_url + path,
            headers=headers,
            content=_encode(body),
            timeout=self.timeout + extra,  # a long poll waits longer than a read timeout
        )
        raise_for_answer(response, expect)
        return response


def register_machine(
    api_url: str,
    token: str,
    key: SecretKey,
    *,
    target: str,
    machine_id: str | None = None,
    principal: str | None = None,
    http: httpx.Client | None = None,
) -> JsonObject:
    """POST /v1/machines with a bearer token (`automations:write`; `*` for `principal`)."""
    with Client(api_url, token, http=http, timeout=DEFAULT_TIMEOUT) as api:
        machine = api.register_machine(
            target, public_jwk(key), machine_id=machine_id, principal=principal
        )
    return machine.raw


def _object(value: Any) -> JsonObject:
    if not isinstance(value, dict):
        raise CharterError("the machine API answered with a non-object")
    return value


def _segment(value: str) -> str:
    return quote(value, safe="")


def _encode(value: JsonValue) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
