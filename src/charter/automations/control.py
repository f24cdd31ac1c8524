"""What the control API shares with its clients (the CLI): UNSET, the key absent from a
change, and fresh webhook secrets (both defined in core, where the SDK takes them
from); and its refusals.

The checks of request values are in `checks`, the records in `records`, the store of
a principal's automations, triggers and plans in `store`.
"""

from __future__ import annotations

from charter.automations.cron import InvalidSchedule
from charter.automations.errors import (
    AutomationPaused,
    InvalidAutomation,
    InvalidWebhook,
    NoPlan,
    RunFinished,
    RunNotFailed,
)
from charter.automations.plan import InvalidPlan
from charter.core.errors import CharterError
from charter.core.unset import UNSET as UNSET
from charter.core.unset import Unset as Unset
from charter.core.webhook_secret import SECRET_PREFIX as SECRET_PREFIX
from charter.core.webhook_secret import new_secret as new_secret

# The control API's own refusals. A client rebuilds an error answer as the class of
# its code, among the classes imported: importing this module imports them all.
REFUSALS: tuple[type[CharterError], ...] = (
    InvalidAutomation,
    InvalidWebhook,
    InvalidSchedule,
    InvalidPlan,
    AutomationPaused,
    NoPlan,
    RunFinished,
    RunNotFailed,
)
