"""Action hosts: the tool capabilities a machine offers its plans (docs/machines.md, rule 2).

A host is an async callable taking an `ActionCall` — the step's `actionId`, its
`payload` (the step input), the run-step pair's stable `idempotency_key` and a `cancel`
event set when the machine lost its lease — and returning the step output (JSON). The
executor looks hosts up in an `ActionRegistry` by action id and has no special case for
any of them.

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

Shipped hosts:

- `http.request`: one HTTP request with httpx. Input `{"method", "url", "headers"?,
  "json"?, "timeout"?}`; the request carries `Idempotency-Key: <key>` and, when tracing
  is on, the W3C `traceparent` of its client span (a child of the step's). Output
  `{"status", "headers", "json"}` (or `"text"` for a non-JSON body). An answer of 400 or
  more is `TargetAnswered`.
- `charter.submit`: signs an event as an integration actor and submits it to the Charter
  API with the one sign-on-head loop (`charter.core.resign`, re-reading the head on
  `stale_prev`) over `charter.AsyncClient`, with no retries of its own: the bridge from
  runs to governed events. Input `{"process", "workflow", "action", "input"?,
  "key_file" | "key_env", "idempotent"?}`; output `{"hash", "seq", "state"}`. The
  Charter API is its target like any other: a 5xx or 429 answer (`database_unavailable`
  is a 503) is `TargetAnswered`, the governed engine's refusals (4xx) keep their own
  error class, and an API it cannot reach or that does not answer in time is a
  transport failure (`ApiUnavailable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
from opentelemetry.trace import SpanKind

from charter.automations.plan import ACTION_ID, answer_condition
from charter.core import ijson
from charter.core.config import Settings
from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.ed25519 import SecretKey, read_secret_key_file
from charter.core.errors import CharterError, InvalidSecretKey, Malformed, UnknownProcess
from charter.core.jsontypes import JsonObject, JsonValue
from charter.sdk.aio import AsyncClient
from charter.sdk.protocol import NO_RETRY
from charter.sdk.results import Accepted, Process
from charter.sdk.signing import EventSigner, ReadHead, adrive, sign_on_head
from charter.tracing import Attributes, span, traceparent

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


class UnknownActionHost(CharterError):
    """No action host is registered for this action id."""

    code = "unknown_action_host"
    http_status = 422


class ActionRegistry:
    """Action id → host. Registration is explicit; there is no fallback host."""

    def __init__(self, hosts: Mapping[str, ActionHost] | None = None) -> None:
        self._hosts: dict[str, ActionHost] = {}
        for action_id, host in (hosts or {}).items():
            self.register(action_id, host)

    def register(self, action_id: str, host: ActionHost) -> None:
        if not ACTION_ID.fullmatch(action_id):
            raise ValueError(f"{action_id!r} is not an action id like 'http.request'")
        if action_id in self._hosts:
            raise ValueError(f"an action host for {action_id!r} is registered already")
        self._hosts[action_id] = host

    def get(self, action_id: str) -> ActionHost:
        try:
            return self._hosts[action_id]
        except KeyError:
            raise UnknownActionHost(
                f"no action host for {action_id!r} on this machine", action_id=action_id
            ) from None

    def __contains__(self, action_id: object) -> bool:
        return action_id in self._hosts

    def ids(self) -> list[str]:
        return sorted(self._hosts)


def default_registry(settings: Settings | None = None) -> ActionRegistry:
    """The hosts Charter ships: `http.request` and `charter.submit`."""
    settings = settings or Settings.from_env()
    return ActionRegistry(
        {
            "http.request": HttpRequestAction(),
            "charter.submit": CharterSubmitAction(settings.api_url, settings.token),
        }
    )


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


# --- http.request ----------------------------------------------------------------------

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_HTTP_KEYS = frozenset({"method", "url", "headers", "json", "timeout"})
_KEPT_HEADERS = ("content-type", "location", "etag", "last-modified", "retry-after")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")


class HttpRequestAction:
    """`http.request`: one HTTP request per invocation, with the step's idempotency key."""

    def __init__(
        self,
        *,
        default_timeout: float = 30.0,
        max_timeout: float = 300.0,
        max_response_bytes: int = 1024 * 1024,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.max_response_bytes = max_response_bytes
        self._transport = transport

    async def __call__(self, call: ActionCall) -> JsonValue:
        method, url, headers, body, timeout = self._request(call.payload)
        headers["Idempotency-Key"] = call.idempotency_key
        target = httpx.URL(url)
        attributes: Attributes = {
            "http.request.method": method,
            "server.address": target.host,
            "url.scheme": target.scheme,
        }
        # The client span of the OpenTelemetry HTTP conventions (named by the method; no
        # full URL: a query may hold a secret), whose context the request carries.
        with span(method, attributes, kind=SpanKind.CLIENT) as current:
            if not any(name.lower() == "traceparent" for name in headers):
                headers.update(traceparent())  # a plan's own traceparent is left alone
            async with httpx.AsyncClient(
                transport=self._transport, timeout=timeout, follow_redirects=False
            ) as client:
                response = await until_cancelled(
                    call, client.request(method, url, headers=headers, json=body)
                )
            current.set_attribute("http.response.status_code", response.status_code)
            return self._output(method, url, response)

    def _request(self, payload: JsonValue) -> tuple[str, str, dict[str, str], JsonValue, float]:
        if not isinstance(payload, dict):
            raise ActionFailed("http.request input must be an object")
        unknown = sorted(set(payload) - _HTTP_KEYS)
        if unknown:
            raise ActionFailed(f"http.request input has unknown keys {unknown}")
        method = payload.get("method", "GET")
        if not isinstance(method, str) or method.upper() not in _METHODS:
            raise ActionFailed(f"http.request method must be one of {sorted(_METHODS)}")
        url = payload.get("url")
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            raise ActionFailed("http.request url must be an http(s) URL")
        raw_headers = payload.get("headers", {})
        if not isinstance(raw_headers, dict) or not all(
            isinstance(v, str) and _HEADER_NAME.fullmatch(k) for k, v in raw_headers.items()
        ):
            raise ActionFailed("http.request headers must map header names to strings")
        headers = {k: str(v) for k, v in raw_headers.items() if k.lower() != "idempotency-key"}
        timeout = payload.get("timeout", self.default_timeout)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= self.max_timeout
        ):
            raise ActionFailed(f"http.request timeout must be in (0, {self.max_timeout:g}] s")
        return method.upper(), url, headers, payload.get("json"), float(timeout)

    def _output(self, method: str, url: str, response: httpx.Response) -> JsonValue:
        status = response.status_code
        if status >= 400:
            snippet = " ".join(response.text[:200].split())
            raise TargetAnswered.of(f"{method} {url} answered HTTP {status}: {snippet}", response)
        kept: JsonObject = {k: response.headers[k] for k in _KEPT_HEADERS if k in response.headers}
        output: JsonObject = {"status": status, "headers": kept}
        content = response.content
        if len(content) > self.max_response_bytes:
            raise ActionFailed(
                f"{method} {url} answered {len(content)} bytes, over {self.max_response_bytes}"
            )
        if "json" in response.headers.get("content-type", "") and content.strip():
            try:
                output["json"] = ijson.loads(content)
                return output
            except Malformed:
                pass  # not strict I-JSON: keep it as text
        output["text"] = content.decode(response.encoding or "utf-8", errors="replace")
        return output


# --- charter.submit --------------------------------------------------------------------

_SUBMIT_KEYS = frozenset(
    {"process", "workflow", "action", "input", "key_file", "key_env", "idempotent"}
)


class CharterSubmitAction:
    """`charter.submit`: sign an event as an integration actor and submit it.

    With `"idempotent": true` (the default) the event input carries
    `meta.idempotency_key`, and a process that already holds an event with this key
    answers that event instead of a second one: a step repeated after an uncertain
    acknowledgement submits once. Reading the head needs a token with `processes:read`.
    """

    def __init__(
        self,
        api_url: str,
        token: str | None,
        *,
        stale_retries: int = 5,
        now: Callable[[], datetime] | None = None,
        client: Callable[[], AsyncClient] | None = None,
    ) -> None:
        self.api_url = api_url
        self.token = token
        self.stale_retries = stale_retries
        self._now = now or (lambda: datetime.now(UTC))
        # No retries in the client: the step's own policy (`retry.on`) decides.
        self._client = client or (lambda: AsyncClient(self.api_url, self.token, retry=NO_RETRY))

    async def __call__(self, call: ActionCall) -> JsonValue:
        request = self._parse(call.payload)
        try:
            return await self._submit(request, call)
        except CharterError as exc:
            answered = _retryable_answer(exc)
            if answered is None:
                raise
            raise answered from exc

    def _parse(self, payload: JsonValue) -> JsonObject:
        if not isinstance(payload, dict):
            raise ActionFailed("charter.submit input must be an object")
        unknown = sorted(set(payload) - _SUBMIT_KEYS)
        if unknown:
            raise ActionFailed(f"charter.submit input has unknown keys {unknown}")
        for key in ("process", "workflow", "action"):
            if not isinstance(payload.get(key), str):
                raise ActionFailed(f"charter.submit needs {key} (a string)")
        if not isinstance(payload.get("input", {}), dict):
            raise ActionFailed("charter.submit input.input must be an object")
        if ("key_file" in payload) == ("key_env" in payload):
            raise ActionFailed("charter.submit needs exactly one of key_file and key_env")
        if not isinstance(payload.get("idempotent", True), bool):
            raise ActionFailed("charter.submit idempotent must be a boolean")
        return payload

    def _key(self, request: JsonObject) -> SecretKey:
        if "key_file" in request:
            path = request["key_file"]
            if not isinstance(path, str):
                raise ActionFailed("charter.submit key_file must be a path")
            return read_secret_key_file(Path(path).expanduser())
        name = request["key_env"]
        value = os.environ.get(name) if isinstance(name, str) else None
        if not value:
            raise ActionFailed(f"charter.submit key_env names no set variable ({name!r})")
        try:
            return SecretKey.from_hex(value.strip())
        except InvalidSecretKey:
            raise ActionFailed(f"${name} does not hold a secret key (64 hex)") from None

    async def _submit(self, request: JsonObject, call: ActionCall) -> JsonValue:
        key = self._key(request)
        process = str(request["process"])
        raw_input = request.get("input") or {}
        assert isinstance(raw_input, dict)
        data: JsonObject = dict(raw_input)
        idempotent = request.get("idempotent", True) is True
        if idempotent:
            meta = data.get("meta")
            data["meta"] = {
                **(meta if isinstance(meta, dict) else {}),
                "idempotency_key": call.idempotency_key,
            }
        action, workflow = str(request["action"]), str(request["workflow"])
        signer = EventSigner(key, process, action, data, workflow, self._now)
        async with self._client() as api:

            async def read_head(_step: ReadHead) -> str | None:
                # Read again even when a stale_prev named the head: the event that moved
                # it may be this step's own, submitted by an earlier attempt.
                if call.cancel.is_set():
                    raise ActionCancelled("charter.submit was cancelled")
                found, earlier = await _head_and_earlier(
                    api, process, call.idempotency_key, idempotent
                )
                if earlier is not None:
                    raise _SubmittedBefore(earlier)
                return signer.head_of(found)

            try:
                steps = sign_on_head(signer.sign, self.stale_retries)
                accepted: Accepted = await adrive(steps, read_head, api.submit_signed)
            except _SubmittedBefore as before:
                return before.result
        return _result(accepted)


class _SubmittedBefore(Exception):
    """This step's event is on the process already: its result, instead of a second."""

    def __init__(self, result: JsonValue) -> None:
        super().__init__("submitted before")
        self.result = result


async def _head_and_earlier(
    api: AsyncClient, process: str, key: str, idempotent: bool
) -> tuple[Process | None, JsonValue]:
    """The process (None: not created yet) and, for an idempotent submit, the result of
    an event that carries this idempotency key already."""
    try:
        found = await api.process(process)
    except UnknownProcess:
        return None, None
    if idempotent:
        for event in reversed(await api.events(process)):
            data = event.input
            meta = data.get("meta") if isinstance(data, dict) else None
            if isinstance(meta, dict) and meta.get("idempotency_key") == key:
                return found, {"hash": event.hash, "seq": event.seq, "state": found.state}
    return found, None


def _retryable_answer(error: CharterError) -> TargetAnswered | None:
    """A 5xx or 429 answer of the Charter API as TargetAnswered, so the step's `retry.on`
    decides; other answers (the governed engine's refusals) keep their own class."""
    answer = error.__cause__
    if not isinstance(answer, httpx.HTTPStatusError):
        return None  # not an answer: ApiUnavailable (transport), or a local refusal
    if answer_condition(answer.response.status_code) is None:
        return None
    status = answer.response.status_code
    message = f"the Charter API answered HTTP {status} {error.code}: {error.message}"
    return TargetAnswered.of(message, answer.response)


def _result(accepted: Accepted) -> JsonValue:
    return {"hash": accepted.hash, "seq": accepted.seq, "state": accepted.process.state}
