"""`charter.submit`: the bridge from runs to governed events.

It signs an event as an integration actor and submits it to the Charter API with the
one sign-on-head loop (`charter.core.resign`, re-reading the head on `stale_prev`) over
`charter.AsyncClient`, with no retries of its own; the input fields the workflow marks
personal travel as disclosures beside a v2 envelope, through the `PersonalMarks` that
`AsyncClient.submit` uses too. Input `{"process", "workflow", "action", "input"?,
"key_file" | "key_env", "idempotent"?}`; output `{"hash", "seq", "state"}`. The
Charter API is its target like any other: a 5xx or 429 answer (`database_unavailable`
is a 503) is `TargetAnswered`, the governed engine's refusals (4xx) keep their own
error class, and an API it cannot reach or that does not answer in time is a transport
failure (`ApiUnavailable`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx

from charter.automations.plan import answer_condition
from charter.core.ed25519 import SecretKey, read_secret_key_file
from charter.core.envelope import Submission
from charter.core.errors import (
    BadDisclosure,
    CharterError,
    InvalidSecretKey,
    PersonalInClear,
    UnknownProcess,
)
from charter.core.jsontypes import JsonObject, JsonValue
from charter.machine.actions import ActionCall, ActionCancelled, ActionFailed, TargetAnswered
from charter.sdk.aio import AsyncClient, PersonalMarks
from charter.sdk.protocol import NO_RETRY
from charter.sdk.results import Accepted, Process
from charter.sdk.signing import EventSigner, ReadHead, adrive, sign_on_head

_SUBMIT_KEYS = frozenset(
    {"process", "workflow", "action", "input", "key_file", "key_env", "idempotent"}
)


class CharterSubmitAction:
    """`charter.submit`: sign an event as an integration actor and submit it.

    With `"idempotent": true` (the default) the event input carries
    `meta.idempotency_key`, and a process that already holds an event with this key
    answers that event instead of a second one: a step repeated after an uncertain
    acknowledgement submits once. Reading the head and the workflow's personal marks
    needs a token with `processes:read`.
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
            marks = PersonalMarks(api, signer)

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
                head = signer.head_of(found)
                await marks.learn()
                return head

            async def send(submission: Submission) -> Accepted:
                try:
                    return await api.submit_signed(submission)
                except (PersonalInClear, BadDisclosure):
                    again = await marks.resign(submission)
                    if again is None:
                        raise
                # Outside the handler: a refusal of the new event is not chained to this one.
                return await send(again)

            try:
                steps = sign_on_head(signer.sign, self.stale_retries)
                accepted: Accepted = await adrive(steps, read_head, send)
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
