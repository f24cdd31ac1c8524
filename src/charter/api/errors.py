"""The one place where errors become HTTP responses: `{"error": {"code", "message", ...}}`.

Charter errors carry their own status and code. FastAPI's request validation errors and
Starlette's HTTP exceptions (unknown route, wrong method) and unexpected failures are
mapped here too, so every error a client sees has the same shape.

A 5xx body never carries the failure's own text (a database message, a host name, a
connection string): only the error class's generic message and the request id, which
the log line with the real cause also carries.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import compile_path
from starlette.types import Send

from charter.api.request_id import HEADER, request_id
from charter.api.security_headers import NOSNIFF
from charter.core.errors import CharterError, Malformed, Unauthorized
from charter.logs import mark_logged

log = logging.getLogger(__name__)

# Statuses Starlette raises by itself, and the code each becomes.
_HTTP_CODES = {
    400: "malformed",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}
GENERIC_MESSAGE = "internal server error"
# How soon a client may try again after a retryable 503: a database that restarts or
# drops a pooled connection is usually back within a second or two.
RETRY_AFTER_SECONDS = 1


def error_body(exc: CharterError, rid: str | None = None) -> dict[str, Any]:
    """`{"error": {"code", "message", ...context}}`; for a 5xx, the generic form."""
    if exc.http_status >= 500:
        return _server_error_body(exc.code, generic_message(exc), rid)
    return {"error": exc.to_dict()}


def generic_message(exc: CharterError) -> str:
    """The error class's own default message (its docstring), never the instance's."""
    for cls in type(exc).__mro__:
        doc = cls.__dict__.get("__doc__")
        if isinstance(doc, str) and doc.strip():
            return doc.strip().splitlines()[0]
    return GENERIC_MESSAGE


def _server_error_body(code: str, message: str, rid: str | None) -> dict[str, Any]:
    if rid is None:
        return {"error": {"code": code, "message": message}}
    return {"error": {"code": code, "message": f"{message} (request id {rid})", "request_id": rid}}


def retry_headers(exc: CharterError) -> dict[str, str]:
    """`Retry-After` for an error that a later try may not meet (a 503 such as
    `database_unavailable` or `serialization_conflict`); none for any other."""
    if exc.retryable and exc.http_status == 503:
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return {}


def error_response(exc: CharterError, rid: str | None = None) -> JSONResponse:
    """The error as a response with its status (and `Retry-After` when retrying helps)."""
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else {}
    headers |= retry_headers(exc)
    return JSONResponse(error_body(exc, rid), status_code=exc.http_status, headers=headers or None)


async def send_error(
    send: Send, exc: CharterError, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer a client error from ASGI middleware (before any route), in the same shape."""
    payload = json.dumps(error_body(exc)).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": exc.http_status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode("ascii")),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def charter_error(request: Request, exc: Exception) -> JSONResponse:
    """A Charter error raised by a route: its own shape; a 5xx is logged with the cause."""
    assert isinstance(exc, CharterError)
    if exc.http_status < 500:
        return error_response(exc)
    rid = request_id(request.scope)
    log.error(
        "request %s: %s %s failed with %s: %s",
        rid,
        request.method,
        request.url.path,
        exc.code,
        exc.message,
        exc_info=exc,
        extra={"action": "http.server_error", "request_id": rid},
    )
    return error_response(exc, rid)


def _allowed_methods(request: Request, given: str) -> list[str]:
    """Every method the API answers at this path: Starlette's own 405 (`given`) names only
    the first route whose path matched, and a path (`/v1/actors`) may have one route per
    method. The OpenAPI document knows them all."""
    methods = {method.strip() for method in given.split(",") if method.strip()}
    path = str(request.scope.get("path", ""))
    for template, operations in request.app.openapi().get("paths", {}).items():
        if compile_path(template)[0].match(path):
            methods |= {method.upper() for method in operations}
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
        # Bodies are parsed by hand (strict I-JSON), so these come from path and query
        # parameters: the request is malformed, like any other bad input.
        assert isinstance(exc, RequestValidationError)
        problems = [
            {"location": "/".join(str(part) for part in e.get("loc", ())), "message": e["msg"]}
            for e in exc.errors()
        ]
        return error_response(Malformed("the request parameters are invalid", problems=problems))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        if exc.status_code >= 500:
            rid = request_id(request.scope)
            log.error("request %s: %s %s failed: %s", rid, request.method, request.url.path, exc)
            body = _server_error_body(code, GENERIC_MESSAGE, rid)
            return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
        message = (
            f"no route {request.method} {request.url.path}"
            if exc.status_code == 404
            else str(exc.detail)
        )
        body = {"error": {"code": code, "message": message}}
        headers = exc.headers
        if exc.status_code == 405:
            allowed = _allowed_methods(request, (headers or {}).get("Allow", ""))
            headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette answers these from its outermost middleware, past the response
        # hooks of RequestId and NoSniff: their headers are set here.
        rid = request_id(request.scope)
        log.error(
            "request %s: unhandled error on %s %s",
            rid,
            request.method,
            request.url.path,
            exc_info=exc,
            extra={"action": "http.server_error", "request_id": rid},
        )
        mark_logged(exc)  # Starlette re-raises it for the server, which would log it again
        body = _server_error_body("internal", GENERIC_MESSAGE, rid)
        return JSONResponse(body, status_code=500, headers={HEADER: rid, **NOSNIFF})

    app.add_exception_handler(CharterError, charter_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
