"""Automation plans: `{"version": 1, "steps": [{"id", "actionId", "input", "retry"?}, ...]}`.

A plan is a small declarative sequence of one or more tool actions (docs/machines.md,
rule 2) with unique step ids (rule 6). It is validated when set on an automation and
again by the executor on the snapshot a run carries: an invalid plan fails the run.

Only transient transport failures retry (rule 7). An error status answered by a
step's target fails the run unless the step opts in with `"retry": {"on": [...]}`,
naming the answers it may retry: `http_5xx` (500 to 599) and `http_429`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from charter.core import identifiers
from charter.core.errors import CharterError
from charter.core.errors.automations import InvalidPlan
from charter.core.errors.workflows import TemplateError
from charter.core.ijson import check_value
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.scope import Scope
from charter.dsl.templates import Template, compile_template

STEP_ID = identifiers.NAME
ACTION_ID = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")
MAX_STEPS = 100
_PLAN_KEYS = {"version", "steps"}
# What a step's input templates may read (DSL templates, docs/machines.md).
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Not `now`: a retried step must get the same input as its first attempt.
TEMPLATE_ROOTS = frozenset({"input", "steps"})
_STEP_KEYS = {"id", "actionId", "input", "retry"}
# The target answers a step may opt in to retrying, in the order documented.
RETRY_CONDITIONS = ("http_5xx", "http_429")


def answer_condition(status: int) -> str | None:
    """The retry condition an answer with this HTTP status meets (None: none)."""
    if status == 429:
        return "http_429"
    if 500 <= status <= 599:
        return "http_5xx"
    return None


@dataclass(frozen=True)
class Step:
    id: str
    action_id: str
    input: JsonValue
    # Compiled by parse_plan; a Step built by hand compiles its input on first use.
    template: Template | None = field(default=None, compare=False, repr=False)
    # `retry.on` as given (empty: the step retries transport failures only).
    retry_on: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        step: JsonObject = {"id": self.id, "actionId": self.action_id, "input": self.input}
        if self.retry_on:
            step["retry"] = {"on": list(self.retry_on)}
        return step

    def retries(self, condition: str | None) -> bool:
        """Whether the step opted in to retrying a target answer meeting `condition`."""
        return condition is not None and condition in self.retry_on

    def render_input(self, run_input: JsonValue, outputs: Mapping[str, JsonValue]) -> JsonValue:
        """The step's input with `{{ input.… }}` (the run's input: a webhook delivery, a
        cron occurrence, a manual trigger's body) and `{{ steps.<id>.… }}` (the outputs of
        earlier steps) filled in. Rendering is pure: a retried step gets the same input."""
        scope = Scope(
            document={"steps": dict(outputs)},
            now=_EPOCH,  # unused: templates may not read `now`
            input=run_input if isinstance(run_input, dict) else {},
        )
        template = self.template if self.template is not None else compile_template(self.input)
        return template.render(scope)


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    version: int = 1

    def to_json(self) -> JsonObject:
        return {"version": self.version, "steps": [s.to_json() for s in self.steps]}


def parse_plan(value: JsonValue) -> Plan:
    """Validate a plan document; InvalidPlan lists every problem at once."""
    problems: list[str] = []
    if not isinstance(value, dict):
        raise InvalidPlan("a plan must be an object", problems=["/: not an object"])
    unknown = sorted(set(value) - _PLAN_KEYS)
    if unknown:
        problems.append(f"/: unknown keys {unknown}")
    if value.get("version") != 1 or isinstance(value.get("version"), bool):
        problems.append("/version: must be 1")
    raw_steps = value.get("steps")
    steps: list[Step] = []
    if not isinstance(raw_steps, list) or not raw_steps:
        problems.append("/steps: must be a non-empty list")
        raw_steps = []
    elif len(raw_steps) > MAX_STEPS:
        problems.append(f"/steps: at most {MAX_STEPS} steps")
    seen: set[str] = set()
    for index, raw in enumerate(raw_steps):
        step = _step(raw, f"/steps/{index}", problems)
        if step is None:
            continue
        if step.id in seen:
            problems.append(f"/steps/{index}/id: duplicate step id {step.id!r}")
        seen.add(step.id)
        steps.append(step)
    if problems:
        raise InvalidPlan(f"invalid plan: {problems[0]}", problems=problems)
    return Plan(tuple(steps))


def _step(raw: JsonValue, pointer: str, problems: list[str]) -> Step | None:
    if not isinstance(raw, dict):
        problems.append(f"{pointer}: a step must be an object")
        return None
    before = len(problems)
    unknown = sorted(set(raw) - _STEP_KEYS)
    if unknown:
        problems.append(f"{pointer}: unknown keys {unknown}")
    step_id, action_id = raw.get("id"), raw.get("actionId")
    if not isinstance(step_id, str) or not STEP_ID.fullmatch(step_id):
        problems.append(f"{pointer}/id: must match {STEP_ID.pattern}")
    if not isinstance(action_id, str) or not ACTION_ID.fullmatch(action_id):
        problems.append(f"{pointer}/actionId: must be a dotted action name like 'http.request'")
    template: Template | None = None
    if "input" not in raw:
        problems.append(f"{pointer}/input: required (use {{}} for none)")
    else:
        try:
            check_value(raw["input"])
            template = compile_template(raw["input"])
        except TemplateError as exc:
            problems.extend(f"{pointer}/input{where}: {message}" for where, message in exc.problems)
        except CharterError as exc:
            problems.append(f"{pointer}/input: {exc.message}")
        if template is not None:
            for name in sorted(template.references()):
                if name.split(".")[0] not in TEMPLATE_ROOTS:
                    problems.append(
                        f"{pointer}/input: {{{{ {name} }}}} reads neither input nor steps"
                    )
    retry_on = _retry(raw["retry"], f"{pointer}/retry", problems) if "retry" in raw else ()
    if len(problems) > before or not isinstance(step_id, str) or not isinstance(action_id, str):
        return None
    assert template is not None
    return Step(step_id, action_id, raw["input"], template, retry_on)


def _retry(raw: JsonValue, pointer: str, problems: list[str]) -> tuple[str, ...]:
    """`{"on": [condition, ...]}`: exactly `on`, a non-empty list of unique known ones."""
    if not isinstance(raw, dict):
        problems.append(f'{pointer}: must be an object like {{"on": ["http_5xx"]}}')
        return ()
    unknown = sorted(set(raw) - {"on"})
    if unknown:
        problems.append(f"{pointer}: unknown keys {unknown}")
    conditions = raw.get("on")
    if not isinstance(conditions, list) or not conditions:
        problems.append(f"{pointer}/on: must be a non-empty list of {list(RETRY_CONDITIONS)}")
        return ()
    seen: list[str] = []
    for index, condition in enumerate(conditions):
        if not isinstance(condition, str) or condition not in RETRY_CONDITIONS:
            problems.append(
                f"{pointer}/on/{index}: unknown condition {condition!r} "
                f"(known: {', '.join(RETRY_CONDITIONS)})"
            )
        elif condition in seen:
            problems.append(f"{pointer}/on/{index}: duplicate condition {condition!r}")
        else:
            seen.append(condition)
    return tuple(seen)


MAX_STEP_TIMEOUT_SECONDS = 24 * 3600
_LIMIT_KEYS = {"stepTimeoutSeconds"}


@dataclass(frozen=True)
class Policy:
    """What a plan may do: `allowlist` (action ids, or `prefix.*`; None allows every
    registered action) and `limits` (`stepTimeoutSeconds`: an action running longer is
    cancelled and the run fails)."""

    allowlist: tuple[str, ...] | None = None
    step_timeout_seconds: float | None = None

    def allows(self, action_id: str) -> bool:
        if self.allowlist is None:
            return True
        return any(
            action_id == entry or (entry.endswith(".*") and action_id.startswith(entry[:-1]))
            for entry in self.allowlist
        )


def parse_policy(allowlist: JsonValue, limits: JsonValue) -> Policy:
    """Validate an automation's allowlist and limits (null: none)."""
    problems: list[str] = []
    entries: tuple[str, ...] | None = None
    if allowlist is not None:
        if not isinstance(allowlist, list) or not all(isinstance(e, str) for e in allowlist):
            problems.append("/allowlist: must be a list of action ids (or 'prefix.*')")
        else:
            for index, entry in enumerate(allowlist):
                assert isinstance(entry, str)
                name = entry[:-2] if entry.endswith(".*") else entry
                if not (ACTION_ID.fullmatch(name) or re.fullmatch(r"[a-z][a-z0-9_]*", name)):
                    problems.append(f"/allowlist/{index}: {entry!r} is not an action id")
            entries = tuple(str(e) for e in allowlist)
    timeout: float | None = None
    if limits is not None:
        if not isinstance(limits, dict):
            problems.append("/limits: must be an object")
        else:
            unknown = sorted(set(limits) - _LIMIT_KEYS)
            if unknown:
                problems.append(f"/limits: unknown keys {unknown}")
            raw = limits.get("stepTimeoutSeconds")
            if raw is not None:
                if (
                    isinstance(raw, bool)
                    or not isinstance(raw, int | float)
                    or not (0 < raw <= MAX_STEP_TIMEOUT_SECONDS)
                ):
                    problems.append(
                        "/limits/stepTimeoutSeconds: a number of seconds above 0 and at most "
                        f"{MAX_STEP_TIMEOUT_SECONDS}"
                    )
                else:
                    timeout = float(raw)
    if problems:
        raise InvalidPlan(f"invalid plan: {problems[0]}", problems=problems)
    return Policy(entries, timeout)
