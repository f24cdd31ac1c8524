"""The witness over HTTP (Starlette): submission and monitoring prefix are both `/`.

    POST /add-checkpoint               200 cosignature line(s) | 400 | 403 | 404 | 409 | 422
    GET  /<sha256 hex(origin)>/checkpoint   the latest cosigned checkpoint | 404

Refusals answer `text/plain` with `<code>: <message>`, except 409 whose body is exactly
the latest size and a newline, with `Content-Type: text/x.tlog.size` (no charset).
The check-and-persist runs in a worker thread: it blocks on the origin's lock and fsync.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from charter.core.decimal import UINT64_MAX, parse_decimal
from charter.core.errors import CharterError
from charter.tlog.witness_protocol import (
    ADD_CHECKPOINT,
    MAX_REQUEST_BYTES,
    SIZE_CONTENT_TYPE,
    size_body,
)
from charter.witness.core import Witness
from charter.witness.errors import SizeConflict


class _TooLarge(Exception):
    pass


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        length = parse_decimal(declared.lstrip("0") or "0", UINT64_MAX)
        if length is None or length > MAX_REQUEST_BYTES:
            raise _TooLarge
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_REQUEST_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _refusal(exc: CharterError) -> Response:
    if isinstance(exc, SizeConflict):
        # Set the header by hand: a media type of text/* would gain "; charset=utf-8".
        return Response(
            size_body(exc.latest_size),
            status_code=409,
            headers={"content-type": SIZE_CONTENT_TYPE},
        )
    status = exc.http_status if 400 <= exc.http_status < 500 else 500
    return PlainTextResponse(f"{exc.code}: {' '.join(exc.message.split())}\n", status)


def create_witness_app(witness: Witness) -> Starlette:
    """The ASGI app of one witness."""

    async def add_checkpoint(request: Request) -> Response:
        try:
            body = await _read_body(request)
        except _TooLarge:
            return PlainTextResponse(
                f"witness_request_too_large: at most {MAX_REQUEST_BYTES} bytes\n", 413
            )
        try:
            cosigned = await run_in_threadpool(witness.add_checkpoint, body)
        except CharterError as exc:
            return _refusal(exc)
        return PlainTextResponse(cosigned.response())

    async def checkpoint(request: Request) -> Response:
        latest = await run_in_threadpool(
            witness.state.latest_by_hash, request.path_params["origin_hash"]
        )
        if latest is None:
            return PlainTextResponse("witness_unknown_log: no checkpoint cosigned\n", 404)
        return PlainTextResponse(latest.note)

    return Starlette(
        routes=[
            Route(f"/{ADD_CHECKPOINT}", add_checkpoint, methods=["POST"]),
            Route("/{origin_hash}/checkpoint", checkpoint, methods=["GET"]),
        ]
    )
