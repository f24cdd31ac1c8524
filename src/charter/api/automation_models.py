"""Response models of the automations control API, runs and machines, for /openapi.json.

As with the engine routes, the answers are built from records' `to_json()`; these describe
them. More keys may be added; the ones listed are relied on.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from charter.api.contract import NAME, PRINCIPAL, TIME, UUID
from charter.api.listing import alias_field, cursor_field

Json = Any
_TIME = Field(description=TIME)
RunStatus = Literal["pending", "running", "completed", "failed"]


_OWNER = Field(pattern=PRINCIPAL, description="The principal it belongs to.")


class Automation(BaseModel):
    id: str = Field(pattern=UUID)
    principal: str = _OWNER
    name: str
    target: str = Field(pattern=NAME)
    enabled: bool
    created_at: str = _TIME
    updated_at: str = _TIME


class AutomationPage(BaseModel):
    items: list[Automation]
    next_cursor: str | None = cursor_field()


class Schedule(BaseModel):
    id: str = Field(pattern=UUID)
    automation_id: str = Field(pattern=UUID)
    cron: str
    timezone: str
    next_run_at: str = _TIME
    remaining_occurrences: int | None = Field(description="Null: unbounded.")
    enabled: bool
    created_at: str = _TIME
    updated_at: str = _TIME


class Schedules(BaseModel):
    items: list[Schedule]
    next_cursor: str | None = cursor_field(paged=False)


class Webhook(BaseModel):
    id: str = Field(pattern=UUID)
    automation_id: str = Field(pattern=UUID)
    source: str
    event: str | None = Field(description="Null: every event of the source.")
    enabled: bool
    has_secret: Literal[True]
    created_at: str = _TIME
    updated_at: str = _TIME


class NewWebhook(Webhook):
    secret: str = Field(
        pattern=r"^whsec_[A-Za-z0-9+/]+={0,2}$",
        description="The signing secret: in this response and in no other.",
    )


class Webhooks(BaseModel):
    items: list[Webhook]
    next_cursor: str | None = cursor_field(paged=False)


class Plan(BaseModel):
    automation_id: str = Field(pattern=UUID)
    version: Literal[1]
    steps: list[Json]
    allowlist: Json
    limits: Json
    updated_at: str = _TIME


class AutomationDetail(Automation):
    schedules: list[Schedule]
    webhooks: list[Webhook]
    plan: Plan | None


class Run(BaseModel):
    id: str = Field(pattern=UUID)
    principal: str = _OWNER
    automation_id: str = Field(pattern=UUID)
    trigger_id: str | None
    trigger_kind: Literal["manual", "schedule", "webhook"]
    target: str
    status: RunStatus
    plan: dict[str, Json] = Field(description="The plan snapshot the run was admitted with.")
    input: Json
    scheduled_for: str | None = _TIME
    lease_owner: str | None
    lease_expires_at: str | None = _TIME
    retry_at: str | None = _TIME
    attempts: int = Field(ge=0)
    output: Json
    error: str | None
    created_at: str | None = _TIME
    started_at: str | None = _TIME
    finished_at: str | None = _TIME


class RunPage(BaseModel):
    items: list[Run]
    next_cursor: str | None = cursor_field()


class Step(BaseModel):
    step_id: str
    position: int = Field(ge=0)
    status: str
    idempotency_key: str = Field(pattern=r"^[0-9a-f]{64}$")
    output: Json
    error: str | None
    attempts: int = Field(ge=0)
    started_at: str | None = _TIME
    finished_at: str | None = _TIME


class RunDetail(Run):
    steps: list[Step] = Field(description="The step journal in plan order.")


class Machine(BaseModel):
    id: str = Field(pattern=NAME)
    target: str = Field(pattern=NAME)
    principal: str = Field(pattern=PRINCIPAL)
    thumbprint: str
    public_jwk: dict[str, Json]
    created_at: str = _TIME
    disabled_at: str | None = _TIME
    last_seen_at: str | None = Field(
        default=None,
        description="In the machine list: when its latest stored DPoP proof was made "
        "(proofs are kept minutes, so null means not seen recently).",
    )
    runs_in_progress: int | None = Field(
        default=None, ge=0, description="In the machine list: running runs it holds a lease on."
    )


class Machines(BaseModel):
    """The principal's machines: the list envelope, never paged."""

    items: list[Machine]
    next_cursor: str | None = cursor_field(paged=False)
    machines: list[Machine] = alias_field()
    can_change: bool = Field(description="Whether this token may disable and enable machines.")


class Lease(BaseModel):
    token: str = Field(pattern=UUID, description="The lease token: send it with every call.")
    expires_at: str = _TIME


class Claim(BaseModel):
    run: Run
    lease: Lease
    journal: list[Step] = Field(description="The steps journalled so far.")
    started: Step | None = Field(
        default=None,
        description="The first incomplete step, journalled running by this claim (`start`); "
        "null when not asked or when every step is completed.",
    )
    traceparent: str | None = Field(
        default=None,
        description="The W3C trace context of the span that admitted the run, to continue "
        "its trace; null when tracing was off.",
    )


class StepAnswer(BaseModel):
    step: Step
    next: Step | None = Field(default=None, description="The next step, started (`next`).")
    lease: Lease | None = Field(default=None, description="The renewed lease.")


class RunAnswer(BaseModel):
    run: Run
    claim: Claim | None = Field(
        default=None, description="The next run claimed (`claim`); null when none."
    )
