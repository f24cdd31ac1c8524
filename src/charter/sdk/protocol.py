"""The SDK without I/O: what a call sends, what its answer means, when to try again.

`Client` and `AsyncClient` are thin transports around this: each turns a `Call` into an
HTTP request (`headers`), hands the answer to `Call.decode`, and asks an `Attempts` what
to do after a failure. Everything the two clients share lives here or in `calls`, so
neither holds endpoint logic of its own.

Retries (`RetryPolicy`): only when trying again may help and cannot do harm —

- an error answer whose class is `retryable` (the server says nothing happened:
  `database_unavailable`, `serialization_conflict`, a 5xx or 429 of an unknown code);
- a connection that could not be opened (the request never left);
- any other transport failure only for a call that is safe to repeat (GET, PUT,
  DELETE, and the POST of a signed event, which the engine records once): another
  POST whose answer was lost may have been applied;

at most `attempts` tries, each delay drawn at random from [0, min(cap, base·2^n)] ("full
jitter"), no sooner than the answer's `Retry-After`, and never past the call's deadline:
the deadline is for the whole call, retries and waits included.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from charter.core import ijson
from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject, JsonValue
from charter.sdk.errors import OK, ApiTimeout, UnexpectedResponse, answer_error

T = TypeVar("T")

DEFAULT_TIMEOUT = 15.0
_REPEATABLE = frozenset({"GET", "HEAD", "PUT", "DELETE"})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API and how to read its success answer."""

    method: str
    path: str
    decode: Callable[[bytes], T]
    params: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    accept: str = "application/json"
    # Sending it twice does what sending it once does (GET, PUT, DELETE by default).
    repeatable: bool | None = None
    # The statuses of its success; any other answer is an error (a redirect too).
    expect: frozenset[int] = OK
    # Headers made afresh for every try and added to the others (a DPoP proof, which is
    # good for one request only).
    attempt_headers: Callable[[Call[Any]], Mapping[str, str]] | None = None

    @property
    def safe_to_repeat(self) -> bool:
        return self.method in _REPEATABLE if self.repeatable is None else self.repeatable

    def headers(self, token: str | None) -> dict[str, str]:
        headers = {"Accept": self.accept}
        if self.body is not None:
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if self.attempt_headers is not None:
            headers.update(self.attempt_headers(self))
        return headers

    def answer(self, response: httpx.Response) -> T:
        """The call's result from an answer of an expected status; otherwise the
        CharterError the answer is (UnexpectedStatus for a redirect or another
        success), caused by the answer."""
        if response.status_code in self.expect:
            return self.decode(response.content)
        raise answer_error(response, self.expect)


def json_object(content: bytes) -> JsonObject:
    """A JSON object answer; `{}` for an empty one (204 No Content)."""
    if not content.strip():
        return {}
    try:
        parsed = ijson.loads(content)
    except CharterError as exc:
        raise UnexpectedResponse(f"the answer is not JSON: {exc.message}") from None
    if not isinstance(parsed, dict):
        raise UnexpectedResponse("the answer is not a JSON object")
    return parsed


def encode(value: JsonValue) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a failed call is tried again (`attempts=1`: never)."""

    attempts: int = 3
    base_seconds: float = 0.2
    cap_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")

    def delay(self, retry: int, rng: random.Random) -> float:
        """The wait before retry number `retry` (0-based), with full jitter."""
        return rng.uniform(0, min(self.cap_seconds, self.base_seconds * 2.0 ** min(retry, 32)))


NO_RETRY = RetryPolicy(attempts=1)


class Attempts:
    """The tries of one call within its deadline: how long each may take, and after a
    failure whether (and after how long) to try again."""

    def __init__(
        self,
        call: Call[Any],
        seconds: float,
        policy: RetryPolicy,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.method = call.method
        self.path = call.path
        self.repeatable = call.safe_to_repeat
        self.seconds = seconds
        self.policy = policy
        self.rng = rng
        self.clock = clock
        self.deadline = clock() + seconds
        self.tries = 0

    def left(self) -> float:
        """Seconds left for the next try; ApiTimeout when none are."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise self.timeout()
        self.tries += 1
        return left

    def timeout(self) -> ApiTimeout:
        return ApiTimeout(
            f"{self.method} {self.path} did not finish within its {self.seconds:g} s deadline"
        )

    def after(self, error: CharterError, *, uncertain: bool, retry_after: float | None) -> float:
        """The wait before trying again after `error`; raises `error` when the call must
        not be tried again (not retryable, out of attempts, or out of time). `uncertain`:
        no answer came after the request may have left (it may have been applied)."""
        repeatable = not uncertain or self.repeatable
        if not (error.retryable and repeatable) or self.tries >= self.policy.attempts:
            raise error
        wait = max(self.policy.delay(self.tries - 1, self.rng), retry_after or 0.0)
        if self.clock() + wait >= self.deadline:
            raise error
        return wait


def retry_after(value: str | None) -> float | None:
    """A `Retry-After` of whole seconds (the only form Charter sends); None otherwise.
    Read by its length first: thousands of digits are as long as 2**64 - 1 seconds."""
    text = (value or "").strip()
    if not text.isascii() or not text.isdigit():
        return None
    seconds = parse_decimal(text.lstrip("0") or "0", UINT64_MAX)
    return float(UINT64_MAX if seconds is None else seconds)
