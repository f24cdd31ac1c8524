"""next_run_at: the fixed grid, coalescing after downtime, `count` and `until`
(docs/automation.md)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from charter.engine.work import ScheduledRow
from charter.firing.recurrence import next_run_at

T0 = datetime(2026, 6, 18, 10, tzinfo=UTC)
DAY = timedelta(days=1)
YEAR = timedelta(days=365)


def _row(
    *,
    run_at: datetime = T0,
    interval: str | None = "1d",
    until: datetime | None = None,
    count: int | None = None,
    fire_count: int = 0,
) -> ScheduledRow:
    return ScheduledRow(
        id=uuid.uuid4(),
        schedule_id="periodic",
        process_id="p-1",
        workflow_path="tests/recurring",
        action_name="tick",
        action_data={},
        run_at=run_at,
        not_before=None,
        interval=interval,
        until_ts=until,
        max_count=count,
        fire_count=fire_count,
        occurrence_attempts=0,
        status="claimed",
        created_event_hash="a" * 64,
        created_by_action="open",
        created_by_actor="b" * 64,
        created_at=T0 - DAY,
        attempts=0,
        claimed_by="w1",
        lease_expires_at=T0 + timedelta(minutes=1),
        lease_token=uuid.uuid4(),
    )


def test_one_shot_has_no_next_run_fired_or_skipped() -> None:
    row = _row(interval=None)
    assert next_run_at(row, T0, fired=True) is None
    assert next_run_at(row, T0, fired=False) is None


def test_every_without_downtime_moves_one_interval_on() -> None:
    row = _row(interval="1d")
    assert next_run_at(row, T0, fired=True) == T0 + DAY
    # A fire a little late (a few seconds) stays on the grid, not `now + every`.
    assert next_run_at(row, T0 + timedelta(seconds=7), fired=True) == T0 + DAY


def test_a_year_is_365_days_not_a_calendar_year() -> None:
    # 2028 is a leap year: a calendar year after 2027-06-18 would be 366 days later.
    start = datetime(2027, 6, 18, 10, tzinfo=UTC)
    row = _row(run_at=start, interval="1y")
    assert next_run_at(row, start, fired=True) == start + timedelta(days=365)
    assert next_run_at(row, start, fired=True) != datetime(2028, 6, 18, 10, tzinfo=UTC)


def test_after_long_downtime_it_coalesces_to_the_first_future_slot() -> None:
    row = _row(interval="1y")
    now = T0 + 3 * YEAR + timedelta(days=40)  # three slots missed, fired once now
    following = next_run_at(row, now, fired=True)
    assert following == T0 + 4 * YEAR


def test_a_now_exactly_on_a_slot_moves_past_it() -> None:
    row = _row(interval="1d")
    assert next_run_at(row, T0 + 5 * DAY, fired=True) == T0 + 6 * DAY


@given(
    every_hours=st.integers(min_value=1, max_value=24 * 400),
    late_seconds=st.integers(min_value=0, max_value=20 * 365 * 86_400),
)
def test_the_next_slot_is_the_single_grid_slot_after_now(
    every_hours: int, late_seconds: int
) -> None:
    every = timedelta(hours=every_hours)
    row = _row(interval=f"{every_hours}h")
    now = T0 + timedelta(seconds=late_seconds)
    following = next_run_at(row, now, fired=True)
    assert following is not None
    assert following > now
    assert following - every <= now  # the first slot after now, no slot skipped past it
    assert (following - T0) % every == timedelta(0)  # on the grid of run_at + k·every


def test_count_counts_fired_occurrences_only() -> None:
    # count 3: after the third accepted fire the schedule is done.
    assert next_run_at(_row(count=3, fire_count=1), T0, fired=True) == T0 + DAY
    assert next_run_at(_row(count=3, fire_count=2), T0, fired=True) is None
    # A skipped occurrence does not count: two fires so far, this one skipped, go on.
    assert next_run_at(_row(count=3, fire_count=2), T0, fired=False) == T0 + DAY
    # count 1: the first fire finishes it.
    assert next_run_at(_row(count=1), T0, fired=True) is None
    assert next_run_at(_row(count=1), T0, fired=False) == T0 + DAY


def test_until_is_inclusive_a_slot_exactly_at_until_still_runs() -> None:
    row = _row(until=T0 + DAY)
    assert next_run_at(row, T0, fired=True) == T0 + DAY
    assert next_run_at(replace(row, run_at=T0 + DAY), T0 + DAY, fired=True) is None


def test_until_stops_a_schedule_whose_next_slot_is_after_it() -> None:
    row = _row(until=T0 + DAY - timedelta(seconds=1))
    assert next_run_at(row, T0, fired=True) is None
    assert next_run_at(row, T0, fired=False) is None


def test_until_applies_to_the_coalesced_slot() -> None:
    row = _row(interval="1d", until=T0 + 10 * DAY)
    assert next_run_at(row, T0 + 9 * DAY + timedelta(hours=1), fired=True) == T0 + 10 * DAY
    assert next_run_at(row, T0 + 10 * DAY + timedelta(hours=1), fired=True) is None
