"""When a recurring schedule runs next (docs/automation.md).

A recurring schedule advances on a fixed grid, `run_at + k·every`. After downtime it
fires once for all the missed occurrences and moves to the first slot after `now`
(misfire policy "coalesce"). `until` and `count` bound it; None means it is done.
"""

from __future__ import annotations

from datetime import datetime

from charter.dsl.durations import parse_duration
from charter.engine.work import ScheduledRow


def next_run_at(row: ScheduledRow, now: datetime, *, fired: bool) -> datetime | None:
    """The next run after this occurrence, or None when the row is finished.

    `fired` says whether this occurrence produced an event (it counts toward `count`).
    """
    if row.interval is None:
        return None
    fires = row.fire_count + (1 if fired else 0)
    if row.max_count is not None and fires >= row.max_count:
        return None
    every = parse_duration(row.interval)
    missed = max(0, (now - row.run_at) // every)
    following = row.run_at + (missed + 1) * every
    if row.until_ts is not None and following > row.until_ts:
        return None
    return following
