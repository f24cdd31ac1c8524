"""How `charter automations` and `charter runs` show what they read: panels, tables
and the one-line forms of times, budgets and secrets."""

from __future__ import annotations

import json
from datetime import datetime

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from charter.cli import remote, tables
from charter.core.jsontypes import JsonValue
from charter.sdk.results import Automation, AutomationDetail, Plan, Run, Schedule, Webhook


def print_automation(automation: Automation, verb: str, as_json: bool) -> None:
    if as_json:
        remote.print_json(automation.raw)
    else:
        state = "enabled" if automation.enabled else "paused"
        typer.echo(f"{verb} automation {automation.id} ({automation.name}, {state})")


def print_schedule(schedule: Schedule, verb: str, as_json: bool) -> None:
    if as_json:
        remote.print_json(schedule.raw)
        return
    typer.echo(
        f"{verb} schedule trigger {schedule.id}: {schedule.cron} ({schedule.timezone}), "
        f"next {when(schedule.next_run_at)}, {budget(schedule.remaining_occurrences)}"
    )


def detail_panel(detail: AutomationDetail) -> Panel:
    automation = detail.automation
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    for label, value in (
        ("owner", automation.principal or "-"),
        ("name", automation.name),
        ("target", automation.target),
        ("enabled", yes(automation.enabled)),
        ("created", when(automation.created_at)),
        ("updated", when(automation.updated_at)),
    ):
        facts.add_row(label, Text(value))
    schedules = Table(
        "id", "cron", "timezone", "next run", "remaining", "enabled", title="schedules"
    )
    tables.whole(schedules, "id")
    for s in detail.schedules:
        schedules.add_row(
            s.id,
            Text(s.cron),
            s.timezone,
            when(s.next_run_at),
            budget(s.remaining_occurrences),
            yes(s.enabled),
        )
    webhooks = Table("id", "source", "event", "secret", "enabled", title="webhooks")
    tables.whole(webhooks, "id")
    for w in detail.webhooks:
        webhooks.add_row(
            w.id, Text(w.source), Text(w.event or "*"), secret_state(w), yes(w.enabled)
        )
    plan = plan_table(detail.plan) if detail.plan else Text("no plan")
    return Panel(Group(facts, schedules, webhooks, plan), title=Text(f"automation {automation.id}"))


def plan_table(plan: Plan) -> Table:
    table = Table("#", "step", "action", "input", "retries", title=f"plan v{plan.version}")
    for index, step in enumerate(plan.steps):
        # Transport failures always retry; `retry.on` adds the target answers named.
        retries = ", ".join(["transport", *step.retry_on])
        table.add_row(
            str(index),
            Text(step.id),
            Text(step.action_id),
            Text(compact(step.input)),
            Text(retries),
        )
    return table


def run_table(runs: tuple[Run, ...] | list[Run], title: str | None = None) -> Table:
    table = Table(
        "id", "automation", "trigger", "status", "attempts", "created", "error", title=title
    )
    for run in runs:
        table.add_row(
            run.id,
            run.automation_id,
            run.trigger_kind,
            run.status,
            str(run.attempts),
            when(run.created_at),
            Text(run.error or ""),
        )
    return tables.whole(table, "id", "automation")


def secret_state(webhook: Webhook) -> str:
    return "set (write-only)" if webhook.has_secret else "-"


def budget(remaining: int | None) -> str:
    return "unbounded" if remaining is None else f"{remaining} left"


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def when(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment else "-"


def compact(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def more(cursor: str | None) -> None:
    if cursor:
        typer.echo(f"more: --cursor {cursor} (or --all)")
