"""A typed HTTP client of the Charter API: the one place the CLI and tests call it from.

Every error response is rebuilt as the CharterError subclass of its code (context kept,
so `StalePrev.context["head"]` is there); an unknown code becomes a plain CharterError
whose context holds the code and status. The answer itself is the error's cause (an
`httpx.HTTPStatusError`), for whoever needs its status or `Retry-After`.

Every call has a deadline for the whole of it, 15 s unless configured
(`charter.deadline`): a call that runs out of it raises `ApiTimeout`, one that cannot
reach the API `ApiUnavailable` (both retryable).
"""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import quote

import httpx

from charter import deadline
from charter.core import ijson
from charter.core.config import Settings
from charter.core.envelope import Submission
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject, JsonValue

DEFAULT_TIMEOUT = 15.0


class ApiUnavailable(CharterError):
    """The Charter API cannot be reached."""

    code = "api_unavailable"
    http_status = 503
    retryable = True


class ApiTimeout(ApiUnavailable):
    """The Charter API did not answer within the request timeout."""

    code = "api_timeout"


def _subclasses(cls: type[CharterError]) -> list[type[CharterError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def error_class(code: str) -> type[CharterError]:
    """The CharterError subclass whose wire code is `code` (CharterError if none)."""
    for cls in _subclasses(CharterError):
        if cls.code == code:
            return cls
    return CharterError


def error_from_response(response: httpx.Response) -> CharterError:
    """The CharterError an error response stands for."""
    try:
        body = ijson.loads(response.content)
        error = cast(JsonObject, body)["error"]
        assert isinstance(error, dict)
        code, message = error["code"], error["message"]
        assert isinstance(code, str)
        assert isinstance(message, str)
    except (CharterError, KeyError, TypeError, AssertionError):
        snippet = response.text[:200].strip()
        return CharterError(f"HTTP {response.status_code}: {snippet}", status=response.status_code)
    context = {k: v for k, v in error.items() if k not in ("code", "message")}
    cls = error_class(code)
    if cls is CharterError:
        context |= {"code": code, "status": response.status_code}
    return cls(message, **context)


def raise_for_answer(response: httpx.Response) -> None:
    """Raise the CharterError an error answer (>= 400) stands for, caused by the answer."""
    if response.status_code < 400:
        return
    answer = httpx.HTTPStatusError(
        f"HTTP {response.status_code}", request=response.request, response=response
    )
    raise error_from_response(response) from answer


def send(
    http: httpx.Client, seconds: float, base_url: str, method: str, path: str, **kwargs: Any
) -> httpx.Response:
    """One call to the Charter API at `base_url`, finished within `seconds`: its answer,
    or ApiTimeout, ApiUnavailable or the CharterError of an error answer."""
    try:
        response = deadline.request(http, seconds, method, base_url + path, **kwargs)
    except httpx.TimeoutException as exc:
        raise ApiTimeout(
            f"the Charter API at {base_url} did not answer {method} {path} within {seconds:g} s"
        ) from exc
    except httpx.TransportError as exc:
        raise ApiUnavailable(f"cannot reach the Charter API at {base_url}: {exc}") from exc
    raise_for_answer(response)
    return response


class CharterClient:
    """Calls the API at `base_url`, with a bearer token when given one; each call must
    finish (its whole answer read) within `timeout` seconds."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        # `http` lets tests hand in FastAPI's TestClient (an httpx.Client); its owner closes it.
        self._owns_http = http is None
        self._http = http or deadline.sync_client(self.base_url, timeout)

    @classmethod
    def from_env(cls, settings: Settings | None = None) -> CharterClient:
        """A client for CHARTER_API_URL with CHARTER_TOKEN."""
        settings = settings or Settings.from_env()
        return cls(settings.api_url, settings.token)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> CharterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the calls --------------------------------------------------------------------

    def health(self) -> JsonObject:
        return self._json("GET", "/healthz")

    def submit(self, submission: Submission) -> JsonObject:
        """POST a signed event; 201 `{"hash", "seq", "process"}`."""
        return self.submit_raw(_encode(submission.to_json()))

    def submit_raw(self, body: bytes) -> JsonObject:
        """POST body bytes as they are to /v1/events."""
        return self._json("POST", "/v1/events", content=body)

    def process(self, process_id: str) -> JsonObject:
        return self._json("GET", f"/v1/processes/{_segment(process_id)}")

    def events(self, process_id: str) -> list[JsonObject]:
        body = self._json("GET", f"/v1/processes/{_segment(process_id)}/events")
        return cast("list[JsonObject]", body["events"])

    def verify(self, process_id: str, *, replay: bool = False) -> JsonObject:
        params = {"replay": "true"} if replay else None
        return self._json("GET", f"/v1/processes/{_segment(process_id)}/verify", params=params)

    def automation(self, process_id: str) -> JsonObject:
        return self._json("GET", f"/v1/processes/{_segment(process_id)}/automation")

    # --- operator views (issue 11) ----------------------------------------------------

    def list_processes(self, **filters: str | int | None) -> JsonObject:
        """A page of GET /v1/processes: `{"processes", "next_cursor"}`; filters as the
        query parameters (workflow, state, parent, updated_after, updated_before, q,
        cursor, limit), None left out."""
        return self._json("GET", "/v1/processes", params=_params(filters))

    def stats(self) -> JsonObject:
        return self._json("GET", "/v1/stats")

    def scheduled(self, **filters: str | int | None) -> JsonObject:
        """A page of GET /v1/automation/scheduled: `{"scheduled", "next_cursor"}`."""
        return self._json("GET", "/v1/automation/scheduled", params=_params(filters))

    def queue(self, **filters: str | int | None) -> JsonObject:
        """A page of GET /v1/automation/queue: `{"queue", "next_cursor"}`."""
        return self._json("GET", "/v1/automation/queue", params=_params(filters))

    def machines(self) -> list[JsonObject]:
        return cast("list[JsonObject]", self._json("GET", "/v1/machines")["machines"])

    def disable_machine(self, machine_id: str) -> JsonObject:
        return self._json("POST", f"/v1/machines/{_segment(machine_id)}/disable")

    def enable_machine(self, machine_id: str) -> JsonObject:
        return self._json("POST", f"/v1/machines/{_segment(machine_id)}/enable")

    def workflows(self) -> list[JsonObject]:
        return cast("list[JsonObject]", self._json("GET", "/v1/workflows")["workflows"])

    def workflow(self, path: str) -> JsonObject:
        return self._json("GET", f"/v1/workflows/{quote(path, safe='/')}")

    def deploy_workflow(self, path: str, definition: JsonValue) -> JsonObject:
        return self._post("/v1/workflows", {"path": path, "definition": definition})

    def actors(self) -> list[JsonObject]:
        return cast("list[JsonObject]", self._json("GET", "/v1/actors")["actors"])

    def actor(self, actor_id: str) -> JsonObject:
        return self._json("GET", f"/v1/actors/{_segment(actor_id)}")

    def add_actor(self, actor_id: str, public_key: str, roles: list[str]) -> JsonObject:
        body: JsonObject = {"id": actor_id, "public_key": public_key, "roles": list(roles)}
        return self._post("/v1/actors", body)

    def rotate_key(self, actor_id: str, public_key: str) -> JsonObject:
        return self._post(f"/v1/actors/{_segment(actor_id)}/keys", {"public_key": public_key})

    def set_roles(self, actor_id: str, roles: list[str]) -> JsonObject:
        return self._post(f"/v1/actors/{_segment(actor_id)}/roles", {"roles": list(roles)})

    def disable_actor(self, actor_id: str) -> JsonObject:
        return self._json("POST", f"/v1/actors/{_segment(actor_id)}/disable")

    def enable_actor(self, actor_id: str) -> JsonObject:
        return self._json("POST", f"/v1/actors/{_segment(actor_id)}/enable")

    def metrics(self) -> str:
        return self._request("GET", "/metrics").text

    # --- plumbing ---------------------------------------------------------------------

    def _post(self, path: str, body: JsonObject) -> JsonObject:
        return self._json("POST", path, content=_encode(body))

    def _json(self, method: str, path: str, **kwargs: Any) -> JsonObject:
        response = self._request(method, path, **kwargs)
        body = ijson.loads(response.content)
        if not isinstance(body, dict):
            raise CharterError(f"{method} {path} answered with a non-object body")
        return body

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Accept": "application/json"}
        if "content" in kwargs:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return send(
            self._http, self.timeout, self.base_url, method, path, headers=headers, **kwargs
        )


def _params(filters: dict[str, str | int | None]) -> dict[str, str]:
    return {key: str(value) for key, value in filters.items() if value is not None}


def _segment(value: str) -> str:
    return quote(value, safe="")


def _encode(value: JsonValue) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
