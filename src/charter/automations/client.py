"""A typed Python client of the automations control API (DESIGN §7, §8).

    with AutomationsClient() as api:             # CHARTER_API_URL, CHARTER_TOKEN
        automation = api.create("nightly report", target="laptop")
        api.add_schedule(automation.id, "0 2 * * *", "Europe/Berlin", max_occurrences=30)
        api.set_plan(automation.id, {"version": 1, "steps": [...]})
        run = api.trigger(automation.id, input={"why": "now"})

Every call has a deadline for the whole of it — connect, send, wait and read the whole
answer — 15 s unless configured (`charter.deadline`); a call that runs out of it raises
`ApiTimeout`, one that cannot reach the API `ApiUnavailable`. Error responses
are rebuilt as the CharterError subclass of their code (`NotFound`, `InvalidPlan`,
`AutomationPaused`, ...) with their context, by `charter.client.error_from_response`.
Return values are frozen dataclasses; each keeps the response object it came from in
`raw` (what `--json` prints).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from charter import deadline
from charter.automations import control
from charter.automations.control import UNSET, Unset

# Re-exported: callers catch these from here.
from charter.client import ApiTimeout as ApiTimeout
from charter.client import ApiUnavailable as ApiUnavailable
from charter.client import send
from charter.core import ijson
from charter.core.config import Settings
from charter.core.errors import CharterError
from charter.core.jsontypes import JsonObject, JsonValue

DEFAULT_TIMEOUT = 15.0
T = TypeVar("T")


class UnexpectedResponse(CharterError):
    """The API answered with a body this client does not understand."""

    code = "unexpected_response"
    http_status = 502


# --- what the calls return -------------------------------------------------------------


@dataclass(frozen=True)
class Automation:
    id: str
    name: str
    target: str
    enabled: bool
    created_at: datetime
    updated_at: datetime
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> Automation:
        r = _Reader(body, "automation")
        return cls(
            id=r.text("id"),
            name=r.text("name"),
            target=r.text("target"),
            enabled=r.flag("enabled"),
            created_at=r.time("created_at"),
            updated_at=r.time("updated_at"),
            raw=body,
        )


@dataclass(frozen=True)
class Schedule:
    id: str
    automation_id: str
    cron: str
    timezone: str
    next_run_at: datetime
    # None: unbounded; otherwise how many occurrences are left.
    remaining_occurrences: int | None
    enabled: bool
    created_at: datetime
    updated_at: datetime
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> Schedule:
        r = _Reader(body, "schedule trigger")
        return cls(
            id=r.text("id"),
            automation_id=r.text("automation_id"),
            cron=r.text("cron"),
            timezone=r.text("timezone"),
            next_run_at=r.time("next_run_at"),
            remaining_occurrences=r.optional_int("remaining_occurrences"),
            enabled=r.flag("enabled"),
            created_at=r.time("created_at"),
            updated_at=r.time("updated_at"),
            raw=body,
        )


@dataclass(frozen=True)
class Webhook:
    id: str
    automation_id: str
    source: str
    # None: every event of the source.
    event: str | None
    enabled: bool
    has_secret: bool
    created_at: datetime
    updated_at: datetime
    # Only on the response that created the trigger; write-only ever after.
    secret: str | None = field(default=None, repr=False)
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> Webhook:
        r = _Reader(body, "webhook trigger")
        return cls(
            id=r.text("id"),
            automation_id=r.text("automation_id"),
            source=r.text("source"),
            event=r.optional_text("event"),
            enabled=r.flag("enabled"),
            has_secret=r.flag("has_secret"),
            created_at=r.time("created_at"),
            updated_at=r.time("updated_at"),
            secret=r.optional_text("secret"),
            raw=body,
        )


@dataclass(frozen=True)
class PlanStep:
    id: str
    action_id: str
    input: JsonValue
    # `{"on": [...]}`: the target answers the step may retry (None: transport failures only).
    retry: JsonValue = None

    @property
    def retry_on(self) -> tuple[str, ...]:
        """The conditions of `retry.on` (`http_5xx`, `http_429`); () when not opted in."""
        on = self.retry.get("on") if isinstance(self.retry, dict) else None
        return tuple(str(c) for c in on) if isinstance(on, list) else ()


@dataclass(frozen=True)
class Plan:
    automation_id: str
    version: int
    steps: tuple[PlanStep, ...]
    allowlist: JsonValue
    limits: JsonValue
    updated_at: datetime
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> Plan:
        r = _Reader(body, "plan")
        return cls(
            automation_id=r.text("automation_id"),
            version=r.integer("version"),
            steps=_steps(r.array("steps")),
            allowlist=body.get("allowlist"),
            limits=body.get("limits"),
            updated_at=r.time("updated_at"),
            raw=body,
        )


@dataclass(frozen=True)
class AutomationDetail:
    """An automation with its triggers (no secrets) and its plan, if any."""

    automation: Automation
    schedules: tuple[Schedule, ...]
    webhooks: tuple[Webhook, ...]
    plan: Plan | None
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> AutomationDetail:
        r = _Reader(body, "automation")
        plan = body.get("plan")
        return cls(
            automation=Automation.parse(body),
            schedules=tuple(Schedule.parse(s) for s in r.objects("schedules")),
            webhooks=tuple(Webhook.parse(w) for w in r.objects("webhooks")),
            plan=Plan.parse(plan) if isinstance(plan, dict) else None,
            raw=body,
        )


@dataclass(frozen=True)
class Run:
    id: str
    automation_id: str
    trigger_id: str | None
    trigger_kind: str
    target: str
    status: str
    # The immutable snapshot of the plan the run was admitted with.
    plan: JsonObject
    input: JsonValue
    attempts: int
    output: JsonValue
    error: str | None
    scheduled_for: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    retry_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> Run:
        r = _Reader(body, "run")
        return cls(
            id=r.text("id"),
            automation_id=r.text("automation_id"),
            trigger_id=r.optional_text("trigger_id"),
            trigger_kind=r.text("trigger_kind"),
            target=r.text("target"),
            status=r.text("status"),
            plan=r.obj("plan"),
            input=body.get("input"),
            attempts=r.integer("attempts"),
            output=body.get("output"),
            error=r.optional_text("error"),
            scheduled_for=r.optional_time("scheduled_for"),
            lease_owner=r.optional_text("lease_owner"),
            lease_expires_at=r.optional_time("lease_expires_at"),
            retry_at=r.optional_time("retry_at"),
            created_at=r.time("created_at"),
            started_at=r.optional_time("started_at"),
            finished_at=r.optional_time("finished_at"),
            raw=body,
        )


@dataclass(frozen=True)
class RunStep:
    """One row of a run's step journal."""

    step_id: str
    position: int
    status: str
    idempotency_key: str
    output: JsonValue
    error: str | None
    attempts: int
    started_at: datetime
    finished_at: datetime | None

    @classmethod
    def parse(cls, body: JsonObject) -> RunStep:
        r = _Reader(body, "run step")
        return cls(
            step_id=r.text("step_id"),
            position=r.integer("position"),
            status=r.text("status"),
            idempotency_key=r.text("idempotency_key"),
            output=body.get("output"),
            error=r.optional_text("error"),
            attempts=r.integer("attempts"),
            started_at=r.time("started_at"),
            finished_at=r.optional_time("finished_at"),
        )


@dataclass(frozen=True)
class RunDetail:
    """A run and its step journal in plan order."""

    run: Run
    steps: tuple[RunStep, ...]
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> RunDetail:
        r = _Reader(body, "run")
        return cls(
            run=Run.parse(body),
            steps=tuple(RunStep.parse(s) for s in r.objects("steps")),
            raw=body,
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; `next_cursor` fetches the next (None: this is the last)."""

    items: tuple[T, ...]
    next_cursor: str | None
    raw: JsonObject = field(repr=False, compare=False)


# --- the client ------------------------------------------------------------------------


class AutomationsClient:
    """Calls the control API at `base_url` (CHARTER_API_URL by default) with a bearer
    token (CHARTER_TOKEN by default); each call must finish (its whole answer read)
    within `timeout` seconds."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
        settings: Settings | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        if base_url is None or token is None:
            settings = settings or Settings.from_env()
            base_url = base_url if base_url is not None else settings.api_url
            token = token if token is not None else settings.token
        self.base_url = base_url.rstrip("/")
        self.token = token
        # The deadline of every call, in seconds.
        self.timeout = timeout
        # `http` lets tests hand in FastAPI's TestClient (an httpx.Client); its owner closes it.
        self._owns_http = http is None
        self._http = http or deadline.sync_client(self.base_url, timeout)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> AutomationsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- automations ------------------------------------------------------------------

    def create(self, name: str, target: str, *, enabled: bool = True) -> Automation:
        body: JsonObject = {"name": name, "target": target, "enabled": enabled}
        return Automation.parse(self._call("POST", "/v1/automations", body))

    def automations(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Page[Automation]:
        """One page of the principal's automations, oldest first."""
        body = self._call("GET", "/v1/automations", params=_params(cursor=cursor, limit=limit))
        return _page(body, Automation.parse)

    def iter_automations(self, *, page_size: int | None = None) -> Iterator[Automation]:
        """Every automation of the principal's, page after page."""
        cursor: str | None = None
        while True:
            page = self.automations(cursor=cursor, limit=page_size)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get(self, automation_id: str) -> AutomationDetail:
        return AutomationDetail.parse(self._call("GET", _automation(automation_id)))

    def update(
        self,
        automation_id: str,
        *,
        name: str | None = None,
        target: str | None = None,
        enabled: bool | None = None,
    ) -> Automation:
        """Change the fields given; the others stay."""
        body: JsonObject = {
            k: v
            for k, v in (("name", name), ("target", target), ("enabled", enabled))
            if v is not None
        }
        return Automation.parse(self._call("PATCH", _automation(automation_id), body))

    def delete(self, automation_id: str) -> None:
        self._call("DELETE", _automation(automation_id))

    def pause(self, automation_id: str) -> Automation:
        return Automation.parse(self._call("POST", _automation(automation_id, "pause")))

    def resume(self, automation_id: str) -> Automation:
        return Automation.parse(self._call("POST", _automation(automation_id, "resume")))

    # --- schedule triggers ------------------------------------------------------------

    def schedules(self, automation_id: str) -> list[Schedule]:
        body = self._call("GET", _automation(automation_id, "schedules"))
        return [Schedule.parse(s) for s in _Reader(body, "schedules").objects("items")]

    def add_schedule(
        self, automation_id: str, cron: str, timezone: str, *, max_occurrences: int | None = None
    ) -> Schedule:
        """A schedule trigger; `max_occurrences` None: unbounded."""
        body: JsonObject = {"cron": cron, "timezone": timezone}
        if max_occurrences is not None:
            body["maxOccurrences"] = max_occurrences
        return Schedule.parse(self._call("POST", _automation(automation_id, "schedules"), body))

    def update_schedule(
        self,
        automation_id: str,
        trigger_id: str,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        enabled: bool | None = None,
        max_occurrences: int | Unset | None = UNSET,
    ) -> Schedule:
        """Change the fields given. `max_occurrences=None` makes the schedule unbounded;
        leaving it out keeps its budget."""
        body: JsonObject = {
            k: v
            for k, v in (("cron", cron), ("timezone", timezone), ("enabled", enabled))
            if v is not None
        }
        if not isinstance(max_occurrences, Unset):
            body["maxOccurrences"] = max_occurrences
        path = _automation(automation_id, "schedules", trigger_id)
        return Schedule.parse(self._call("PATCH", path, body))

    def remove_schedule(self, automation_id: str, trigger_id: str) -> None:
        self._call("DELETE", _automation(automation_id, "schedules", trigger_id))

    # --- webhook triggers -------------------------------------------------------------

    def webhooks(self, automation_id: str) -> list[Webhook]:
        body = self._call("GET", _automation(automation_id, "webhooks"))
        return [Webhook.parse(w) for w in _Reader(body, "webhooks").objects("items")]

    def add_webhook(
        self,
        automation_id: str,
        source: str,
        *,
        event: str | None = None,
        secret: str | None = None,
    ) -> Webhook:
        """A webhook trigger; the result's `secret` (given or generated) is shown only here."""
        body: JsonObject = {"source": source}
        if event is not None:
            body["event"] = event
        if secret is not None:
            body["secret"] = secret
        return Webhook.parse(self._call("POST", _automation(automation_id, "webhooks"), body))

    def update_webhook(
        self,
        automation_id: str,
        trigger_id: str,
        *,
        source: str | None = None,
        event: str | Unset | None = UNSET,
        enabled: bool | None = None,
        secret: str | None = None,
    ) -> Webhook:
        """Change the fields given; `event=None` matches every event of the source."""
        body: JsonObject = {
            k: v
            for k, v in (("source", source), ("enabled", enabled), ("secret", secret))
            if v is not None
        }
        if not isinstance(event, Unset):
            body["event"] = event
        path = _automation(automation_id, "webhooks", trigger_id)
        return Webhook.parse(self._call("PATCH", path, body))

    def rotate_secret(
        self, automation_id: str, trigger_id: str, secret: str | None = None
    ) -> tuple[Webhook, str]:
        """Replace the trigger's secret with `secret` or a freshly generated one, and
        return the new secret: the API never shows it."""
        chosen = secret if secret is not None else control.new_secret()
        return self.update_webhook(automation_id, trigger_id, secret=chosen), chosen

    def remove_webhook(self, automation_id: str, trigger_id: str) -> None:
        self._call("DELETE", _automation(automation_id, "webhooks", trigger_id))

    # --- the plan ---------------------------------------------------------------------

    def set_plan(self, automation_id: str, plan: Mapping[str, JsonValue]) -> Plan:
        """Set the plan: `{"version": 1, "steps": [...], "allowlist"?, "limits"?}`."""
        return Plan.parse(self._call("PUT", _automation(automation_id, "plan"), dict(plan)))

    def plan(self, automation_id: str) -> Plan:
        return Plan.parse(self._call("GET", _automation(automation_id, "plan")))

    def clear_plan(self, automation_id: str) -> None:
        self._call("DELETE", _automation(automation_id, "plan"))

    # --- runs -------------------------------------------------------------------------

    def trigger(self, automation_id: str, input: JsonValue = None) -> Run:
        """Admit a pending manual run (needs `runs:execute`)."""
        body: JsonObject = {} if input is None else {"input": input}
        return Run.parse(self._call("POST", _automation(automation_id, "runs"), body))

    def runs(
        self,
        *,
        status: str | None = None,
        automation_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[Run]:
        """One page of the principal's runs, newest first."""
        params = _params(status=status, automation_id=automation_id, cursor=cursor, limit=limit)
        return _page(self._call("GET", "/v1/runs", params=params), Run.parse)

    def iter_runs(
        self,
        *,
        status: str | None = None,
        automation_id: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Run]:
        cursor: str | None = None
        while True:
            page = self.runs(
                status=status, automation_id=automation_id, cursor=cursor, limit=page_size
            )
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def run(self, run_id: str) -> RunDetail:
        return RunDetail.parse(self._call("GET", f"/v1/runs/{_segment(run_id)}"))

    def cancel_run(self, run_id: str) -> Run:
        """Cancel a pending or running run (needs `runs:execute`)."""
        return Run.parse(self._call("POST", f"/v1/runs/{_segment(run_id)}/cancel"))

    def retry_run(self, run_id: str) -> Run:
        """Retry a failed run: the new run (needs `runs:execute`)."""
        return Run.parse(self._call("POST", f"/v1/runs/{_segment(run_id)}/retry"))

    # --- plumbing ---------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: JsonObject | None = None,
        *,
        params: dict[str, str] | None = None,
    ) -> JsonObject:
        """The response object; `{}` for 204 No Content."""
        headers = {"Accept": "application/json"}
        kwargs: dict[str, Any] = {}
        if body is not None:
            headers["Content-Type"] = "application/json"
            kwargs["content"] = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        if params:
            kwargs["params"] = params
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        response = send(
            self._http, self.timeout, self.base_url, method, path, headers=headers, **kwargs
        )
        if response.status_code == 204 or not response.content:
            return {}
        parsed = ijson.loads(response.content)
        if not isinstance(parsed, dict):
            raise UnexpectedResponse(f"{method} {path} answered with a non-object body")
        return parsed


class _Reader:
    """Typed access to a response object; a missing or mistyped key is UnexpectedResponse."""

    def __init__(self, body: JsonObject, what: str) -> None:
        self.body = body
        self.what = what

    def _fail(self, key: str, expected: str) -> UnexpectedResponse:
        return UnexpectedResponse(f"the {self.what} in the response has no {expected} {key!r}")

    def text(self, key: str) -> str:
        value = self.body.get(key)
        if not isinstance(value, str):
            raise self._fail(key, "string")
        return value

    def optional_text(self, key: str) -> str | None:
        return None if self.body.get(key) is None else self.text(key)

    def flag(self, key: str) -> bool:
        value = self.body.get(key)
        if not isinstance(value, bool):
            raise self._fail(key, "boolean")
        return value

    def integer(self, key: str) -> int:
        value = self.body.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "integer")
        return value

    def optional_int(self, key: str) -> int | None:
        return None if self.body.get(key) is None else self.integer(key)

    def time(self, key: str) -> datetime:
        try:
            return datetime.fromisoformat(self.text(key))
        except ValueError:
            raise self._fail(key, "RFC 3339 time") from None

    def optional_time(self, key: str) -> datetime | None:
        return None if self.body.get(key) is None else self.time(key)

    def obj(self, key: str) -> JsonObject:
        value = self.body.get(key)
        if not isinstance(value, dict):
            raise self._fail(key, "object")
        return value

    def array(self, key: str) -> list[JsonValue]:
        value = self.body.get(key)
        if not isinstance(value, list):
            raise self._fail(key, "list")
        return value

    def objects(self, key: str) -> list[JsonObject]:
        items = self.array(key)
        if not all(isinstance(item, dict) for item in items):
            raise self._fail(key, "list of objects")
        return [item for item in items if isinstance(item, dict)]


def _page(body: JsonObject, parse: Callable[[JsonObject], T]) -> Page[T]:
    reader = _Reader(body, "page")
    return Page(
        tuple(parse(item) for item in reader.objects("items")),
        reader.optional_text("next_cursor"),
        body,
    )


def _steps(raw: list[JsonValue]) -> tuple[PlanStep, ...]:
    steps = []
    for item in raw:
        if not isinstance(item, dict):
            raise UnexpectedResponse("a plan step in the response is not an object")
        r = _Reader(item, "plan step")
        steps.append(
            PlanStep(r.text("id"), r.text("actionId"), item.get("input"), item.get("retry"))
        )
    return tuple(steps)


def _params(**values: str | int | None) -> dict[str, str]:
    return {k: str(v) for k, v in values.items() if v is not None}


def _segment(value: str) -> str:
    return quote(value, safe="")


def _automation(automation_id: str, *rest: str) -> str:
    return "/".join(["/v1/automations", *(_segment(p) for p in (automation_id, *rest))])
