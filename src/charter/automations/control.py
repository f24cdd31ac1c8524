"""What the control API shares with its clients (the SDK, the CLI): UNSET, the key
absent from a change; fresh webhook secrets; and its refusals.

The checks of request values are in `checks`, the records in `records`, the store of
a principal's automations, triggers and plans in `store`.
"""

from __future__ import annotations

import base64
import secrets
from enum import Enum

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

SECRET_PREFIX = "whsec_"  # noqa: S105 (the Standard Webhooks prefix, not a secret)

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


# --- "absent" versus null --------------------------------------------------------------


class Unset(Enum):
    """A key absent from a change: leave the stored value as it is."""

    UNSET = "unset"


UNSET = Unset.UNSET


def new_secret() -> str:
    """A fresh webhook secret: `whsec_` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")
