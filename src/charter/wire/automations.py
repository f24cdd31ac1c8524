"""The automations control API's objects: automations, their triggers and plans, runs and
their step journals, and machines. Field order is the JSON's key order."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated

from charter.core.jsontypes import JsonObject, JsonValue
from charter.wire.codec import Meta, Wire
from charter.wire.patterns import HEX64, NAME, PRINCIPAL, UUID

_ID = Meta(pattern=UUID)
_OWNER = Meta(pattern=PRINCIPAL, description="The principal it belongs to.")


@dataclass(frozen=True)
class Automation(Wire):
    id: Annotated[str, _ID]
    principal: Annotated[str, _OWNER]
    name: str
    target: Annotated[str, Meta(pattern=NAME)]
    enabled: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Schedule(Wire):
    id: Annotated[str, _ID]
    automation_id: Annotated[str, _ID]
    cron: str
    timezone: str
    next_run_at: datetime
    # None: unbounded; otherwise how many occurrences are left.
    remaining_occurrences: Annotated[int | None, Meta(description="Null: unbounded.")]
    enabled: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Webhook(Wire):
    id: Annotated[str, _ID]
    automation_id: Annotated[str, _ID]
    source: str
    event: Annotated[str | None, Meta(description="Null: every event of the source.")]
    enabled: bool
    # Every trigger has a secret (the column is NOT NULL), which no answer but the
    # creating one reveals.
    has_secret: Annotated[bool, Meta(choices=(True,))]
    created_at: datetime
    updated_at: datetime
    secret: Annotated[
        str | None,
        Meta(
            pattern=r"^whsec_[A-Za-z0-9+/]+={0,2}$",
            description="The signing secret: in this response and in no other.",
            on_create=True,
        ),
    ] = field(default=None, repr=False)


@dataclass(frozen=True)
class PlanStep(Wire):
    id: str
    action_id: Annotated[str, Meta(key="actionId")]
    input: JsonValue
    # `{"on": [...]}`: the target answers the step may retry (None: transport failures only).
    retry: JsonValue = None

    @property
    def retry_on(self) -> tuple[str, ...]:
        """The conditions of `retry.on` (`http_5xx`, `http_429`); () when not opted in."""
        on = self.retry.get("on") if isinstance(self.retry, dict) else None
        return tuple(str(c) for c in on) if isinstance(on, list) else ()


@dataclass(frozen=True)
class Plan(Wire):
    automation_id: Annotated[str, _ID]
    version: Annotated[int, Meta(choices=(1,))]
    steps: tuple[PlanStep, ...]
    allowlist: JsonValue
    limits: JsonValue
    updated_at: datetime


@dataclass(frozen=True)
class AutomationDetail(Wire):
    """An automation with its triggers (no secrets) and its plan, if any."""

    automation: Annotated[Automation, Meta(flatten=True)]
    schedules: tuple[Schedule, ...]
    webhooks: tuple[Webhook, ...]
    plan: Plan | None


_TRIGGER_KINDS = Meta(choices=("manual", "schedule", "webhook"))
RUN_STATUSES = ("pending", "running", "completed", "failed")


@dataclass(frozen=True)
class Run(Wire):
    id: Annotated[str, _ID]
    principal: Annotated[str, _OWNER]
    automation_id: Annotated[str, _ID]
    trigger_id: str | None
    trigger_kind: Annotated[str, _TRIGGER_KINDS]
    target: str
    status: Annotated[str, Meta(choices=RUN_STATUSES)]
    # The immutable snapshot of the plan the run was admitted with.
    plan: Annotated[JsonObject, Meta(description="The plan snapshot the run was admitted with.")]
    input: JsonValue
    scheduled_for: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    retry_at: datetime | None
    attempts: Annotated[int, Meta(ge=0)]
    output: JsonValue
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class RunStep(Wire):
    """One row of a run's step journal."""

    step_id: str
    position: Annotated[int, Meta(ge=0)]
    status: str
    idempotency_key: Annotated[str, Meta(pattern=HEX64)]
    output: JsonValue
    error: str | None
    attempts: Annotated[int, Meta(ge=0)]
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class RunDetail(Wire):
    """A run and its step journal in plan order."""

    run: Annotated[Run, Meta(flatten=True)]
    steps: Annotated[tuple[RunStep, ...], Meta(description="The step journal in plan order.")]


@dataclass(frozen=True)
class Machine(Wire):
    """A registered machine (docs/machines.md): the DPoP key it proves with, and whether the
    API refuses it."""

    id: Annotated[str, Meta(pattern=NAME)]
    target: Annotated[str, Meta(pattern=NAME)]
    principal: Annotated[str, Meta(pattern=PRINCIPAL)]
    thumbprint: str
    public_jwk: JsonObject
    created_at: datetime
    disabled_at: datetime | None
    # The machine list's own keys.
    last_seen_at: Annotated[
        datetime | None,
        Meta(
            description="In the machine list: when its latest stored DPoP proof was made "
            "(proofs are kept minutes, so null means not seen recently)."
        ),
    ] = None
    runs_in_progress: Annotated[
        int | None,
        Meta(ge=0, description="In the machine list: running runs it holds a lease on."),
    ] = None

    @property
    def disabled(self) -> bool:
        return self.disabled_at is not None


# --- the machine API's answers (docs/machines.md) ---------------------------------------


@dataclass(frozen=True)
class Lease(Wire):
    """A run's lease: the token every call under it sends, and when it lapses."""

    token: Annotated[
        str, Meta(pattern=UUID, description="The lease token: send it with every call.")
    ]
    expires_at: datetime


@dataclass(frozen=True)
class Claim(Wire):
    """A claimed run: its plan snapshot, the lease and the journal so far."""

    run: Run
    lease: Lease
    journal: Annotated[tuple[RunStep, ...], Meta(description="The steps journalled so far.")]
    started: Annotated[
        RunStep | None,
        Meta(
            description="The first incomplete step, journalled running by this claim "
            "(`start`); null when not asked or when every step is completed.",
            required=True,
        ),
    ] = None
    traceparent: Annotated[
        str | None,
        Meta(
            description="The W3C trace context of the span that admitted the run, to "
            "continue its trace; null when tracing was off.",
            required=True,
        ),
    ] = None


@dataclass(frozen=True)
class StepAnswer(Wire):
    """A step journalled; `next` and `lease` are sent only when asked for (the server
    writes it from a mapping without those keys)."""

    step: RunStep
    next: Annotated[RunStep | None, Meta(description="The next step, started (`next`).")] = None
    lease: Annotated[Lease | None, Meta(description="The renewed lease.")] = None


@dataclass(frozen=True)
class RunAnswer(Wire):
    """A run completed, failed or released; `claim` is sent only when asked for."""

    run: Run
    claim: Annotated[
        Claim | None, Meta(description="The next run claimed (`claim`); null when none.")
    ] = None
