"""The one place where Charter errors become HTTP responses."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from charter.core.errors import CharterError


def error_response(exc: CharterError) -> JSONResponse:
    """`{"error": {"code", "message", ...context}}` with the error's status."""
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.http_status)


def install_error_handlers(app: FastAPI) -> None:
    async def charter_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CharterError)
        return error_response(exc)

    app.add_exception_handler(CharterError, charter_error)
