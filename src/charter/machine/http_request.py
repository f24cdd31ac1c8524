"""`http.request`: one HTTP request with httpx, the step's action host for any HTTP target.

Input `{"method", "url", "headers"?, "json"?, "timeout"?}`; the request carries
`Idempotency-Key: <key>` and, when tracing is on, the W3C `traceparent` of its client
span (a child of the step's). Output `{"status", "headers", "json"}` (or `"text"` for a
non-JSON body). An answer of 400 or more is `TargetAnswered`.
"""

from __future__ import annotations

import re

import httpx
from opentelemetry.trace import SpanKind

from charter.core import ijson
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.machine.actions import ActionCall, ActionFailed, TargetAnswered, until_cancelled
from charter.tracing import Attributes, span, traceparent

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
