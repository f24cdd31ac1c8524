"""Admission on real PostgreSQL: cron occurrences and webhook deliveries become pending
runs, once per occurrence (docs/automations.md and docs/architecture.md; docs/machines.md, rule
3)."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from charter.automations import admission
from charter.automations.admission import CronAdmission, fire_due_crons, receive_event
from charter.automations.ledger import RunRecord
from charter.automations.webhooks import WebhookRejected, sign
from charter.core.clock import FakeClock
from charter.core.errors import Malformed
from charter.db.database import Database, Role, connect
from tests.integration.triggerkit import (
    Conn,
    automation,
    new_principal,
    new_secret,
    run_count,
    schedule,
    scheduled_instants,
    trigger_state,
    webhook,
)

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def mine(runs: list[RunRecord], trigger_id: uuid.UUID) -> list[RunRecord]:
    return [run for run in runs if run.trigger_id == trigger_id]


# --- cron ------------------------------------------------------------------------------


def test_one_run_per_missed_occurrence_in_order(conn: Conn) -> None:
    principal = new_principal()
    automation_id = automation(conn, principal)
    trigger = schedule(conn, automation_id, cron="0 * * * *", next_run_at=T0)

    runs = mine(fire_due_crons(conn, T0 + 3 * HOUR + timedelta(minutes=30)), trigger)

    assert [run.scheduled_for for run in runs] == [T0 + i * HOUR for i in range(4)]
    first = runs[0]
    assert first.status == "pending"
    assert first.trigger_kind == "schedule"
    assert first.principal == principal
    assert first.target == "machine-1"
    assert first.dedupe_key == f"cron:{trigger}:2026-06-01T09:00:00.000Z"
    assert first.input == {
        "kind": "schedule",
        "scheduledFor": "2026-06-01T09:00:00.000Z",
        "triggerId": str(trigger),
    }
    assert first.plan["steps"] == [
        {"id": "ping", "actionId": "http.request", "input": {"url": "https://e.test"}}
    ]
    assert trigger_state(conn, trigger) == (T0 + 4 * HOUR, None)
    # The same tick again admits nothing: the trigger moved past what it admitted.
    assert mine(fire_due_crons(conn, T0 + 3 * HOUR + timedelta(minutes=30)), trigger) == []
    assert run_count(conn, principal) == 4


def test_nothing_is_due_before_next_run_at(conn: Conn) -> None:
    trigger = schedule(conn, automation(conn, new_principal()), cron="0 * * * *", next_run_at=T0)
    assert mine(fire_due_crons(conn, T0 - timedelta(seconds=1)), trigger) == []
    assert len(mine(fire_due_crons(conn, T0), trigger)) == 1


@pytest.mark.parametrize(
    ("zone", "first", "now", "expected"),
    [
        # Berlin's spring night: 02:30 does not exist on the 29th; it fires at 03:00.
        (
            "Europe/Berlin",
            "2026-03-28T02:30:00+01:00",
            "2026-03-30T12:00:00+02:00",
            ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        ),
        # Berlin's autumn night: 02:30 happens twice on the 25th; it fires once.
        (
            "Europe/Berlin",
            "2026-10-24T02:30:00+02:00",
            "2026-10-26T12:00:00+01:00",
            ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        # Sydney's autumn night (April) and spring night (October).
        (
            "Australia/Sydney",
            "2026-04-04T02:30:00+11:00",
            "2026-04-06T12:00:00+10:00",
            ["2026-04-04T02:30:00+11:00", "2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00"],
        ),
        (
            "Australia/Sydney",
            "2026-10-03T02:30:00+10:00",
            "2026-10-05T12:00:00+11:00",
            ["2026-10-03T02:30:00+10:00", "2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00"],
        ),
    ],
)
def test_admission_fires_once_per_local_occurrence_across_dst(
    conn: Conn, zone: str, first: str, now: str, expected: list[str]
) -> None:
    tz = ZoneInfo(zone)
    trigger = schedule(
        conn,
        automation(conn, new_principal()),
        cron="30 2 * * *",
        timezone=zone,
        next_run_at=datetime.fromisoformat(first),
    )
    fire_due_crons(conn, datetime.fromisoformat(now))
    instants = scheduled_instants(conn, trigger)
    assert [moment.astimezone(tz).isoformat() for moment in instants] == expected


def test_bounded_occurrences_stop_and_null_makes_them_unbounded(conn: Conn) -> None:
    principal = new_principal()
    trigger = schedule(
        conn, automation(conn, principal), cron="0 * * * *", next_run_at=T0, remaining=2
    )
    assert len(fire_due_crons(conn, T0 + 5 * HOUR)) == 2
    assert trigger_state(conn, trigger) == (T0 + 2 * HOUR, 0)
    assert mine(fire_due_crons(conn, T0 + 10 * HOUR), trigger) == []
    assert run_count(conn, principal) == 2

    # `maxOccurrences: null` (the control API's update) leaves the count NULL: unbounded.
    conn.execute(
        "UPDATE charter.schedule_triggers SET remaining_occurrences = NULL WHERE id = %s",
        (trigger,),
    )
    runs = mine(fire_due_crons(conn, T0 + 10 * HOUR), trigger)
    assert [run.scheduled_for for run in runs] == [T0 + i * HOUR for i in range(2, 11)]
    assert trigger_state(conn, trigger) == (T0 + 11 * HOUR, None)


def test_a_budget_counts_down_across_ticks(conn: Conn) -> None:
    trigger = schedule(
        conn, automation(conn, new_principal()), cron="0 * * * *", next_run_at=T0, remaining=3
    )
    assert len(mine(fire_due_crons(conn, T0), trigger)) == 1
    assert trigger_state(conn, trigger) == (T0 + HOUR, 2)
    assert len(mine(fire_due_crons(conn, T0 + 9 * HOUR), trigger)) == 2
    assert trigger_state(conn, trigger)[1] == 0


def test_catch_up_is_capped_per_tick_and_finishes_later(conn: Conn) -> None:
    principal = new_principal()
    trigger = schedule(conn, automation(conn, principal), cron="0 * * * *", next_run_at=T0)
    now = T0 + 49 * HOUR  # 50 occurrences due: T0 .. T0 + 49 h
    ticks = [fire_due_crons(conn, now, maximum_runs=10) for _ in range(6)]

    assert [len(tick) for tick in ticks] == [10, 10, 10, 10, 10, 0]
    admitted = [run.scheduled_for for tick in ticks for run in tick]
    assert admitted == [T0 + i * HOUR for i in range(50)]  # in order, none twice
    assert run_count(conn, principal) == 50
    assert trigger_state(conn, trigger) == (T0 + 50 * HOUR, None)


def test_the_cap_is_shared_in_time_order_across_triggers(conn: Conn) -> None:
    automation_id = automation(conn, new_principal())
    early = schedule(conn, automation_id, cron="0 * * * *", next_run_at=T0)
    late = schedule(conn, automation_id, cron="30 * * * *", next_run_at=T0 + HOUR / 2)
    runs = fire_due_crons(conn, T0 + 10 * HOUR, maximum_runs=4)
    assert [(run.trigger_id, run.scheduled_for) for run in runs] == [
        (early, T0),
        (late, T0 + HOUR / 2),
        (early, T0 + HOUR),
        (late, T0 + 1.5 * HOUR),
    ]


@pytest.mark.parametrize("maximum_runs", [0, -1, 1.5, True, "10", None])
def test_maximum_runs_must_be_a_positive_integer(conn: Conn, maximum_runs: object) -> None:
    with pytest.raises(ValueError, match="maximum_runs must be a positive integer"):
        fire_due_crons(conn, T0, maximum_runs=maximum_runs)  # type: ignore[arg-type]


def test_paused_automations_disabled_triggers_and_missing_plans_admit_nothing(
    conn: Conn,
) -> None:
    principal = new_principal()
    paused = schedule(
        conn, automation(conn, principal, enabled=False), cron="0 * * * *", next_run_at=T0
    )
    off = schedule(
        conn, automation(conn, principal), cron="0 * * * *", next_run_at=T0, enabled=False
    )
    planless = schedule(
        conn,
        automation(conn, principal, plan=False),
        cron="0 * * * *",
        next_run_at=T0,
        remaining=2,
    )
    fire_due_crons(conn, T0 + 3 * HOUR)
    assert run_count(conn, principal) == 0
    # Paused and disabled triggers are left where they were.
    assert trigger_state(conn, paused) == (T0, None)
    assert trigger_state(conn, off) == (T0, None)
    # With no plan the occurrences pass without a run and without spending the budget.
    assert trigger_state(conn, planless) == (T0 + 4 * HOUR, 2)


def test_a_tick_repeated_after_a_crash_admits_nothing_twice(conn: Conn) -> None:
    """If a trigger's advance were lost after its runs were written (here: moved back
    by hand), the unique dedupe key keeps every occurrence to one run."""
    principal = new_principal()
    trigger = schedule(conn, automation(conn, principal), cron="0 * * * *", next_run_at=T0)
    assert len(fire_due_crons(conn, T0 + 2 * HOUR)) == 3
    conn.execute(
        "UPDATE charter.schedule_triggers SET next_run_at = %s WHERE id = %s", (T0, trigger)
    )
    again = mine(fire_due_crons(conn, T0 + 3 * HOUR), trigger)
    assert [run.scheduled_for for run in again] == [T0 + 3 * HOUR]
    assert run_count(conn, principal) == 4
    assert scheduled_instants(conn, trigger) == [T0 + i * HOUR for i in range(4)]


def test_a_schedule_that_no_longer_parses_does_not_block_the_others(
    conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    automation_id = automation(conn, new_principal())
    broken = schedule(
        conn, automation_id, cron="0 * * * *", timezone="Mars/Olympus", next_run_at=T0
    )
    healthy = schedule(conn, automation_id, cron="0 * * * *", next_run_at=T0)
    with caplog.at_level(logging.ERROR, logger="charter.automations.admission"):
        runs = fire_due_crons(conn, T0)
    assert [run.trigger_id for run in runs] == [healthy]
    assert trigger_state(conn, broken) == (T0, None)
    assert any(str(broken) in record.getMessage() for record in caplog.records)


def test_concurrent_ticks_never_admit_an_occurrence_twice(database_url: str) -> None:
    principal = new_principal()
    with connect(database_url) as setup:
        triggers = [
            schedule(setup, automation(setup, principal), cron="*/10 * * * *", next_run_at=T0)
            for _ in range(20)
        ]
        setup.commit()
    now = T0 + 50 * timedelta(minutes=1)  # 6 occurrences due per trigger
    barrier = threading.Barrier(4)
    results: list[list[RunRecord]] = []
    failures: list[BaseException] = []

    def tick() -> None:
        try:
            with connect(database_url, Role.ENGINE) as own:
                barrier.wait(timeout=30)
                results.append(fire_due_crons(own, now))
                own.commit()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=tick) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    admitted = [run for tick_runs in results for run in tick_runs if run.principal == principal]
    keys = [run.dedupe_key for run in admitted]
    assert len(keys) == len(set(keys)) == 20 * 6
    with connect(database_url) as check:
        assert run_count(check, principal) == 20 * 6
        for trigger in triggers:
            assert trigger_state(check, trigger) == (T0 + timedelta(minutes=60), None)


def test_an_unclaimed_run_survives_a_new_database_object(database_url: str) -> None:
    """Rule 3: the ledger is the offline queue. Runs admitted and committed through one
    Database are there, pending, for a fresh one (no process memory involved)."""
    principal = new_principal()
    with connect(database_url) as setup:
        schedule(setup, automation(setup, principal), cron="0 * * * *", next_run_at=T0)
        setup.commit()
    first = Database(database_url, max_size=2)
    try:
        ticker = CronAdmission(first, clock=FakeClock(T0 + 2 * HOUR))
        admitted = {run.id for run in ticker.run_once() if run.principal == principal}
    finally:
        first.close()
    assert len(admitted) == 3

    with Database(database_url, max_size=2) as second, second.connection(Role.READER) as conn:
        rows = conn.execute(
            "SELECT id, status FROM charter.runs WHERE principal = %s", (principal,)
        ).fetchall()
    assert {row[0] for row in rows} == admitted
    assert {row[1] for row in rows} == {"pending"}


def test_the_tick_loop_logs_failures_and_goes_on(
    database: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    ticker = CronAdmission(database, interval=5, clock=clock)
    seen: list[datetime] = []

    def flaky(conn: Conn, now: datetime, maximum_runs: int) -> list[RunRecord]:
        seen.append(now)
        if len(seen) == 1:
            raise RuntimeError("the database went away")
        if len(seen) == 3:
            ticker.stop()
        return []

    monkeypatch.setattr(admission, "fire_due_crons", flaky)

    async def drive() -> None:
        loop = asyncio.create_task(ticker.run())
        while not loop.done():
            await asyncio.sleep(0.01)  # pacing only: the fake clock decides the ticks
            clock.advance(5)
        await loop

    with caplog.at_level(logging.ERROR, logger="charter.automations.admission"):
        asyncio.run(asyncio.wait_for(drive(), timeout=30))
    assert len(seen) == 3
    assert seen[0] < seen[1] < seen[2]
    assert any("tick failed" in record.getMessage() for record in caplog.records)


def test_the_tick_stops_promptly_while_sleeping(database: Database) -> None:
    ticker = CronAdmission(database, interval=3600, clock=FakeClock(T0))

    async def start_and_stop() -> None:
        loop = asyncio.create_task(ticker.run())
        await asyncio.sleep(0.2)
        ticker.stop()
        await loop

    asyncio.run(asyncio.wait_for(start_and_stop(), timeout=30))


def test_the_tick_interval_must_be_positive(database: Database) -> None:
    with pytest.raises(ValueError, match="positive"):
        CronAdmission(database, interval=0)
    with pytest.raises(ValueError, match="maximum_runs"):
        CronAdmission(database, maximum_runs=0)


# --- webhooks --------------------------------------------------------------------------

NOW = datetime(2026, 6, 18, 10, 0, tzinfo=UTC)


def signed(secret: str, body: bytes, message_id: str = "msg_1") -> dict[str, str]:
    stamp = int(NOW.timestamp())
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, message_id, stamp, body),
    }


def test_a_delivery_admits_a_run_for_each_matching_trigger(conn: Conn) -> None:
    principal, secret = new_principal(), new_secret()
    any_event = webhook(conn, automation(conn, principal), source="shop", secret=secret)
    paid = webhook(
        conn, automation(conn, principal), source="shop", secret=secret, event="order.paid"
    )
    webhook(conn, automation(conn, principal), source="shop", secret=secret, event="refund")
    webhook(conn, automation(conn, principal), source="crm", secret=secret)
    webhook(conn, automation(conn, principal, target="machine-2"), source="shop", secret=secret)
    webhook(conn, automation(conn, new_principal()), source="shop", secret=secret)
    body = b'{"type": "order.paid", "source": "shop", "data": {"id": 7}}'

    runs = receive_event(
        conn,
        principal=principal,
        target="machine-1",
        headers=signed(secret, body),
        raw_body=body,
        now=NOW,
    )

    assert {run.trigger_id for run in runs} == {any_event, paid}
    run = next(run for run in runs if run.trigger_id == paid)
    assert run.trigger_kind == "webhook"
    assert run.dedupe_key == f"webhook:{paid}:msg_1"
    assert run.input == {
        "kind": "webhook",
        "triggerId": str(paid),
        "source": "shop",
        "event": "order.paid",
        "webhookId": "msg_1",
        "payload": {"type": "order.paid", "source": "shop", "data": {"id": 7}},
    }
    assert run_count(conn, principal) == 2


def test_a_replayed_webhook_id_admits_nothing_new(conn: Conn) -> None:
    principal, secret = new_principal(), new_secret()
    webhook(conn, automation(conn, principal), source="shop", secret=secret)
    body = b'{"source": "shop"}'

    def deliver(message_id: str) -> list[RunRecord]:
        return receive_event(
            conn,
            principal=principal,
            target="machine-1",
            headers=signed(secret, body, message_id),
            raw_body=body,
            now=NOW,
        )

    assert len(deliver("msg_1")) == 1
    assert deliver("msg_1") == []
    assert len(deliver("msg_2")) == 1
    assert run_count(conn, principal) == 2


@pytest.mark.parametrize("case", ["wrong secret", "tampered body", "no trigger for source"])
def test_a_rejected_delivery_creates_nothing(conn: Conn, case: str) -> None:
    principal, secret = new_principal(), new_secret()
    webhook(conn, automation(conn, principal), source="shop", secret=secret)
    body = b'{"source": "shop", "amount": 1}'
    headers = signed(new_secret() if case == "wrong secret" else secret, body)
    if case == "tampered body":
        body = b'{"source": "shop", "amount": 2}'
    if case == "no trigger for source":
        body = b'{"source": "elsewhere"}'
        headers = signed(secret, body)
    with pytest.raises(WebhookRejected) as caught:
        receive_event(
            conn, principal=principal, target="machine-1", headers=headers, raw_body=body, now=NOW
        )
    assert caught.value.http_status == 401
    assert run_count(conn, principal) == 0


def test_a_paused_automation_authenticates_but_admits_nothing(conn: Conn) -> None:
    principal, secret = new_principal(), new_secret()
    webhook(conn, automation(conn, principal, enabled=False), source="shop", secret=secret)
    body = b'{"source": "shop"}'
    runs = receive_event(
        conn,
        principal=principal,
        target="machine-1",
        headers=signed(secret, body),
        raw_body=body,
        now=NOW,
    )
    assert runs == []
    assert run_count(conn, principal) == 0


def test_source_and_event_headers_win_over_the_payload(conn: Conn) -> None:
    principal, secret = new_principal(), new_secret()
    wanted = webhook(
        conn, automation(conn, principal), source="billing", secret=secret, event="paid"
    )
    body = b'{"source": "shop", "type": "created"}'
    headers = signed(secret, body) | {"X-Charter-Source": "billing", "X-Charter-Event": "paid"}
    runs = receive_event(
        conn, principal=principal, target="machine-1", headers=headers, raw_body=body, now=NOW
    )
    assert [run.trigger_id for run in runs] == [wanted]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"data": 1}', "source is required"),
        (b'{"source": 5}', '"source" must be a string'),
        (b'{"source": "shop", "type": ["x"]}', '"type" must be a string'),
        (b'{"source": "shop", "source": "crm"}', "duplicate"),
        (b"{not json", "invalid JSON"),
    ],
)
def test_unusable_payloads_are_malformed(conn: Conn, body: bytes, message: str) -> None:
    secret = new_secret()
    with pytest.raises(Malformed, match=message):
        receive_event(
            conn,
            principal=new_principal(),
            target="machine-1",
            headers=signed(secret, body),
            raw_body=body,
            now=NOW,
        )
