"""`GET /v1/stream`: Server-Sent Events of small hints (`processes:read`).

Events: `event` (an event was appended: process, seq, hash, action, actor_id), `work`
(a scheduled action or queue row was created, cancelled or failed), `run` (a run of the
token principal's changed status; needs `runs:read` too), and `reset` (hints were lost:
read the state again). Each message has an `id:`; reconnect with `Last-Event-ID` to get
what was missed. A comment line every 15 s keeps idle connections open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, cast

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import StreamingResponse

from charter.api.auth import require
from charter.api.contract import errors
from charter.auth.tokens import ALL_SCOPES, TokenInfo
from charter.core.errors import DatabaseUnavailable
from charter.operator.hub import Hint, HintHub, Subscriber

router = APIRouter(tags=["operator"])
Reader = Annotated[TokenInfo, Depends(require("processes:read"))]


def hub_of(request: Request) -> HintHub:
    return cast(HintHub, request.app.state.hints)


@router.get(
    "/v1/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "description": "Server-Sent Events: `event`, `work`, `run` and `reset` messages, "
            "each with an `id:`; a comment every 15 s keeps the connection open.",
        },
        **errors(why={503: "`database_unavailable`: the stream cannot listen to the database."}),
    },
)
async def open_stream(
    request: Request,
    token: Reader,
    last_event_id: Annotated[
        str | None, Header(description="The id of the last message received, to resume.")
    ] = None,
) -> StreamingResponse:
    """Live hints as Server-Sent Events (see the module docs for the event kinds)."""
    hub = hub_of(request)
    if not await hub.started():
        raise DatabaseUnavailable("the stream cannot listen to the database right now")
    everyone = ALL_SCOPES in token.scopes
    reads_runs = token.grants("runs:read")

    def visible(hint: Hint) -> bool:
        if hint.kind == "run":
            return reads_runs and (everyone or hint.principal == token.principal)
        return True

    subscriber, missed = hub.subscribe(visible, last_event_id)
    return StreamingResponse(
        _messages(hub, subscriber, missed),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _messages(hub: HintHub, subscriber: Subscriber, missed: list[Hint]) -> AsyncIterator[str]:
    try:
        yield ": connected\n\n"  # headers and a first chunk now: the client knows it is in
        for hint in missed:
            yield hint.to_sse(hub.epoch)
        while not subscriber.dropped:
            try:
                hint = await asyncio.wait_for(subscriber.queue.get(), hub.keepalive_seconds)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            yield hint.to_sse(hub.epoch)
    finally:
        hub.unsubscribe(subscriber)
