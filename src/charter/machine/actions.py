"""Action hosts: the tool capabilities a machine offers its plans (docs/machines.md, rule 2).

A host is an async callable taking an `ActionCall` — the step's `actionId`, its
`payload` (the step input), the run-step pair's stable `idempotency_key` and a `cancel`
event set when the machine lost its lease — and returning the step output (JSON). The
executor looks hosts up in an `ActionRegistry` (registry.py) by action id and has no
special case for any of them.

A host says how it failed by what it raises (rule 7 of docs/machines.md: only transient transport
failures retry):

- a transport failure — an httpx timeout or network error, a peer closing mid-answer,
  or `ActionTransient` for one the host detects itself — may pass: the run is released
  for a retry;
- `TargetAnswered(status=...)`: the target answered with an error status. It fails the
  run unless the step's plan opts in with `"retry": {"on": ["http_5xx", "http_429"]}`
  and the status meets one of them; then it is retried like a transport failure, no
  sooner than the answer's `Retry-After`. Any host may raise it; the executor decides
  from the status alone;
- anything else — including `ActionFailed` — is deterministic and fails the run.

The hosts Charter ships are `http.request` (http_request.py) and `charter.submit`
(charter_submit.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from charter.automations.plan import answer_condition
from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonValue

T = TypeVar("T")


@dataclass(frozen=True)
class ActionCall:
    """One invocation of an action host (`{actionId, payload, idempotencyKey,
    signal}` in the machine protocol's words)."""

    action_id: str
    payload: JsonValue
    idempotency_key: str
    cancel: asyncio.Event


ActionHost = Callable[[ActionCall], Awaitable[JsonValue]]


class ActionFailed(CharterError):
    """The action failed; trying again would fail the same way."""

    code = "action_failed"
    http_status = 422


class ActionTransient(CharterError):
    """The action's transport failed in a way that may pass (no answer, a dropped link)."""

    code = "action_transient"
    http_status = 503
    retryable = True


class TargetAnswered(ActionFailed):
    """The action's target answered with an error status.

    Deterministic, unless the step's `retry.on` names the condition the status meets
    (`condition`: `http_5xx`, `http_429`); `retry_after` is the answer's Retry-After in
    seconds, when it gave one."""

    code = "target_answered"

    def __init__(self, message: str, *, status: int, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.status = status
        self.retry_after = retry_after

    @property
    def condition(self) -> str | None:
        return answer_condition(self.status)

    @classmethod
    def of(cls, message: str, response: httpx.Response) -> TargetAnswered:
        """The error for an answer, with its status and Retry-After."""
        return cls(message, status=response.status_code, retry_after=retry_after(response))


def retry_after(response: httpx.Response) -> float | None:
    """A 429 or 503 answer's `Retry-After` in seconds (delay-seconds or an HTTP-date);
    None when absent, unreadable or on another status."""
    value = response.headers.get("retry-after", "").strip()
    if response.status_code not in (429, 503) or not value:
        return None
    if value.isascii() and value.isdigit():
        # Thousands of digits are not handed to int(): past 2**64 - 1 s is as long as any.
        seconds = parse_decimal(value.lstrip("0") or "0", UINT64_MAX)
        return float(UINT64_MAX if seconds is None else seconds)
    when = _http_date(value)
    if when is None:
        return None
    # Read against the answer's own Date, so a skewed clock on either side cannot matter.
    sent = _http_date(response.headers.get("date", "")) or datetime.now(UTC)
    return max(0.0, (when - sent).total_seconds())


def _http_date(value: str) -> datetime | None:
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo is not None else None


class ActionCancelled(CharterError):
    """The action was cancelled: the machine no longer holds the run's lease."""

    code = "action_cancelled"
    http_status = 409


async def until_cancelled(call: ActionCall, work: Coroutine[Any, Any, T]) -> T:
    """Await `work` unless the call is cancelled first (then ActionCancelled)."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(call.cancel.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            raise ActionCancelled(f"{call.action_id} was cancelled")
        return task.result()
    finally:
        for pending in (task, stop):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending
