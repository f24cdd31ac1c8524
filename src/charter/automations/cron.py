"""Cron schedules in an IANA time zone, fired once per local occurrence (docs/architecture.md).

Expressions have the five classic fields (minute hour day-of-month month day-of-week)
and are parsed and matched by `cronsim`. Occurrences are local wall-clock times; each
becomes one UTC instant:

- a local time that happens twice (the autumn change: 02:30 in Berlin on the last Sunday
  of October) fires once, at its first instant (the earlier, summer-time one);
- a local time that never happens (inside the spring gap: 02:30 in Berlin on the last
  Sunday of March) fires once, at the first valid instant after it (03:00 summer time).
  Several skipped times land on that same instant and fire there once, together with
  an occurrence at the end of the gap itself.

This holds for every expression, not only for fixed-time ones: `cronsim` given an
aware datetime treats expressions with a `*` in the minute or hour field as elapsed-time
intervals (Debian cron's habit), so `*/30 1 * * *` would fire local 01:30 twice on the
autumn night while the equivalent `0,30 1 * * *` fires once. Charter therefore walks
naive local wall-clock time with `cronsim` and resolves each local time to its instant
here, which gives fixed-time expressions exactly what `cronsim` gives them and extends
the same rule to the rest.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from charter.core.errors.automations import InvalidSchedule

MAX_CRON_LENGTH = 200
MAX_TIMEZONE_LENGTH = 64
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
# cronsim's error messages name the field as "Bad <field>"; the message is reused.
_BAD_FIELD = re.compile(r"Bad (second|minute|hour|day-of-month|month|day-of-week)")


def validate_cron(expr: str) -> None:
    """Raise InvalidSchedule naming the problem unless `expr` is a 5-field cron that fires."""
    # Constructing parses every field; one step shows it ever fires (cronsim gives up
    # after 50 years without a match).
    if next(_schedule(expr, datetime(2000, 1, 1)), None) is None:
        raise InvalidSchedule(f"cron {expr!r} never fires")


def _schedule(expr: str, start: datetime) -> CronSim:
    """cronsim's iterator over `expr` from naive `start`; InvalidSchedule naming the field."""
    if not isinstance(expr, str):
        raise InvalidSchedule("cron must be a string")
    if len(expr) > MAX_CRON_LENGTH:
        raise InvalidSchedule(f"cron is longer than {MAX_CRON_LENGTH} characters")
    parts = expr.split()
    if len(parts) != len(_FIELDS):
        raise InvalidSchedule(
            f"cron {expr!r} has {len(parts)} field(s); it needs 5: {' '.join(_FIELDS)}"
        )
    try:
        return CronSim(expr, start)
    except CronSimError as exc:
        match = _BAD_FIELD.search(str(exc))
        what = f"its {match.group(1)} field is invalid" if match else str(exc)
        raise InvalidSchedule(f"cron {expr!r}: {what}") from None


@cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def validate_timezone(name: str) -> ZoneInfo:
    """The zone for an IANA name (e.g. Europe/Berlin); InvalidSchedule for anything else."""
    if not isinstance(name, str) or not name or len(name) > MAX_TIMEZONE_LENGTH:
        raise InvalidSchedule(f"timezone must be an IANA time zone name, got {name!r}")
    # Only the IANA keys: ZoneInfo would also open stray files such as "posixrules" or
    # "localtime", whose meaning depends on the host.
    if name not in _known_zones():
        raise InvalidSchedule(f"unknown time zone {name!r}; use an IANA name like Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown time zone {name!r}") from None


def next_occurrence(cron: str, timezone: str, after: datetime) -> datetime:
    """The aware UTC instant of the first local occurrence of `cron` strictly after `after`."""
    if after.tzinfo is None:
        raise ValueError("next_occurrence needs an aware datetime")
    zone = validate_timezone(timezone)
    after_utc = after.astimezone(UTC)
    wall = after_utc.astimezone(zone).replace(tzinfo=None)
    # Walking naive wall-clock time: local times in a repeated hour resolve to their
    # first instant, which may not be after `after` (when `after` lies in the second
    # pass of that hour); those occurrences happened already, so the walk goes on.
    for local in _schedule(cron, wall):
        instant = resolve_local(local, zone)
        if instant > after_utc:
            return instant
    raise InvalidSchedule(f"cron {cron!r} never fires after {after_utc.isoformat()}")


def resolve_local(local: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant a local wall-clock time fires at: its first instant if it happens
    twice, the first valid instant after it if it never happens."""
    first = local.replace(tzinfo=zone, fold=0)
    if _wall(first.astimezone(UTC), zone) == local:
        return first.astimezone(UTC)
    # Skipped. With fold=1 zoneinfo applies the offset after the change, which lands
    # before the gap; with fold=0 the offset before it, which lands past the gap. The
    # change itself lies between: find the first whole second whose wall time is not
    # before `local` (gaps start and end on whole seconds in the tz database).
    low = int(local.replace(tzinfo=zone, fold=1).timestamp())
    high = int(first.timestamp())
    if low > high:
        low, high = high, low
    while high - low > 1:
        middle = (low + high) // 2
        if _wall(datetime.fromtimestamp(middle, UTC), zone) < local:
            low = middle
        else:
            high = middle
    return datetime.fromtimestamp(high, UTC)


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)
