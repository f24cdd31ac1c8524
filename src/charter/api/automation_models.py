"""Response models of the automations control API, runs and machines, for /openapi.json.

The objects themselves are `charter.wire.automations`'; the envelopes around them are
described here. More keys may be added; the ones listed are relied on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from charter.api.contract import TIME, UUID
from charter.api.listing import alias_field, cursor_field
from charter.api.wire_models import model
from charter.wire import automations as wire

_TIME = Field(description=TIME)

NewWebhook = model(wire.Webhook, creating=True)
Plan = model(wire.Plan)
AutomationDetail = model(wire.AutomationDetail)
RunDetail = model(wire.RunDetail)
if TYPE_CHECKING:
    # What the envelopes below name in annotations; made at run time from the wire.
    Automation = BaseModel
    Schedule = BaseModel
    Webhook = BaseModel
    Run = BaseModel
    Step = BaseModel
    Machine = BaseModel
else:
    Automation = model(wire.Automation)
    Schedule = model(wire.Schedule)
    Webhook = model(wire.Webhook)
    Run = model(wire.Run)
    Step = model(wire.RunStep)
    Machine = model(wire.Machine)


class AutomationPage(BaseModel):
    items: list[Automation]
    next_cursor: str | None = cursor_field()


class Schedules(BaseModel):
    items: list[Schedule]
    next_cursor: str | None = cursor_field(paged=False)


class Webhooks(BaseModel):
    items: list[Webhook]
    next_cursor: str | None = cursor_field(paged=False)


class RunPage(BaseModel):
    items: list[Run]
    next_cursor: str | None = cursor_field()


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
