"""Every endpoint of the API once: the `Call` that asks it and how its answer is read.

`Client` and `AsyncClient` name these one to one; a listing takes a `cursor` so the
clients' iterators can walk it page after page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TypedDict, TypeVar, Unpack
from urllib.parse import quote

from charter.core import webhook_secret
from charter.core.envelope import Submission
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.core.unset import UNSET, Unset
from charter.sdk.errors import OK
from charter.sdk.protocol import Call, encode, json_object
from charter.sdk.results import (
    Accepted,
    Actor,
    Automation,
    AutomationDetail,
    Deployed,
    Deployment,
    DeployPlan,
    Event,
    Machine,
    Page,
    Plan,
    Process,
    ProcessAutomation,
    Run,
    RunDetail,
    Schedule,
    StateCount,
    Stats,
    Verification,
    Webhook,
    Workflow,
    WorkItem,
    parser,
)
from charter.wire import Wire
from charter.wire.pages import page_of

T = TypeVar("T")
W = TypeVar("W", bound=Wire)
# The success statuses of the calls that do not answer 200 (the API's document lists
# them; any other status is UnexpectedStatus).
CREATED = frozenset({201})
NO_CONTENT = frozenset({204})
Query = Mapping[str, str | int | datetime | None]
# How each answer that is a wire object is read.
_Accepted = parser(Accepted)
_Actor = parser(Actor)
_Automation = parser(Automation)
_Deployed = parser(Deployed)
_DeployPlan = parser(DeployPlan)
_AutomationDetail = parser(AutomationDetail)
_Machine = parser(Machine)
_Plan = parser(Plan)
_Process = parser(Process)
_ProcessAutomation = parser(ProcessAutomation)
_Run = parser(Run)
_RunDetail = parser(RunDetail)
_Schedule = parser(Schedule)
_Stats = parser(Stats)
_Verification = parser(Verification)
_Webhook = parser(Webhook)
_Workflow = parser(Workflow)


def _get(path: str, parse: Callable[[JsonObject], T], params: Query | None = None) -> Call[T]:
    return Call("GET", path, lambda content: parse(json_object(content)), _params(params))


def _send(
    method: str,
    path: str,
    parse: Callable[[JsonObject], T],
    body: JsonValue | None = None,
    *,
    expect: frozenset[int] = OK,
) -> Call[T]:
    content = None if body is None else encode(body)
    return Call(
        method, path, lambda answer: parse(json_object(answer)), body=content, expect=expect
    )


def _delete(path: str) -> Call[None]:
    """A DELETE, answered 204 No Content."""
    return _send("DELETE", path, _none, expect=NO_CONTENT)


def _none(_body: JsonObject) -> None:
    return None


def _items(cls: type[W]) -> Callable[[JsonObject], list[W]]:
    """Every item of a list that is not paged (its envelope's `items`)."""
    page = parser(page_of(cls))
    return lambda body: list(page(body).items)


def _paged(cls: type[W]) -> Callable[[JsonObject], Page[W]]:
    """One page of a paged list: its envelope's `items` and `next_cursor`."""
    return parser(page_of(cls))


# --- health and metrics ----------------------------------------------------------------


def health() -> Call[JsonObject]:
    return _get("/healthz", lambda body: body)


def metrics() -> Call[str]:
    return Call("GET", "/metrics", lambda content: content.decode("utf-8"), accept="text/plain")


# --- events and processes --------------------------------------------------------------


def submit_signed(submission: Submission) -> Call[Accepted]:
    """POST a signed event; no token needed, the signature is the authority. Safe to
    repeat: the engine records an event once, and refuses it again as `duplicate`."""
    call = _send("POST", "/v1/events", _Accepted, submission.to_json(), expect=CREATED)
    return dataclasses.replace(call, repeatable=True)


def process(process_id: str) -> Call[Process]:
    return _get(f"/v1/processes/{_segment(process_id)}", _Process)


def events(process_id: str) -> Call[list[Event]]:
    return _get(f"/v1/processes/{_segment(process_id)}/events", _items(Event))


def processes(
    *,
    workflow: str | None = None,
    state: str | None = None,
    parent: str | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
    q: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> Call[Page[Process]]:
    """A page of processes, newest first (by last update, then id)."""
    params = {
        "workflow": workflow,
        "state": state,
        "parent": parent,
        "updated_after": updated_after,
        "updated_before": updated_before,
        "q": q,
        "cursor": cursor,
        "limit": limit,
    }
    return _get("/v1/processes", _paged(Process), params)


def verify(process_id: str, *, replay: bool = False) -> Call[Verification]:
    params = {"replay": "true" if replay else None}
    return _get(f"/v1/processes/{_segment(process_id)}/verify", _Verification, params)


def export(process_id: str) -> Call[JsonObject]:
    """The `charter-export/1` bundle, for `charter verify --bundle` offline."""
    return _get(f"/v1/processes/{_segment(process_id)}/export", lambda body: body)


def process_automation(process_id: str) -> Call[ProcessAutomation]:
    return _get(f"/v1/processes/{_segment(process_id)}/automation", _ProcessAutomation)


# --- workflows and actors --------------------------------------------------------------


def workflows() -> Call[list[Deployment]]:
    return _get("/v1/workflows", _items(Deployment))


def workflow(path: str, revision: int | None = None) -> Call[Workflow]:
    params = {"revision": revision} if revision is not None else None
    return _get(f"/v1/workflows/{quote(path, safe='/')}", _Workflow, params)


def workflow_states(path: str) -> Call[list[StateCount]]:
    return _get(f"/v1/workflows/{quote(path, safe='/')}/states", _items(StateCount))


def deploy_workflow(
    path: str,
    definition: JsonValue,
    allow_stranding: bool = False,
    migration_map: Mapping[str, str] | None = None,
) -> Call[Deployed]:
    body: JsonObject = {"path": path, "definition": definition}
    if allow_stranding:
        body["allow_stranding"] = True
    if migration_map is not None:
        body["migration"] = {"map": dict(migration_map)}
    # 201 for a new revision, 200 when this definition is deployed already.
    return _send("POST", "/v1/workflows", _Deployed, body, expect=frozenset({200, 201}))


def plan_workflow(
    path: str, definition: JsonValue, cursor: str | None = None, replay: bool = True
) -> Call[DeployPlan]:
    body: JsonObject = {"path": path, "definition": definition}
    if cursor is not None:
        body["cursor"] = cursor
    if not replay:
        body["replay"] = False
    return _send("POST", "/v1/workflows/plan", _DeployPlan, body, expect=OK)


def actors() -> Call[list[Actor]]:
    return _get("/v1/actors", _items(Actor))


def actor(actor_id: str) -> Call[Actor]:
    return _get(f"/v1/actors/{_segment(actor_id)}", _Actor)


def add_actor(actor_id: str, public_key: str, roles: list[str]) -> Call[Actor]:
    body: JsonObject = {"id": actor_id, "public_key": public_key, "roles": list(roles)}
    return _send("POST", "/v1/actors", _Actor, body, expect=CREATED)


def rotate_key(actor_id: str, public_key: str) -> Call[Actor]:
    path = f"/v1/actors/{_segment(actor_id)}/keys"
    return _send("POST", path, _Actor, {"public_key": public_key})


def set_roles(actor_id: str, roles: list[str]) -> Call[Actor]:
    path = f"/v1/actors/{_segment(actor_id)}/roles"
    return _send("POST", path, _Actor, {"roles": list(roles)})


def disable_actor(actor_id: str) -> Call[Actor]:
    return _send("POST", f"/v1/actors/{_segment(actor_id)}/disable", _Actor)


def enable_actor(actor_id: str) -> Call[Actor]:
    return _send("POST", f"/v1/actors/{_segment(actor_id)}/enable", _Actor)


# --- operator views --------------------------------------------------------------------


def stats() -> Call[Stats]:
    return _get("/v1/stats", _Stats)


@dataclasses.dataclass(frozen=True)
class WorkFilter:
    """Which rows a work view (`scheduled`, `queue`) lists: a field left None does not
    narrow it. The views and their client methods also take these fields as keywords,
    which override the filter's: `client.queue(where, status="failed")`."""

    status: str | None = None
    due_before: datetime | None = None
    workflow: str | None = None
    process: str | None = None

    @classmethod
    def of(cls, where: WorkFilter | None = None, **fields: Unpack[WorkFields]) -> WorkFilter:
        """`where` (no filter when None) with the fields given as keywords."""
        return dataclasses.replace(where or cls(), **fields)


class WorkFields(TypedDict, total=False):
    """WorkFilter's fields as keyword arguments (the one list of them is WorkFilter)."""

    status: str | None
    due_before: datetime | None
    workflow: str | None
    process: str | None


def scheduled(
    where: WorkFilter | None = None,
    *,
    cursor: str | None = None,
    limit: int | None = None,
    **filters: Unpack[WorkFields],
) -> Call[Page[WorkItem]]:
    """A page of scheduled actions, soonest due first."""
    return _work("/v1/automation/scheduled", WorkFilter.of(where, **filters), cursor, limit)


def queue(
    where: WorkFilter | None = None,
    *,
    cursor: str | None = None,
    limit: int | None = None,
    **filters: Unpack[WorkFields],
) -> Call[Page[WorkItem]]:
    """A page of automatic-action queue rows."""
    return _work("/v1/automation/queue", WorkFilter.of(where, **filters), cursor, limit)


def _work(
    path: str, where: WorkFilter, cursor: str | None, limit: int | None
) -> Call[Page[WorkItem]]:
    fields = {f.name: getattr(where, f.name) for f in dataclasses.fields(where)}
    params: Query = {**fields, "cursor": cursor, "limit": limit}
    return _get(path, _paged(WorkItem), params)


# --- machines --------------------------------------------------------------------------


def machines() -> Call[list[Machine]]:
    return _get("/v1/machines", _items(Machine))


def register_machine(
    target: str,
    public_jwk: JsonObject,
    *,
    machine_id: str | None = None,
    principal: str | None = None,
) -> Call[Machine]:
    """Register a machine by its DPoP public key (`automations:write`; a `*` token for
    another `principal`)."""
    body: JsonObject = {"target": target, "public_jwk": public_jwk}
    if machine_id is not None:
        body["id"] = machine_id
    if principal is not None:
        body["principal"] = principal
    return _send("POST", "/v1/machines", _Machine, body, expect=CREATED)


def disable_machine(machine_id: str) -> Call[Machine]:
    return _send("POST", f"/v1/machines/{_segment(machine_id)}/disable", _Machine)


def enable_machine(machine_id: str) -> Call[Machine]:
    return _send("POST", f"/v1/machines/{_segment(machine_id)}/enable", _Machine)


# --- automations -----------------------------------------------------------------------


def create_automation(name: str, target: str, *, enabled: bool = True) -> Call[Automation]:
    body: JsonObject = {"name": name, "target": target, "enabled": enabled}
    return _send("POST", "/v1/automations", _Automation, body, expect=CREATED)


def automations(*, cursor: str | None = None, limit: int | None = None) -> Call[Page[Automation]]:
    """A page of the principal's automations, oldest first."""
    params = {"cursor": cursor, "limit": limit}
    return _get("/v1/automations", _paged(Automation), params)


def automation(automation_id: str) -> Call[AutomationDetail]:
    return _get(_automation(automation_id), _AutomationDetail)


def update_automation(
    automation_id: str,
    *,
    name: str | None = None,
    target: str | None = None,
    enabled: bool | None = None,
) -> Call[Automation]:
    """Change the fields given; the others stay."""
    fields = (("name", name), ("target", target), ("enabled", enabled))
    body: JsonObject = {k: v for k, v in fields if v is not None}
    return _send("PATCH", _automation(automation_id), _Automation, body)


def delete_automation(automation_id: str) -> Call[None]:
    return _delete(_automation(automation_id))


def pause_automation(automation_id: str) -> Call[Automation]:
    return _send("POST", _automation(automation_id, "pause"), _Automation)


def resume_automation(automation_id: str) -> Call[Automation]:
    return _send("POST", _automation(automation_id, "resume"), _Automation)


def schedules(automation_id: str) -> Call[list[Schedule]]:
    return _get(_automation(automation_id, "schedules"), _items(Schedule))


def add_schedule(
    automation_id: str, cron: str, timezone: str, *, max_occurrences: int | None = None
) -> Call[Schedule]:
    """A schedule trigger; `max_occurrences` None: unbounded."""
    body: JsonObject = {"cron": cron, "timezone": timezone}
    if max_occurrences is not None:
        body["maxOccurrences"] = max_occurrences
    path = _automation(automation_id, "schedules")
    return _send("POST", path, _Schedule, body, expect=CREATED)


def update_schedule(
    automation_id: str,
    trigger_id: str,
    *,
    cron: str | None = None,
    timezone: str | None = None,
    enabled: bool | None = None,
    max_occurrences: int | Unset | None = UNSET,
) -> Call[Schedule]:
    """Change the fields given. `max_occurrences=None` makes the schedule unbounded;
    leaving it out keeps its budget."""
    fields = (("cron", cron), ("timezone", timezone), ("enabled", enabled))
    body: JsonObject = {k: v for k, v in fields if v is not None}
    if not isinstance(max_occurrences, Unset):
        body["maxOccurrences"] = max_occurrences
    path = _automation(automation_id, "schedules", trigger_id)
    return _send("PATCH", path, _Schedule, body)


def remove_schedule(automation_id: str, trigger_id: str) -> Call[None]:
    return _delete(_automation(automation_id, "schedules", trigger_id))


def webhooks(automation_id: str) -> Call[list[Webhook]]:
    return _get(_automation(automation_id, "webhooks"), _items(Webhook))


def add_webhook(
    automation_id: str, source: str, *, event: str | None = None, secret: str | None = None
) -> Call[Webhook]:
    """A webhook trigger; the result's `secret` (given or generated) is shown only here."""
    body: JsonObject = {"source": source}
    if event is not None:
        body["event"] = event
    if secret is not None:
        body["secret"] = secret
    path = _automation(automation_id, "webhooks")
    return _send("POST", path, _Webhook, body, expect=CREATED)


def update_webhook(
    automation_id: str,
    trigger_id: str,
    *,
    source: str | None = None,
    event: str | Unset | None = UNSET,
    enabled: bool | None = None,
    secret: str | None = None,
) -> Call[Webhook]:
    """Change the fields given; `event=None` matches every event of the source."""
    fields = (("source", source), ("enabled", enabled), ("secret", secret))
    body: JsonObject = {k: v for k, v in fields if v is not None}
    if not isinstance(event, Unset):
        body["event"] = event
    path = _automation(automation_id, "webhooks", trigger_id)
    return _send("PATCH", path, _Webhook, body)


def new_secret() -> str:
    """A fresh webhook secret, for `rotate_secret` (the API never shows one again)."""
    return webhook_secret.new_secret()


def remove_webhook(automation_id: str, trigger_id: str) -> Call[None]:
    return _delete(_automation(automation_id, "webhooks", trigger_id))


def set_plan(automation_id: str, plan: Mapping[str, JsonValue]) -> Call[Plan]:
    """Set the plan: `{"version": 1, "steps": [...], "allowlist"?, "limits"?}`."""
    return _send("PUT", _automation(automation_id, "plan"), _Plan, dict(plan))


def plan(automation_id: str) -> Call[Plan]:
    return _get(_automation(automation_id, "plan"), _Plan)


def clear_plan(automation_id: str) -> Call[None]:
    return _delete(_automation(automation_id, "plan"))


# --- runs ------------------------------------------------------------------------------


def trigger(automation_id: str, input: JsonValue = None) -> Call[Run]:
    """Admit a pending manual run (needs `runs:execute`)."""
    body: JsonObject = {} if input is None else {"input": input}
    return _send("POST", _automation(automation_id, "runs"), _Run, body, expect=CREATED)


def runs(
    *,
    status: str | None = None,
    automation_id: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> Call[Page[Run]]:
    """A page of the principal's runs, newest first."""
    params = {"status": status, "automation_id": automation_id, "cursor": cursor, "limit": limit}
    return _get("/v1/runs", _paged(Run), params)


def run(run_id: str) -> Call[RunDetail]:
    return _get(f"/v1/runs/{_segment(run_id)}", _RunDetail)


def cancel_run(run_id: str) -> Call[Run]:
    """Cancel a pending or running run (needs `runs:execute`)."""
    return _send("POST", f"/v1/runs/{_segment(run_id)}/cancel", _Run)


def retry_run(run_id: str) -> Call[Run]:
    """Retry a failed run: the new run (needs `runs:execute`)."""
    return _send("POST", f"/v1/runs/{_segment(run_id)}/retry", _Run, expect=CREATED)


# --- helpers ---------------------------------------------------------------------------


def _params(values: Query | None) -> dict[str, str]:
    return {k: _text(v) for k, v in (values or {}).items() if v is not None}


def _text(value: str | int | datetime) -> str:
    return format_rfc3339(value) if isinstance(value, datetime) else str(value)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _automation(automation_id: str, *rest: str) -> str:
    return "/".join(["/v1/automations", *(_segment(p) for p in (automation_id, *rest))])
