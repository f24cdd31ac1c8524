"""What /openapi.json promises: the one error shape, the statuses each route answers, the
patterns of identifiers, and the document's last touches.

Routes answer with JSONResponse built once from their records (never validated twice);
their `response_model`s and these `responses=` dicts describe those answers, and the
contract test (tests/integration/test_openapi_contract.py) holds the two together.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

from charter.wire.patterns import HEX64, NAME, PRINCIPAL, TIME, UUID, WORKFLOW_PATH

__all__ = ["HEX64", "NAME", "PRINCIPAL", "TIME", "UUID", "WORKFLOW_PATH"]


class ErrorDetail(BaseModel):
    """`code` is stable and machine-readable; other keys are the error's context (the head
    on `stale_prev`, the `problems` of an invalid definition, the `request_id` of a 5xx)."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(pattern=r"^[a-z][a-z0-9_]*$", examples=["not_found"])
    message: str = Field(examples=["no process 'p-1'"])


class ErrorResponse(BaseModel):
    """Every error Charter answers, whatever its status."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "code": "stale_prev",
                        "message": "`prev` is not the process head: re-read the head and "
                        "sign again.",
                        "head": "9f2c4e0b6d1a8f3e5c7b9a2d4f6e8c0a1b3d5f7e9c2a4b6d8f0e1c3a5b7d9f2c",
                    }
                }
            ]
        }
    )

    error: ErrorDetail


# What each status means for any route; a route adds its own specifics with `why`.
_MEANING = {
    400: "`malformed` (or `invalid_limit`, `invalid_cursor`, `invalid_filter`): the request "
    "is not well formed: a body that is not strict I-JSON or lacks or adds keys, a bad "
    "parameter, a NUL in the URL.",
    401: "`unauthorized`: no bearer token, or an unknown or revoked one.",
    403: "`forbidden`: the token lacks the scope this route needs.",
    404: "Nothing with that id (another principal's is not found either).",
    409: "A conflict with the current state.",
    413: "`too_large`: the body is over 2 MiB (decided before anything else).",
    422: "Well formed, but refused by the rules.",
    500: "`internal`: a server failure; the message carries only the request id.",
    503: "`database_unavailable` or `serialization_conflict`: retryable, after the "
    "`Retry-After` seconds.",
}
# Every route but /healthz may answer these whatever it is: the NUL check and the body
# limit run before routing; any route may fail or lose its database.
_ALWAYS = (400, 413, 500, 503)


def errors(
    *statuses: int, bearer: bool = True, why: dict[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status it can answer, as an ErrorResponse.

    `bearer` adds 401 and 403 (routes behind `require(scope)`); `why` says what a status
    means on this route, in place of the general meaning."""
    chosen = set(_ALWAYS) | set(statuses) | ({401, 403} if bearer else set())
    why = why or {}
    return {
        status: {"model": ErrorResponse, "description": why.get(status, _MEANING[status])}
        for status in sorted(chosen)
    }


def answers(
    model: type[BaseModel] | None,
    *statuses: int,
    status: int = 200,
    description: str = "",
    bearer: bool = True,
    why: dict[int, str] | None = None,
    also: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Decorator keywords of a JSON route: its success model and status and its errors,
    e.g. `@router.get(path, **answers(Process, 404))`; `also` adds other answers (a
    second success status)."""
    keywords: dict[str, Any] = {
        "status_code": status,
        "responses": errors(*statuses, bearer=bearer, why=why) | (also or {}),
    }
    if model is not None:
        keywords["response_model"] = model
    if description:
        keywords["response_description"] = description
    return keywords


def install_openapi(app: FastAPI) -> None:
    """The document, generated once: FastAPI's, less its 422 for parameter validation
    (Charter answers those 400 `malformed`, declared on every route), plus DPoP."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=TAGS,
            )
            _drop_fastapi_validation(document)
            schemes = document.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["DPoP"] = DPOP_SCHEME
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


DPOP_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": "DPoP",
    "description": "A DPoP proof (RFC 9449) signed by a registered machine's key, bound to "
    "the method and URL; one per request.",
}
TAGS = [
    {"name": "events", "description": "Signed events: the one way a process changes."},
    {"name": "processes", "description": "Reads of one process (`processes:read`)."},
    {"name": "operator", "description": "Views across processes (`processes:read`)."},
    {"name": "workflows", "description": "The workflow registry."},
    {"name": "actors", "description": "Actors and their keys."},
    {"name": "automations", "description": "The automations control API."},
    {"name": "runs", "description": "Runs of the principal's automations."},
    {"name": "machines", "description": "Machine registration and the machine API (DPoP)."},
    {"name": "webhooks", "description": "Standard Webhooks deliveries."},
    {"name": "operations", "description": "Liveness and Prometheus metrics."},
    {
        "name": "transparency log",
        "description": "The C2SP checkpoint, tiles and proofs of the event log (`log:read`).",
    },
]


def _drop_fastapi_validation(document: dict[str, Any]) -> None:
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            answered = operation.get("responses", {})
            generated = answered.get("422", {})
            if "HTTPValidationError" in str(generated.get("content", "")):
                del answered["422"]
    schemas = document.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
