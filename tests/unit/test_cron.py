"""Cron schedules: validation, and once per local occurrence across DST (docs/architecture.md).

2026's changes: Europe/Berlin skips 02:00-02:59 on 29 March and repeats 02:00-02:59 on
25 October; America/New_York skips 02:00-02:59 on 8 March and repeats 01:00-01:59 on
1 November; Australia/Sydney (southern hemisphere: the other way round) repeats
02:00-02:59 on 5 April and skips 02:00-02:59 on 4 October; Australia/Lord_Howe moves by
half an hour, skipping 02:00-02:29 on 4 October.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from charter.automations.cron import next_occurrence, validate_cron, validate_timezone
from charter.core.errors.automations import InvalidSchedule


def local(zone: str, text: str) -> datetime:
    """An aware local time; `text` carries its UTC offset, so it is unambiguous."""
    moment = datetime.fromisoformat(text)
    assert moment.tzinfo is not None
    return moment.astimezone(ZoneInfo(zone))


def occurrences(cron: str, zone: str, start: str, count: int) -> list[str]:
    """The next `count` occurrences after `start`, as local ISO strings with offsets."""
    found: list[str] = []
    after = local(zone, start)
    for _ in range(count):
        after = next_occurrence(cron, zone, after)
        assert after.tzinfo is UTC
        found.append(after.astimezone(ZoneInfo(zone)).isoformat())
    return found


# --- the spring change: a skipped local time fires once, at the first instant after ----

SPRING = [
    # zone, cron, start, expected occurrences on the day before, the day of, the day after
    (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-03-28T00:00:00+01:00",
        [
            "2026-03-28T02:30:00+01:00",
            "2026-03-29T03:00:00+02:00",
            "2026-03-30T02:30:00+02:00",
        ],
    ),
    (
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T00:00:00-05:00",
        [
            "2026-03-07T02:30:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-09T02:30:00-04:00",
        ],
    ),
    (
        "Australia/Sydney",
        "30 2 * * *",
        "2026-10-03T00:00:00+10:00",
        [
            "2026-10-03T02:30:00+10:00",
            "2026-10-04T03:00:00+11:00",
            "2026-10-05T02:30:00+11:00",
        ],
    ),
    (
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-03T00:00:00+10:30",
        [
            "2026-10-03T02:15:00+10:30",
            "2026-10-04T02:30:00+11:00",
            "2026-10-05T02:15:00+11:00",
        ],
    ),
]


@pytest.mark.parametrize(("zone", "cron", "start", "expected"), SPRING)
def test_a_skipped_local_time_fires_once_at_the_first_valid_instant_after_it(
    zone: str, cron: str, start: str, expected: list[str]
) -> None:
    assert occurrences(cron, zone, start, 3) == expected


# --- the autumn change: a repeated local time fires once, at its first instant ---------

AUTUMN = [
    (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-24T00:00:00+02:00",
        [
            "2026-10-24T02:30:00+02:00",
            "2026-10-25T02:30:00+02:00",  # not again at 02:30+01:00
            "2026-10-26T02:30:00+01:00",
        ],
    ),
    (
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T00:00:00-04:00",
        [
            "2026-10-31T01:30:00-04:00",
            "2026-11-01T01:30:00-04:00",  # not again at 01:30-05:00
            "2026-11-02T01:30:00-05:00",
        ],
    ),
    (
        "Australia/Sydney",
        "30 2 * * *",
        "2026-04-04T00:00:00+11:00",
        [
            "2026-04-04T02:30:00+11:00",
            "2026-04-05T02:30:00+11:00",  # not again at 02:30+10:00
            "2026-04-06T02:30:00+10:00",
        ],
    ),
]


@pytest.mark.parametrize(("zone", "cron", "start", "expected"), AUTUMN)
def test_a_repeated_local_time_fires_once_at_its_first_instant(
    zone: str, cron: str, start: str, expected: list[str]
) -> None:
    assert occurrences(cron, zone, start, 3) == expected


@pytest.mark.parametrize(
    ("zone", "cron", "start", "expected"),
    [
        # The 1 o'clock hour repeats in New York; each half-hour fires in its first pass.
        (
            "America/New_York",
            "*/30 1 * * *",
            "2026-11-01T00:00:00-04:00",
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-02T01:00:00-05:00",
            ],
        ),
        # An hourly job in Berlin's repeated hour: 02:30 once, then 03:30.
        (
            "Europe/Berlin",
            "30 * * * *",
            "2026-10-25T01:00:00+02:00",
            [
                "2026-10-25T01:30:00+02:00",
                "2026-10-25T02:30:00+02:00",
                "2026-10-25T03:30:00+01:00",
            ],
        ),
        # Every 15 minutes across Sydney's gap: the four skipped times and 03:00 itself
        # are one occurrence at 03:00, then the quarter hours go on.
        (
            "Australia/Sydney",
            "*/15 * * * *",
            "2026-10-04T01:40:00+10:00",
            [
                "2026-10-04T01:45:00+10:00",
                "2026-10-04T03:00:00+11:00",
                "2026-10-04T03:15:00+11:00",
            ],
        ),
    ],
)
def test_expressions_with_wildcards_follow_the_same_local_rule(
    zone: str, cron: str, start: str, expected: list[str]
) -> None:
    assert occurrences(cron, zone, start, 3) == expected


def test_plain_cronsim_would_fire_a_stepped_repeated_time_twice() -> None:
    """Why Charter walks wall-clock time itself: cronsim with an aware datetime treats
    `*/30 1 * * *` as an elapsed-time interval and fires local 01:30 twice."""
    zone = ZoneInfo("America/New_York")
    it = CronSim("*/30 1 * * *", datetime(2026, 11, 1, 0, 0, tzinfo=zone))
    times = [next(it).astimezone(UTC) for _ in range(4)]
    assert times[1].astimezone(zone).strftime("%H:%M") == "01:30"
    assert times[3].astimezone(zone).strftime("%H:%M") == "01:30"
    assert times[1] != times[3]
    ours = occurrences("*/30 1 * * *", "America/New_York", "2026-11-01T00:00:00-04:00", 3)
    assert ours[2] == "2026-11-02T01:00:00-05:00"


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("Europe/Berlin", "2026-03-29"),
        ("Europe/Berlin", "2026-10-25"),
        ("America/New_York", "2026-03-08"),
        ("America/New_York", "2026-11-01"),
        ("Australia/Sydney", "2026-04-05"),
        ("Australia/Sydney", "2026-10-04"),
    ],
)
@pytest.mark.parametrize("cron", ["0 1 * * *", "30 1 * * *", "0 2 * * *", "30 2 * * *"])
def test_fixed_times_agree_with_cronsim_across_the_change(zone: str, day: str, cron: str) -> None:
    """For fixed times cronsim already fires once per local occurrence; Charter agrees
    with it instant for instant over three days around each change."""
    tz = ZoneInfo(zone)
    start = datetime.fromisoformat(day).replace(tzinfo=tz) - timedelta(days=1)
    ours = occurrences(cron, zone, start.isoformat(), 3)
    it = CronSim(cron, start)
    theirs = [next(it).astimezone(UTC).astimezone(tz).isoformat() for _ in range(3)]
    assert ours == theirs


def test_the_next_occurrence_is_strictly_after() -> None:
    at = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    assert next_occurrence("0 9 * * *", "UTC", at) == at + timedelta(days=1)
    assert next_occurrence("0 9 * * *", "UTC", at - timedelta(microseconds=1)) == at


def test_after_the_first_pass_of_a_repeated_hour_the_occurrence_is_spent() -> None:
    """From inside the second pass of New York's repeated hour, 01:30 happened already
    (at its first instant), so the next occurrence is tomorrow's."""
    second_pass = datetime.fromisoformat("2026-11-01T01:10:00-05:00")
    found = next_occurrence("30 1 * * *", "America/New_York", second_pass)
    assert found.astimezone(ZoneInfo("America/New_York")).isoformat() == (
        "2026-11-02T01:30:00-05:00"
    )


def test_a_naive_after_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        next_occurrence("* * * * *", "UTC", datetime(2026, 1, 1))


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cron",
    ["* * * * *", "0 9 * * MON-FRI", "*/5 1-3 1,15 JAN-JUN *", "0 0 L * *", "0 12 * * 5L"],
)
def test_valid_crons_pass(cron: str) -> None:
    validate_cron(cron)


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("* * * *", "has 4 field"),
        ("0 * * * * *", "has 6 field"),
        ("", "has 0 field"),
        ("@daily", "has 1 field"),
        ("61 * * * *", "minute field is invalid"),
        ("0 24 * * *", "hour field is invalid"),
        ("0 0 32 * *", "day-of-month field is invalid"),
        ("0 0 * 13 *", "month field is invalid"),
        ("0 0 * * 8", "day-of-week field is invalid"),
        ("*/0 * * * *", "minute field is invalid"),
        ("0 0 30 2 *", "day-of-month field is invalid"),
        ("0 " * 101, "longer than 200"),
    ],
)
def test_invalid_crons_name_the_problem(cron: str, message: str) -> None:
    with pytest.raises(InvalidSchedule, match=message) as caught:
        validate_cron(cron)
    assert caught.value.http_status == 422
    assert caught.value.code == "invalid_schedule"


def test_a_cron_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidSchedule, match="string"):
        validate_cron(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["Europe/Berlin", "America/New_York", "Australia/Sydney", "UTC", "Asia/Kolkata"]
)
def test_iana_zones_are_accepted(name: str) -> None:
    assert validate_timezone(name).key == name


@pytest.mark.parametrize(
    "name", ["Mars/Olympus_Mons", "", "europe/berlin", "../../etc/passwd", " UTC", "x" * 65]
)
def test_unknown_zones_are_refused_with_422(name: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        validate_timezone(name)
    assert caught.value.http_status == 422


def test_next_occurrence_validates_its_inputs() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidSchedule, match="unknown time zone"):
        next_occurrence("* * * * *", "Nowhere/City", now)
    with pytest.raises(InvalidSchedule, match="field"):
        next_occurrence("* * *", "UTC", now)
