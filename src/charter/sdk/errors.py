"""The errors an SDK call raises: the server's own, rebuilt, and the client's.

An error answer `{"error": {"code", "message", ...context}}` becomes the CharterError
subclass of its code (`StalePrev`, `NotFound`, ...), its context kept (so
`StalePrev.context["head"]` is the head the server holds); each class carries its wire
`code`, HTTP status `http_status` and `retryable`. A code this client does not know
becomes a subclass made for it, with the answer's status, retryable when the status is
5xx or 429. The answer itself is the error's cause (an `httpx.HTTPStatusError`), for
whoever needs its headers.

The client's own: `ApiUnavailable` (cannot reach the API), `ApiTimeout` (the call's
deadline passed), `UnexpectedResponse` (an answer this client does not understand) and
its kind `UnexpectedStatus`: a status below 400 the call does not expect, such as a
redirect (never followed: a token is not sent on to another address) or a 200 where
204 was due.
"""

from __future__ import annotations

from collections.abc import Set
from functools import cache
from typing import Any, cast

import httpx

from charter.core import ijson
from charter.core.errors import CharterError
from charter.core.errors.catalogue import BY_CODE
from charter.core.jsontypes import JsonObject


class ApiUnavailable(CharterError):
    """The Charter API cannot be reached."""

    code = "api_unavailable"
    http_status = 503
    retryable = True


class ApiTimeout(ApiUnavailable):
    """The Charter API did not answer within the call's deadline."""

    code = "api_timeout"


class UnexpectedResponse(CharterError):
    """The API answered with a body this client does not understand."""

    code = "unexpected_response"
    http_status = 502


class UnexpectedStatus(UnexpectedResponse):
    """The API answered with a status this call does not expect."""

    code = "unexpected_status"

    def __init__(self, message: str | None = None, *, status: int, **context: Any) -> None:
        super().__init__(message, status=status, **context)
        self.status = status


class WaitTimeout(CharterError):
    """The process did not reach the state within the time given."""

    code = "wait_timeout"
    http_status = 408


_CLIENT_ERRORS: dict[str, type[CharterError]] = {
    cls.code: cls
    for cls in (ApiUnavailable, ApiTimeout, UnexpectedResponse, UnexpectedStatus, WaitTimeout)
}


def error_class(code: str) -> type[CharterError]:
    """The CharterError subclass whose wire code is `code` (CharterError if none): the
    server's catalogue first, then this client's own."""
    return BY_CODE.get(code) or _CLIENT_ERRORS.get(code) or CharterError


@cache
def _unknown_code_class(code: str, status: int) -> type[CharterError]:
    """A class for a code this client does not know, so it still carries code and status."""
    attributes = {
        "code": code,
        "http_status": status,
        "retryable": status >= 500 or status == 429,
        "__doc__": f"The server answered {status} {code}.",
    }
    return cast("type[CharterError]", type("RemoteError", (CharterError,), attributes))


def error_of_answer(status: int, content: bytes) -> CharterError:
    """The CharterError an error answer (status >= 400, body `content`) stands for."""
    try:
        body = ijson.loads(content)
        error = cast(JsonObject, body)["error"]
        assert isinstance(error, dict)
        code, message = error["code"], error["message"]
        assert isinstance(code, str)
        assert isinstance(message, str)
    except (CharterError, KeyError, TypeError, AssertionError):
        snippet = content[:200].decode("utf-8", "replace").strip()
        cls = _unknown_code_class(f"http_{status}", status)
        return cls(f"HTTP {status}: {snippet}", status=status)
    context = {k: v for k, v in error.items() if k not in ("code", "message")}
    cls = error_class(code)
    if cls is CharterError:
        cls = _unknown_code_class(code, status)
        context |= {"code": code, "status": status}
    return cls(message, **context)


OK: frozenset[int] = frozenset({200})


def unexpected_status(response: httpx.Response, expected: Set[int]) -> UnexpectedStatus:
    """The error of an answer below 400 whose status is not one of `expected`."""
    status = response.status_code
    wanted = " or ".join(str(s) for s in sorted(expected))
    method, url = response.request.method, response.request.url
    context: dict[str, Any] = {"expected": sorted(expected)}
    location = response.headers.get("location")
    if location is not None:
        context["location"] = location
    where = f" (to {location[:200]})" if location is not None else ""
    return UnexpectedStatus(
        f"{method} {url.path} answered {status}{where} where {wanted} was expected",
        status=status,
        **context,
    )


def error_from_response(response: httpx.Response, expected: Set[int] = OK) -> CharterError:
    """The CharterError an answer whose status is not one of `expected` stands for."""
    if response.status_code < 400:
        return unexpected_status(response, expected)
    return error_of_answer(response.status_code, response.content)


def raise_for_answer(response: httpx.Response, expected: Set[int] = OK) -> None:
    """Raise the CharterError an answer stands for unless its status is one of
    `expected`, caused by the answer."""
    if response.status_code in expected:
        return
    answer = httpx.HTTPStatusError(
        f"HTTP {response.status_code}", request=response.request, response=response
    )
    raise error_from_response(response, expected) from answer


def answer_error(response: httpx.Response, expected: Set[int] = OK) -> CharterError:
    """The CharterError of an answer whose status is not one of `expected` (an error
    answer, or an unexpected success or redirect), caused by the answer."""
    error = error_from_response(response, expected)
    error.__cause__ = httpx.HTTPStatusError(
        f"HTTP {response.status_code}", request=response.request, response=response
    )
    return error


def transport_error(
    exc: httpx.TransportError, base_url: str, method: str, path: str, seconds: float
) -> tuple[CharterError, bool]:
    """The CharterError of an exchange that got no answer, and whether the request may
    have been applied (it may have left: anything but a failed connect)."""
    error: CharterError
    if isinstance(exc, httpx.TimeoutException):
        error = ApiTimeout(
            f"the Charter API at {base_url} did not answer {method} {path} within {seconds:g} s"
        )
    else:
        error = ApiUnavailable(f"cannot reach the Charter API at {base_url}: {exc}")
    error.__cause__ = exc
    return error, not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
