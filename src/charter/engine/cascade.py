"""Bounded cascades of automatic actions (docs/automation.md).

Two automatic actions that enable each other (state `a` → `b` → `a`) would fire forever,
each a signed event. Every queue row therefore carries how many automatic events in a
row led to it, counted along its cause chain (`queued_by_event_hash`) and reset by any
event that is not an automatic action. Past the limit the engine writes the next row
`failed` with a diagnostic naming the limit and the chain; people can still act on the
process, and their next event starts a new count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from charter.engine.work import QueueRow, WorkRow

DEFAULT_MAX_AUTO_CASCADE = 100
_SHOWN_HEAD, _SHOWN_TAIL = 3, 8  # how much of a long chain a diagnostic spells out


@dataclass(frozen=True)
class Cascade:
    """The cascade the rows an event queues belong to."""

    depth: int  # automatic events in a row that led to those rows
    origin: str  # the hash of the event that is not an automatic action, where it began

    @classmethod
    def after(cls, fired: WorkRow | None, event_hash: str) -> Cascade:
        """The cascade of rows queued by the event `event_hash`, which fired `fired`."""
        if isinstance(fired, QueueRow):
            origin = fired.cascade_origin_event_hash or fired.queued_by_event_hash
            return cls(fired.cascade_depth + 1, origin)
        return cls(0, event_hash)  # a person's event, or a timer: a new count


def cascade_diagnostic(
    cascade: Cascade, limit: int, action: str, chain: Sequence[str], origin_action: str | None
) -> str:
    """Why `action` was not queued: the limit, where the cascade began, the actions since."""
    shown = list(chain)
    if len(shown) > _SHOWN_HEAD + _SHOWN_TAIL:
        shown = [*shown[:_SHOWN_HEAD], "…", *shown[-_SHOWN_TAIL:]]
    began = f"event {cascade.origin[:12]}…" + (f" ({origin_action})" if origin_action else "")
    path = " → ".join([*shown, action]) if shown else action
    return (
        f"cascade limit reached: {cascade.depth} automatic events in a row since {began}; "
        f"the limit is {limit} (CHARTER_MAX_AUTO_CASCADE). Chain: {path}; "
        f"{action!r} was not fired"
    )
