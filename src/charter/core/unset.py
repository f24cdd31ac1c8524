"""`UNSET`: a key absent from a change, told apart from an explicit null.

The automations service and the SDK both take partial changes (`update_schedule`,
`update_webhook`) where `None` means "clear it" and a left-out field means "keep it".
"""

from __future__ import annotations

from enum import Enum


class Unset(Enum):
    """A key absent from a change: leave the stored value as it is."""

    UNSET = "unset"


UNSET = Unset.UNSET
