"""The Python SDK of Charter: `Client` (blocking) and `AsyncClient` (asyncio), one
implementation — `calls` says what each endpoint asks and answers, `protocol` the
deadline, retries and errors, `signing` the sign-on-head loop — with two thin
transports: `aio` is written by hand and `client` generated from it
(tools/async_to_sync.py). See docs/python.md."""

from charter.core.errors import CharterError, StalePrev
from charter.sdk.aio import AsyncClient
from charter.sdk.calls import WorkFilter
from charter.sdk.client import Client
from charter.sdk.errors import (
    ApiTimeout,
    ApiUnavailable,
    UnexpectedResponse,
    UnexpectedStatus,
    WaitTimeout,
)
from charter.sdk.protocol import RetryPolicy
from charter.sdk.results import (
    Accepted,
    Actor,
    Automation,
    AutomationDetail,
    Deployed,
    Deployment,
    Event,
    Machine,
    Page,
    Plan,
    PlanStep,
    Problem,
    Process,
    ProcessAutomation,
    Run,
    RunDetail,
    RunStep,
    Schedule,
    StateCount,
    Stats,
    Verification,
    Webhook,
    Workflow,
    WorkItem,
)

__all__ = [
    "Accepted",
    "Actor",
    "ApiTimeout",
    "ApiUnavailable",
    "AsyncClient",
    "Automation",
    "AutomationDetail",
    "CharterError",
    "Client",
    "Deployed",
    "Deployment",
    "Event",
    "Machine",
    "Page",
    "Plan",
    "PlanStep",
    "Problem",
    "Process",
    "ProcessAutomation",
    "RetryPolicy",
    "Run",
    "RunDetail",
    "RunStep",
    "Schedule",
    "StalePrev",
    "StateCount",
    "Stats",
    "UnexpectedResponse",
    "UnexpectedStatus",
    "Verification",
    "WaitTimeout",
    "Webhook",
    "WorkFilter",
    "WorkItem",
    "Workflow",
]
