"""What the SDK's calls return: frozen dataclasses, each parsed from its response object.

The objects `charter.wire` defines are re-exported as they are (read with `parser`),
`Page`, the list envelope around them, too: `parser(Page[Run])` reads a page of runs.

Every result keeps the object it came from in `raw` (what `--json` prints); a missing or
mistyped field is `UnexpectedResponse`, never a half-filled value. Times are aware
`datetime`s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from charter import wire
from charter.core.jsontypes import JsonObject
from charter.sdk.errors import UnexpectedResponse

# Re-exported: the SDK's results are these wire objects themselves.
from charter.wire.automations import (
    Automation as Automation,
)
from charter.wire.automations import (
    AutomationDetail as AutomationDetail,
)
from charter.wire.automations import (
    Machine as Machine,
)
from charter.wire.automations import (
    Plan as Plan,
)
from charter.wire.automations import (
    PlanStep as PlanStep,
)
from charter.wire.automations import (
    Run as Run,
)
from charter.wire.automations import (
    RunDetail as RunDetail,
)
from charter.wire.automations import (
    RunStep as RunStep,
)
from charter.wire.automations import (
    Schedule as Schedule,
)
from charter.wire.automations import (
    Webhook as Webhook,
)
from charter.wire.engine import Accepted as Accepted
from charter.wire.engine import Actor as Actor
from charter.wire.engine import Deployed as Deployed
from charter.wire.engine import Deployment as Deployment
from charter.wire.engine import Event as Event
from charter.wire.engine import Problem as Problem
from charter.wire.engine import Process as Process
from charter.wire.engine import ProcessAutomation as ProcessAutomation
from charter.wire.engine import StateCount as StateCount
from charter.wire.engine import Stats as Stats
from charter.wire.engine import Verification as Verification
from charter.wire.engine import Workflow as Workflow
from charter.wire.engine import WorkItem as WorkItem
from charter.wire.lifecycle import DeployPlan as DeployPlan
from charter.wire.pages import Page as Page

W = TypeVar("W", bound=wire.Wire)


def parser(cls: type[W]) -> Callable[[JsonObject], W]:
    """How a call reads an answer that is a wire object: strictly, any flaw being
    UnexpectedResponse."""
    return lambda body: wire.parse(cls, body, UnexpectedResponse)
