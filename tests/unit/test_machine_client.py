"""The machine client on the SDK's request core: every try of a call carries a DPoP proof
of its own, a call is tried once unless a retry policy says otherwise, and the machine
API's refusals come back as their own classes."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from charter.core.ed25519 import SecretKey
from charter.core.errors import DatabaseUnavailable
from charter.core.errors.automations import StepOutOfOrder
from charter.machine.client import MachineClient
from charter.sdk import RetryPolicy
from charter.sdk.protocol import NO_RETRY

ORIGIN = "http://machine-api.test"
UNAVAILABLE = {"error": {"code": "database_unavailable", "message": "down"}}
RENEWED = {"token": "t", "expires_at": "2030-01-01T00:00:00Z"}


def renew(answers: list[httpx.Response], retry: RetryPolicy = NO_RETRY) -> list[httpx.Request]:
    """Renew a lease against a peer that gives `answers` in turn; the requests it saw."""
    seen: list[httpx.Request] = []

    def peer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    async def call() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(peer)) as http:
            client = MachineClient(ORIGIN, SecretKey.generate(), http=http, retry=retry)
            await client.renew("r-1", "t")

    asyncio.run(call())
    return seen


def test_a_call_is_tried_once_by_default() -> None:
    with pytest.raises(DatabaseUnavailable):
        renew([httpx.Response(503, json=UNAVAILABLE), httpx.Response(200, json=RENEWED)])


def test_every_try_carries_a_fresh_proof() -> None:
    retry = RetryPolicy(attempts=2, base_seconds=0.0)
    answers = [httpx.Response(503, json=UNAVAILABLE), httpx.Response(200, json=RENEWED)]
    first, second = renew(answers, retry)
    assert first.headers["dpop"] != second.headers["dpop"]
    assert first.url == second.url == f"{ORIGIN}/v1/machine/runs/r-1/lease"
    assert first.content == second.content


def test_a_refusal_of_the_machine_api_is_its_own_class() -> None:
    refusal = {"error": {"code": "step_out_of_order", "message": "no", "step_id": "b"}}
    with pytest.raises(StepOutOfOrder) as caught:
        renew([httpx.Response(409, json=refusal)])
    assert caught.value.context["step_id"] == "b"
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)
