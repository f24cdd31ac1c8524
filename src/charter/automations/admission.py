"""Trigger admission: due cron occurrences and signed webhook deliveries become runs.

Admission only inserts pending runs into the durable ledger (docs/machines.md, rule
3); it never delivers them: machines claim them. One run per trigger occurrence
is decided by the unique `dedupe_key` (`cron:<trigger>:<instant>`,
`webhook:<trigger>:<webhook-id>`), never by a read-then-write, so a tick repeated after
a crash, two admitting processes, or a replayed delivery admit nothing twice.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from charter.automations.cron import next_occurrence
from charter.automations.ledger import Conn, RunRecord, admit_run
from charter.automations.metrics import CRON_ADMISSIONS, CRON_CATCHUP
from charter.automations.wakeups import run_hints
from charter.automations.webhooks import WebhookRejected, parse_delivery, verifies
from charter.core import ijson
from charter.core.clock import Clock, SystemClock, wait_any
from charter.core.errors import Malformed
from charter.core.errors.automations import InvalidSchedule
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.db.errors import translated
from charter.db.hints import send_hints
from charter.db.queries import query
from charter.tracing import current_traceparent, span

log = logging.getLogger(__name__)

DEFAULT_MAXIMUM_RUNS = 1000
MAX_NAME_LENGTH = 200  # source and event, as the webhook_triggers columns allow
SOURCE_HEADER = "x-charter-source"
EVENT_HEADER = "x-charter-event"


# --- Cron ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Schedule:
    """A locked, due schedule trigger as admission walks it."""

    id: uuid.UUID
    automation_id: uuid.UUID
    cron: str
    timezone: str
    next_run_at: datetime
    remaining_occurrences: int | None

    @property
    def exhausted(self) -> bool:
        return self.remaining_occurrences is not None and self.remaining_occurrences <= 0


def check_maximum_runs(maximum_runs: object) -> int:
    """`maximum_runs` if it is a positive integer; ValueError otherwise."""
    if isinstance(maximum_runs, bool) or not isinstance(maximum_runs, int) or maximum_runs < 1:
        raise ValueError(f"maximum_runs must be a positive integer, got {maximum_runs!r}")
    return maximum_runs


def fire_due_crons(
    conn: Conn, now: datetime, maximum_runs: int = DEFAULT_MAXIMUM_RUNS
) -> list[RunRecord]:
    """Admit one run per due local occurrence of every enabled schedule trigger of an
    enabled automation, oldest first, at most `maximum_runs` occurrences this call.

    The rest waits for the next call (capped catch-up): a trigger far behind neither
    floods the ledger in one transaction nor holds its locks for long. One transaction:
    the runs and the advanced triggers commit together.
    """
    check_maximum_runs(maximum_runs)
    if now.tzinfo is None:
        raise ValueError("fire_due_crons needs an aware `now`")
    admitted: list[RunRecord] = []
    catchup = 0
    with translated(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            query("lock_due_schedule_triggers"), {"now": now, "limit": maximum_runs}
        ).fetchall()
        schedules = {row["id"]: _Schedule(**row) for row in rows}
        # Occurrences of all locked triggers in time order, so one trigger far behind
        # does not starve the others of this tick's budget.
        due = [(s.next_run_at, s.id.bytes, s.id) for s in schedules.values()]
        heapq.heapify(due)
        moved: set[uuid.UUID] = set()
        budget = maximum_runs
        while due and budget > 0:
            instant, _, trigger_id = heapq.heappop(due)
            schedule = schedules[trigger_id]
            try:
                following = next_occurrence(schedule.cron, schedule.timezone, instant)
            except InvalidSchedule as exc:
                # A stored schedule that no longer parses (say, a zone dropped from the
                # tz database) must not stop every other trigger's admission.
                log.error(
                    "schedule trigger %s cannot fire: %s",
                    trigger_id,
                    exc.message,
                    extra={"action": "cron.invalid", "trigger_id": str(trigger_id)},
                )
                continue
            budget -= 1
            occurrence = {
                "charter.trigger_id": str(trigger_id),
                "charter.scheduled_for": format_rfc3339(instant),
            }
            # Each occurrence's run starts a trace of its own (an empty carrier: a root).
            with span("charter.cron.admit", occurrence, carrier={}):
                run = _admit_occurrence(conn, schedule, instant, now, current_traceparent())
            remaining = schedule.remaining_occurrences
            if run is not None:
                admitted.append(run)
                catchup += trigger_id in moved  # an earlier occurrence went this tick
                remaining = None if remaining is None else remaining - 1
            # With no run (no plan, paused meanwhile, or admitted before) the occurrence
            # is passed over all the same: only admitted runs spend the budget of
            # `remaining_occurrences`.
            schedule = replace(schedule, next_run_at=following, remaining_occurrences=remaining)
            schedules[trigger_id] = schedule
            moved.add(trigger_id)
            if following <= now and not schedule.exhausted:
                heapq.heappush(due, (following, trigger_id.bytes, trigger_id))
        for trigger_id in moved:
            schedule = schedules[trigger_id]
            cur.execute(
                query("advance_schedule_trigger"),
                {
                    "id": trigger_id,
                    "next_run_at": schedule.next_run_at,
                    "remaining_occurrences": schedule.remaining_occurrences,
                },
            )
    CRON_ADMISSIONS.inc(len(admitted))  # committed: counted once
    CRON_CATCHUP.inc(catchup)
    send_hints(conn, run_hints(admitted))  # after the COMMIT: machines waiting wake up
    for run in admitted:
        log.info(
            "run %s pending (schedule %s, %s)",
            run.id,
            run.trigger_id,
            _iso(run.scheduled_for),
            extra={"action": "run.pending", "run_id": str(run.id), "target": run.target},
        )
    return admitted


def cron_dedupe_key(trigger_id: uuid.UUID, instant: datetime) -> str:
    return f"cron:{trigger_id}:{format_rfc3339(instant)}"


def _admit_occurrence(
    conn: Conn, schedule: _Schedule, instant: datetime, now: datetime, traceparent: str | None
) -> RunRecord | None:
    scheduled_for = format_rfc3339(instant)
    return admit_run(
        conn,
        automation_id=schedule.automation_id,
        trigger_kind="schedule",
        trigger_id=schedule.id,
        input={"kind": "schedule", "scheduledFor": scheduled_for, "triggerId": str(schedule.id)},
        dedupe_key=cron_dedupe_key(schedule.id, instant),
        scheduled_for=instant,
        traceparent=traceparent,
        now=now,
    )


def _iso(moment: datetime | None) -> str:
    return format_rfc3339(moment) if moment is not None else "-"


# --- Webhooks --------------------------------------------------------------------------


@dataclass(frozen=True)
class _WebhookTrigger:
    id: uuid.UUID
    automation_id: uuid.UUID
    event: str | None
    secret: str


def receive_event(
    conn: Conn,
    *,
    principal: str,
    target: str,
    headers: Mapping[str, str],
    raw_body: bytes,
    now: datetime,
) -> list[RunRecord]:
    """Admit one run per webhook trigger of `principal`'s automations on `target` that
    matches the delivery's source and event and whose secret verifies its signature.

    The source is the `X-Charter-Source` header, else the payload's `"source"`; the
    event is the `X-Charter-Event` header, else the payload's `"type"` (the Standard
    Webhooks payload convention), else none (matching only triggers for any event).
    The signature is checked against every enabled trigger of the source, whatever its
    event: a signed delivery of an event no trigger wants is accepted with no runs,
    not refused (a sender would retry a refusal for days). A delivery no secret
    verifies is refused with WebhookRejected (401) and creates nothing.
    """
    delivery = parse_delivery(headers, now=now)
    payload = ijson.loads(raw_body)
    lowered = {name.lower(): value for name, value in headers.items()}
    source = _name(lowered.get(SOURCE_HEADER), payload, "source", "source")
    if source is None:
        raise Malformed(
            'the webhook source is required: an X-Charter-Source header or a "source" field'
        )
    event = _name(lowered.get(EVENT_HEADER), payload, "type", "event")
    runs: list[RunRecord] = []
    # The delivery's request span (its server span, when tracing is on) admits the runs:
    # their steps continue its trace.
    traceparent = current_traceparent()
    with translated(), conn.transaction():
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                query("webhook_trigger_candidates"),
                {"principal": principal, "target": target, "source": source},
            ).fetchall()
        candidates = [_WebhookTrigger(**row) for row in rows]
        # Every candidate is checked, so the time taken does not tell which one matched.
        verified = [t for t in candidates if verifies(delivery, raw_body, t.secret)]
        if not verified:
            # One message for "no such trigger" and "wrong signature": an unsigned caller
            # learns nothing about which sources exist.
            raise WebhookRejected()
        for trigger in verified:
            if trigger.event is not None and trigger.event != event:
                continue
            run = admit_run(
                conn,
                automation_id=trigger.automation_id,
                trigger_kind="webhook",
                trigger_id=trigger.id,
                input=_event_input(trigger, source, event, delivery.message_id, payload),
                dedupe_key=f"webhook:{trigger.id}:{delivery.message_id}",
                traceparent=traceparent,
                now=now,
            )
            if run is not None:
                runs.append(run)
    send_hints(conn, run_hints(runs))  # after the COMMIT: machines waiting wake up
    for run in runs:
        log.info(
            "run %s pending (webhook %s, %s)",
            run.id,
            run.trigger_id,
            delivery.message_id,
            extra={"action": "run.pending", "run_id": str(run.id), "target": run.target},
        )
    return runs


def _name(header: str | None, payload: JsonValue, field: str, what: str) -> str | None:
    """A source or event name from its header, else from the payload's `field`."""
    value: Any = header.strip() if header is not None and header.strip() else None
    if value is None and isinstance(payload, dict):
        value = payload.get(field)
        if value is not None and not isinstance(value, str):
            raise Malformed(f'the payload\'s "{field}" must be a string', field=field)
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_NAME_LENGTH:
        raise Malformed(f"the webhook {what} must be 1 to {MAX_NAME_LENGTH} characters")
    return str(value)


def _event_input(
    trigger: _WebhookTrigger, source: str, event: str | None, message_id: str, payload: JsonValue
) -> JsonObject:
    return {
        "kind": "webhook",
        "triggerId": str(trigger.id),
        "source": source,
        "event": event,
        "webhookId": message_id,
        "payload": payload,
    }


# --- The tick of `charter up` ----------------------------------------------------------


class CronAdmission:
    """Calls `fire_due_crons` every `interval` seconds until stopped.

    A failing tick is logged and retried on the next one: admission is idempotent, and a
    database outage must not stop the API it runs beside.
    """

    def __init__(
        self,
        database: Database,
        *,
        interval: float = 5.0,
        maximum_runs: int = DEFAULT_MAXIMUM_RUNS,
        clock: Clock | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError("the cron tick interval must be positive")
        self.database = database
        self.interval = interval
        self.maximum_runs = check_maximum_runs(maximum_runs)
        self.clock = clock or SystemClock()
        self._stopping = asyncio.Event()

    def run_once(self) -> list[RunRecord]:
        """One tick, as the engine role, in the calling thread."""
        with self.database.connection(Role.ENGINE) as conn:
            return fire_due_crons(conn, self.clock.now(), self.maximum_runs)

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                runs = await asyncio.to_thread(self.run_once)
            except Exception:
                log.exception("cron admission tick failed", extra={"action": "cron.failed"})
                runs = []
            if len(runs) >= self.maximum_runs:
                continue  # capped: more is due right now
            await self._sleep()

    def stop(self) -> None:
        self._stopping.set()

    async def _sleep(self) -> None:
        await wait_any(self.clock, self.interval, self._stopping)
