"""The control side of the automations service (docs/automations.md): a principal's
automations, their schedule and webhook triggers, their one plan, and manual runs.

Every read and change is scoped to one principal: another principal's ids are simply
not found (never "forbidden"), so nothing leaks whether they exist. An administrator
(`everyone`, a `*` token) sees and changes every principal's; what it creates is still
its own. Webhook secrets are write-only: they go in (or are generated and shown once)
and never come back out; no query here selects them. Values are checked by
`checks` before they are stored.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter.automations import cron
from charter.automations.checks import (
    DEFAULT_PAGE,
    AutomationChanges,
    PlanDocument,
    ScheduleChanges,
    WebhookChanges,
    check_cron,
    check_event,
    check_limit,
    check_max_occurrences,
    check_name,
    check_secret,
    check_source,
    check_target,
    check_timezone,
    parse_id,
)
from charter.automations.ledger import RunRecord, admit_run, decode_cursor, encode_cursor
from charter.automations.records import (
    AutomationRecord,
    PlanRecord,
    ScheduleRecord,
    WebhookRecord,
)
from charter.core.clock import Clock
from charter.core.errors import NotFound
from charter.core.errors.automations import AutomationPaused, InvalidSchedule, NoPlan
from charter.core.jsontypes import JsonValue
from charter.core.unset import UNSET, Unset
from charter.core.webhook_secret import new_secret
from charter.db.errors import translated
from charter.db.queries import query
from charter.tracing import current_traceparent

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")


class Control:
    """One principal's view of its automations over one connection (the caller owns
    the transaction). Others' automations, triggers and plans are NotFound, unless
    `everyone` (an administrator's view: every principal's, created ones its own)."""

    def __init__(self, conn: Conn, principal: str, clock: Clock, *, everyone: bool = False) -> None:
        self.conn = conn
        self.principal = principal
        self.clock = clock
        self.everyone = everyone

    # --- automations ------------------------------------------------------------------

    def create_automation(self, name: str, target: str, enabled: bool = True) -> AutomationRecord:
        row = self._one(
            "insert_automation",
            name=check_name(name),
            target=check_target(target),
            enabled=enabled,
        )
        assert row is not None
        return AutomationRecord.from_dict(row)

    def list_automations(
        self, *, cursor: str | None = None, limit: int = DEFAULT_PAGE
    ) -> tuple[list[AutomationRecord], str | None]:
        """A page of automations, oldest first, and the next page's cursor (None at the end)."""
        limit = check_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        rows = self._all(
            "list_automations", after_created=after_created, after_id=after_id, limit=limit + 1
        )
        found = [AutomationRecord.from_dict(r) for r in rows[:limit]]
        following = encode_cursor(found[-1].created_at, found[-1].id) if len(rows) > limit else None
        return found, following

    def automation(self, automation_id: uuid.UUID | str) -> AutomationRecord:
        return AutomationRecord.from_dict(
            self._found("get_automation", "automation", automation_id, id=automation_id)
        )

    def update_automation(
        self, automation_id: uuid.UUID | str, changes: AutomationChanges
    ) -> AutomationRecord:
        current = AutomationRecord.from_dict(
            self._found("lock_automation", "automation", automation_id, id=automation_id)
        )
        row = self._one(
            "update_automation",
            id=current.id,
            name=_pick(changes.name, current.name),
            target=_pick(changes.target, current.target),
            enabled=_pick(changes.enabled, current.enabled),
        )
        assert row is not None
        if changes.enabled is True and not current.enabled:
            self._restart_schedules(current.id)
        return AutomationRecord.from_dict(row)

    def _restart_schedules(self, automation_id: uuid.UUID) -> None:
        """A resumed automation counts its schedules from now: what fell due while it was
        paused is not admitted all at once on resume."""
        for schedule in self.schedules(automation_id):
            self._one(
                "update_schedule",
                id=schedule.id,
                cron=schedule.cron,
                timezone=schedule.timezone,
                enabled=schedule.enabled,
                next_run_at=self._next(schedule.cron, schedule.timezone),
                remaining_occurrences=schedule.remaining_occurrences,
            )

    def set_enabled(self, automation_id: uuid.UUID | str, enabled: bool) -> AutomationRecord:
        """Pause (False) or resume (True): a paused automation admits no runs, and on
        resume its schedules count from now (missed occurrences are skipped)."""
        return self.update_automation(automation_id, AutomationChanges(enabled=enabled))

    def delete_automation(self, automation_id: uuid.UUID | str) -> None:
        """Delete it with its triggers and plan; its runs stay as permanent history."""
        self._found("delete_automation", "automation", automation_id, id=automation_id)

    # --- schedule triggers ------------------------------------------------------------

    def add_schedule(
        self,
        automation_id: uuid.UUID | str,
        cron_expr: str,
        timezone: str,
        max_occurrences: int | None = None,
    ) -> ScheduleRecord:
        """A schedule from now: its next occurrence after now, `max_occurrences` of them
        (None: unbounded)."""
        cron_expr, timezone = check_cron(cron_expr), check_timezone(timezone)
        row = self._found(
            "insert_schedule",
            "automation",
            automation_id,
            automation_id=automation_id,
            cron=cron_expr,
            timezone=timezone,
            next_run_at=self._next(cron_expr, timezone),
            remaining_occurrences=check_max_occurrences(max_occurrences),
        )
        return ScheduleRecord.from_dict(row)

    def schedules(self, automation_id: uuid.UUID | str) -> list[ScheduleRecord]:
        self.automation(automation_id)
        rows = self._all("list_schedules", automation_id=parse_id(automation_id, "automation"))
        return [ScheduleRecord.from_dict(r) for r in rows]

    def update_schedule(
        self, automation_id: uuid.UUID | str, trigger_id: uuid.UUID | str, changes: ScheduleChanges
    ) -> ScheduleRecord:
        """Change a schedule. A new cron or timezone, or enabling a disabled schedule,
        counts from now; `max_occurrences` None makes it unbounded, UNSET keeps it."""
        current = ScheduleRecord.from_dict(
            self._found(
                "lock_schedule",
                "schedule trigger",
                trigger_id,
                id=trigger_id,
                automation_id=parse_id(automation_id, "automation"),
            )
        )
        cron_expr = _pick(changes.cron, current.cron)
        timezone = _pick(changes.timezone, current.timezone)
        enabled = _pick(changes.enabled, current.enabled)
        restarted = (
            cron_expr != current.cron
            or timezone != current.timezone
            or (enabled and not current.enabled)
        )
        row = self._one(
            "update_schedule",
            id=current.id,
            cron=cron_expr,
            timezone=timezone,
            enabled=enabled,
            next_run_at=self._next(cron_expr, timezone) if restarted else current.next_run_at,
            remaining_occurrences=_pick(changes.max_occurrences, current.remaining_occurrences),
        )
        assert row is not None
        return ScheduleRecord.from_dict(row)

    def delete_schedule(self, automation_id: uuid.UUID | str, trigger_id: uuid.UUID | str) -> None:
        self._found(
            "delete_schedule",
            "schedule trigger",
            trigger_id,
            id=trigger_id,
            automation_id=parse_id(automation_id, "automation"),
        )

    # --- webhook triggers -------------------------------------------------------------

    def add_webhook(
        self,
        automation_id: uuid.UUID | str,
        source: str,
        event: str | None = None,
        secret: str | None = None,
    ) -> tuple[WebhookRecord, str]:
        """The new trigger and its secret (the one given, or a generated one): the only
        time the secret is handed back."""
        chosen = check_secret(secret) if secret is not None else new_secret()
        row = self._found(
            "insert_webhook",
            "automation",
            automation_id,
            automation_id=automation_id,
            source=check_source(source),
            event=check_event(event),
            secret=chosen,
        )
        return WebhookRecord.from_dict(row), chosen

    def webhooks(self, automation_id: uuid.UUID | str) -> list[WebhookRecord]:
        self.automation(automation_id)
        rows = self._all("list_webhooks", automation_id=parse_id(automation_id, "automation"))
        return [WebhookRecord.from_dict(r) for r in rows]

    def update_webhook(
        self, automation_id: uuid.UUID | str, trigger_id: uuid.UUID | str, changes: WebhookChanges
    ) -> WebhookRecord:
        """Change a webhook trigger; a secret given replaces the stored one (rotation)."""
        current = WebhookRecord.from_dict(
            self._found(
                "lock_webhook",
                "webhook trigger",
                trigger_id,
                id=trigger_id,
                automation_id=parse_id(automation_id, "automation"),
            )
        )
        row = self._one(
            "update_webhook",
            id=current.id,
            source=_pick(changes.source, current.source),
            event=_pick(changes.event, current.event),
            enabled=_pick(changes.enabled, current.enabled),
            secret=None if changes.secret is UNSET else changes.secret,
        )
        assert row is not None
        return WebhookRecord.from_dict(row)

    def delete_webhook(self, automation_id: uuid.UUID | str, trigger_id: uuid.UUID | str) -> None:
        self._found(
            "delete_webhook",
            "webhook trigger",
            trigger_id,
            id=trigger_id,
            automation_id=parse_id(automation_id, "automation"),
        )

    # --- the plan ---------------------------------------------------------------------

    def put_plan(self, automation_id: uuid.UUID | str, document: PlanDocument) -> PlanRecord:
        """Set the automation's one plan. Runs admitted before keep their snapshot."""
        row = self._found(
            "put_plan",
            "automation",
            automation_id,
            automation_id=automation_id,
            version=document.plan["version"],
            steps=Jsonb(document.plan["steps"]),
            allowlist=_jsonb(document.allowlist),
            limits=_jsonb(document.limits),
        )
        return PlanRecord.from_dict(row)

    def plan(self, automation_id: uuid.UUID | str) -> PlanRecord:
        self.automation(automation_id)
        row = self._one("get_plan", automation_id=parse_id(automation_id, "automation"))
        if row is None:
            raise NotFound(f"automation {automation_id} has no plan")
        return PlanRecord.from_dict(row)

    def plan_or_none(self, automation_id: uuid.UUID | str) -> PlanRecord | None:
        row = self._one("get_plan", automation_id=parse_id(automation_id, "automation"))
        return PlanRecord.from_dict(row) if row else None

    def delete_plan(self, automation_id: uuid.UUID | str) -> None:
        self.automation(automation_id)
        row = self._one("delete_plan", automation_id=parse_id(automation_id, "automation"))
        if row is None:
            raise NotFound(f"automation {automation_id} has no plan")

    # --- manual runs ------------------------------------------------------------------

    def trigger(self, automation_id: uuid.UUID | str, input: JsonValue = None) -> RunRecord:
        """Admit a pending manual run with a snapshot of the current plan."""
        current = AutomationRecord.from_dict(
            self._found("lock_automation", "automation", automation_id, id=automation_id)
        )
        if not current.enabled:
            raise AutomationPaused(
                f"automation {current.id} is paused: resume it before triggering a run"
            )
        if self.plan_or_none(current.id) is None:
            raise NoPlan(f"automation {current.id} has no plan: set one before triggering a run")
        run = admit_run(
            self.conn,
            automation_id=current.id,
            trigger_kind="manual",
            input=input if input is not None else {},
            traceparent=current_traceparent(),  # the trigger request's trace
            now=self.clock.now_or_none(),
        )
        # The automation row is locked and its plan was there: admission cannot refuse.
        assert run is not None
        return run

    # --- plumbing ---------------------------------------------------------------------

    def _next(self, cron_expr: str, timezone: str) -> datetime:
        try:
            return cron.next_occurrence(cron_expr, timezone, self.clock.now())
        except InvalidSchedule as exc:
            raise InvalidSchedule(exc.message, field="cron") from None

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "everyone": self.everyone,
            "now": self.clock.now_or_none(),
            **params,
        }

    def _one(self, query_name: str, /, **params: Any) -> dict[str, Any] | None:
        with translated(), self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query(query_name), self._params(params)).fetchone()

    def _all(self, query_name: str, /, **params: Any) -> list[dict[str, Any]]:
        with translated(), self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query(query_name), self._params(params)).fetchall()

    def _found(
        self, query_name: str, what: str, key: uuid.UUID | str, /, **params: Any
    ) -> dict[str, Any]:
        """The row of a query whose ids must name one of the principal's things."""
        checked = {
            k: parse_id(v, "automation" if k == "automation_id" else what)
            if k in ("id", "automation_id")
            else v
            for k, v in params.items()
        }
        row = self._one(query_name, **checked)
        if row is None:
            raise NotFound(f"no {what} {key}")
        return row


def _pick(change: T | Unset, current: T) -> T:
    return current if isinstance(change, Unset) else change


def _jsonb(value: JsonValue) -> Jsonb | None:
    return None if value is None else Jsonb(value)
