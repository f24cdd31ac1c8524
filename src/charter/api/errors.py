"""The one place where errors become HTTP responses: `{"error": {"code", "message", ...}}`.

Charter errors carry their own status and code. FastAPI's request validation errors and
Starlette's HTTP exceptions (unknown route, wrong method) and unexpected failures are
mapped here too, so every error a client sees has the same shape.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from charter.core.errors import CharterError, Malformed, Unauthorized

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


def error_response(exc: CharterError) -> JSONResponse:
    """`{"error": {"code", "message", ...context}}` with the error's status."""
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.http_status, headers=headers)


def _body(code: str, message: str, **context: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **context}}


def install_error_handlers(app: FastAPI) -> None:
    async def charter_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CharterError)
        return error_response(exc)

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
        message = (
            f"no route {request.method} {request.url.path}"
            if exc.status_code == 404
            else str(exc.detail)
        )
        return JSONResponse(_body(code, message), status_code=exc.status_code, headers=exc.headers)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse(_body("internal", "internal server error"), status_code=500)

    app.add_exception_handler(CharterError, charter_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
