"""Response models of the automations control API, runs and machines, for /openapi.json.

The objects themselves, the machine API's answers too, are `charter.wire.automations`';
the list envelopes around them are described here. More keys may be added; the ones
listed are relied on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from charter.api.wire_models import model, page_model
from charter.wire import automations as wire

NewWebhook = model(wire.Webhook, creating=True)
Plan = model(wire.Plan)
AutomationDetail = model(wire.AutomationDetail)
RunDetail = model(wire.RunDetail)
# The machine API's answers.
Lease = model(wire.Lease)
Claim = model(wire.Claim)
StepAnswer = model(wire.StepAnswer)
RunAnswer = model(wire.RunAnswer)
if TYPE_CHECKING:
    # What the envelopes below name in annotations; made at run time from the wire.
    Automation = BaseModel
    Schedule = BaseModel
    Webhook = BaseModel
    Run = BaseModel
    Machine = BaseModel
else:
    Automation = model(wire.Automation)
    Schedule = model(wire.Schedule)
    Webhook = model(wire.Webhook)
    Run = model(wire.Run)
    Machine = model(wire.Machine)


AutomationPage = page_model(Automation, "AutomationPage")
Schedules = page_model(Schedule, "Schedules", paged=False)
Webhooks = page_model(Webhook, "Webhooks", paged=False)
RunPage = page_model(Run, "RunPage")
Machines = page_model(
    Machine,
    "Machines",
    paged=False,
    old_key="machines",
    description="The principal's machines: the list envelope, never paged.",
    extra={
        "can_change": (
            bool,
            Field(description="Whether this token may disable and enable machines."),
        )
    },
)
