"""The machine's client of the machine API: the SDK's request core, a fresh DPoP proof on
every try.

Each request is an SDK `Call` whose `attempt_headers` add a new proof (and the step's
trace) to every try; `Attempts` holds the call's deadline and, with a retry policy,
its tries (none by default: the executor releases a run a failed call leaves, and a
later claim is its retry). Error answers become the CharterError of their code
(`lease_lost` is `LeaseLost`, `invalid_dpop` is `InvalidDpop`, ...);
transport failures are raised as httpx's own exceptions, so
`failures.transient_failure` can tell a timeout from a refusal. Every call must
finish, its whole answer read, within `timeout` seconds (15 s by default); past it the
call raises `charter.deadline.DeadlineExceeded`, an httpx timeout.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from charter import deadline, wire
from charter.automations.dpop import make_proof, public_jwk
from charter.core import ijson
from charter.core.ed25519 import SecretKey
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.sdk.client import Client
from charter.sdk.errors import OK, UnexpectedResponse, answer_error, transport_error
from charter.sdk.protocol import (
    DEFAULT_TIMEOUT,
    NO_RETRY,
    Attempts,
    Call,
    RetryPolicy,
    encode,
    retry_after,
)
from charter.tracing import traceparent
from charter.wire.automations import Claim, Lease, RunAnswer, RunStep, StepAnswer

T = TypeVar("T")
W = TypeVar("W", bound=wire.Wire)

_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
# How long a claim waits for a run by default (a long poll); the service's cap is 30 s.
DEFAULT_WAIT_SECONDS = 20.0
# The lease a claim asks for by default (the service's own default, too).
DEFAULT_LEASE_SECONDS = 30.0
# A claim answers 200 with a run, or 204 when there is none.
_CLAIMED = frozenset({200, 204})


# A row of a run's step journal, as the machine API answers it.
JournalEntry = RunStep


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
        return cls.of(_parse(Claim, value))

    @classmethod
    def of(cls, claim: Claim) -> ClaimedRun:
        return cls(
            run_id=claim.run.id,
            plan=claim.run.plan,
            input=claim.run.input,
            attempts=claim.run.attempts,
            token=claim.lease.token,
            lease_expires_at=claim.lease.expires_at,
            journal={e.step_id: e for e in claim.journal},
            traceparent=_traceparent(claim.traceparent),
            started=claim.started,
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
    `retry` is how often a failed call is tried again within its deadline (never, by
    default).
    """

    def __init__(
        self,
        base_url: str,
        key: SecretKey,
        *,
        now: Callable[[], datetime] | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        timeout: float = DEFAULT_TIMEOUT,
        wait: float = DEFAULT_WAIT_SECONDS,
        http: httpx.AsyncClient | None = None,
        start: bool = True,
        retry: RetryPolicy = NO_RETRY,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.lease_seconds = lease_seconds
        self.wait = wait
        self.start = start
        self.timeout = timeout  # the deadline of every call, in seconds
        self.retry = retry
        self._rng = random.Random()  # noqa: S311 (the jitter of retries)
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
        call = self._call("/v1/machine/runs/claim", body, _claimed, expect=_CLAIMED)
        return await self._send(call, extra=waited)

    async def renew(self, run_id: str, token: str) -> datetime:
        """Renew the lease; LeaseLost when it is not current any more."""
        lease = await self._answer(
            Lease,
            f"/v1/machine/runs/{_segment(run_id)}/lease",
            {"token": token, "lease_seconds": self.lease_seconds},
        )
        return lease.expires_at

    async def start_step(self, run_id: str, step_id: str, token: str) -> JournalEntry:
        """Journal the step as running; its entry carries the stable idempotency key."""
        answer = await self._answer(
            StepAnswer,
            f"/v1/machine/runs/{_segment(run_id)}/steps/{_segment(step_id)}/start",
            {"token": token},
        )
        return answer.step

    async def complete_step(
        self, run_id: str, step_id: str, token: str, output: JsonValue
    ) -> JournalEntry:
        answer = await self._answer(
            StepAnswer,
            f"/v1/machine/runs/{_segment(run_id)}/steps/{_segment(step_id)}/complete",
            {"token": token, "output": output},
        )
        return answer.step

    async def complete_and_start(
        self, run_id: str, step_id: str, token: str, output: JsonValue, next_step: str
    ) -> JournalEntry:
        """Journal the step's output and the next step running and renew the lease, in
        one request; the next step's entry (with its idempotency key) comes back."""
        answer = await self._answer(
            StepAnswer,
            f"/v1/machine/runs/{_segment(run_id)}/steps/{_segment(step_id)}/complete",
            {
                "token": token,
                "output": output,
                "next": next_step,
                "lease_seconds": self.lease_seconds,  # renewed at every step, too
            },
        )
        if answer.next is None:
            raise UnexpectedResponse("the step answer in the response has no 'next'")
        return answer.next

    async def complete_run(self, run_id: str, token: str, output: JsonValue) -> JsonObject:
        answer = await self._answer(
            RunAnswer,
            f"/v1/machine/runs/{_segment(run_id)}/complete",
            {"token": token, "output": output},
        )
        return answer.run.raw

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
        answer = await self._answer(
            RunAnswer, f"/v1/machine/runs/{_segment(run_id)}/complete", request
        )
        return ClaimedRun.of(answer.claim) if answer.claim is not None else None

    async def fail_run(self, run_id: str, token: str, error: str) -> JsonObject:
        answer = await self._answer(
            RunAnswer, f"/v1/machine/runs/{_segment(run_id)}/fail", {"token": token, "error": error}
        )
        return answer.run.raw

    async def release_run(
        self, run_id: str, token: str, error: str, retry_at: datetime | None
    ) -> JsonObject:
        request: JsonObject = {"token": token, "error": error}
        if retry_at is not None:
            request["retry_at"] = format_rfc3339(retry_at)
        answer = await self._answer(
            RunAnswer, f"/v1/machine/runs/{_segment(run_id)}/release", request
        )
        return answer.run.raw

    # --- plumbing ---------------------------------------------------------------------

    def proof(self, method: str, path: str, *, jti: str | None = None) -> str:
        """A DPoP proof for `method` on `path` under this client's base URL."""
        return make_proof(
            self.key, method, self.base_url + path, iat=self._now().timestamp(), jti=jti
        )

    async def _answer(self, cls: type[W], path: str, body: JsonObject) -> W:
        """POST `body` to `path`; the answer read as `cls` (any flaw: UnexpectedResponse)."""
        return await self._send(self._call(path, body, lambda content: _parse(cls, content)))

    def _call(
        self,
        path: str,
        body: JsonObject,
        decode: Callable[[bytes], T],
        *,
        expect: frozenset[int] = OK,
    ) -> Call[T]:
        """A POST of `body` to `path` whose every try carries a fresh proof; its answer,
        when its status is one of `expect` (any other, a redirect too, is the error it
        stands for: UnexpectedStatus below 400)."""
        return Call(
            "POST",
            path,
            decode,
            body=encode(body),
            expect=expect,
            attempt_headers=self._attempt_headers,
        )

    def _attempt_headers(self, call: Call[Any]) -> Mapping[str, str]:
        # The step's trace, when there is one: the service's spans join it.
        return {"DPoP": self.proof(call.method, call.path), **traceparent()}

    async def _send(self, call: Call[T], *, extra: float = 0.0) -> T:
        """`call` within `timeout` (+ `extra`: a long poll's wait) seconds, tried again
        as `retry` allows; its result."""
        attempts = Attempts(call, self.timeout + extra, self.retry, self._rng)
        url = self.base_url + call.path
        while True:
            left = attempts.left()
            # The first try has the call's whole deadline, which its timeout names.
            seconds = attempts.seconds if attempts.tries == 1 else left
            try:
                response = await deadline.arequest(
                    self._http,
                    seconds,
                    call.method,
                    url,
                    headers=call.headers(None),
                    content=call.body,
                    timeout=seconds,  # a long poll waits longer than a read timeout
                )
            except httpx.TransportError as exc:
                error, uncertain = transport_error(
                    exc, self.base_url, call.method, call.path, attempts.seconds
                )
                wait = _retry_wait(attempts, error, uncertain=uncertain, retry_after=None)
                if wait is None:
                    raise  # httpx's own exception, which `transient_failure` classifies
            else:
                if response.status_code in call.expect:
                    return call.decode(response.content)
                error = answer_error(response, call.expect)
                wait = attempts.after(
                    error,
                    uncertain=False,
                    retry_after=retry_after(response.headers.get("retry-after")),
                )
            await asyncio.sleep(wait)


def _retry_wait(
    attempts: Attempts, error: CharterError, *, uncertain: bool, retry_after: float | None
) -> float | None:
    """The wait before the next try after `error`, or None when there is none."""
    try:
        return attempts.after(error, uncertain=uncertain, retry_after=retry_after)
    except CharterError:
        return None


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


def _parse(cls: type[W], answer: bytes | JsonValue) -> W:
    """`answer` (a body, or its JSON) read as the wire object `cls`, strictly."""
    value = ijson.loads(answer) if isinstance(answer, bytes) else answer
    if not isinstance(value, dict):
        raise UnexpectedResponse("the machine API answered with a non-object")
    return wire.parse(cls, value, UnexpectedResponse)


def _claimed(content: bytes) -> ClaimedRun | None:
    """A claim's answer: the run, or none (204: no content)."""
    return ClaimedRun.of(_parse(Claim, content)) if content else None


def _segment(value: str) -> str:
    return quote(value, safe="")
