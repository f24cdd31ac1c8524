"""Checking the control API's request values, each kind of bad value with its own 422
code, so the API, the client and the CLI agree on what a valid automation is.

A change reads only the keys a body holds: an absent key is UNSET (the stored value
stays), which is not the same as null where null means something (an unbounded
schedule, every event of a source).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from charter.automations import cron
from charter.automations.plan import parse_plan, parse_policy
from charter.core import identifiers
from charter.core.errors import CharterError, Malformed, NotFound
from charter.core.errors.automations import InvalidAutomation, InvalidSchedule, InvalidWebhook
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.unset import UNSET, Unset
from charter.core.webhook_secret import SECRET_PREFIX

TARGET = identifiers.NAME
MAX_NAME = 200
MAX_SOURCE = 200
MAX_OCCURRENCES = 2**31 - 1
_SECRET = re.compile(r"whsec_([A-Za-z0-9+/]+={0,2})")
SECRET_BYTES = (16, 256)
DEFAULT_PAGE = 50
MAX_PAGE = 500


@dataclass(frozen=True)
class AutomationChanges:
    name: str | Unset = UNSET
    target: str | Unset = UNSET
    enabled: bool | Unset = UNSET


@dataclass(frozen=True)
class ScheduleChanges:
    cron: str | Unset = UNSET
    timezone: str | Unset = UNSET
    enabled: bool | Unset = UNSET
    # None makes the schedule unbounded; a number is a new finite budget.
    max_occurrences: int | Unset | None = UNSET


@dataclass(frozen=True)
class WebhookChanges:
    source: str | Unset = UNSET
    # None matches every event of the source.
    event: str | Unset | None = UNSET
    enabled: bool | Unset = UNSET
    secret: str | Unset = UNSET


@dataclass(frozen=True)
class PlanDocument:
    plan: JsonObject
    allowlist: JsonValue
    limits: JsonValue


def automation_changes(body: Mapping[str, JsonValue]) -> AutomationChanges:
    """The checked name, target and enabled flag among `body`'s keys."""
    return AutomationChanges(
        name=check_name(body["name"]) if "name" in body else UNSET,
        target=check_target(body["target"]) if "target" in body else UNSET,
        enabled=_flag(body["enabled"], InvalidAutomation) if "enabled" in body else UNSET,
    )


def schedule_changes(body: Mapping[str, JsonValue]) -> ScheduleChanges:
    """The checked cron, timezone, enabled flag and `maxOccurrences` among `body`'s keys."""
    return ScheduleChanges(
        cron=check_cron(body["cron"]) if "cron" in body else UNSET,
        timezone=check_timezone(body["timezone"]) if "timezone" in body else UNSET,
        enabled=_flag(body["enabled"], InvalidSchedule) if "enabled" in body else UNSET,
        max_occurrences=(
            check_max_occurrences(body["maxOccurrences"]) if "maxOccurrences" in body else UNSET
        ),
    )


def webhook_changes(body: Mapping[str, JsonValue]) -> WebhookChanges:
    """The checked source, event, enabled flag and secret among `body`'s keys."""
    return WebhookChanges(
        source=check_source(body["source"]) if "source" in body else UNSET,
        event=check_event(body["event"]) if "event" in body else UNSET,
        enabled=_flag(body["enabled"], InvalidWebhook) if "enabled" in body else UNSET,
        secret=check_secret(body["secret"]) if "secret" in body else UNSET,
    )


def plan_document(body: Mapping[str, JsonValue]) -> PlanDocument:
    """A plan checked with `parse_plan` (InvalidPlan lists every problem) and its
    allowlist and limits checked with `parse_policy` (null for none)."""
    document: JsonObject = {k: body[k] for k in ("version", "steps") if k in body}
    plan = parse_plan(document).to_json()
    parse_policy(body.get("allowlist"), body.get("limits"))
    return PlanDocument(plan, body.get("allowlist"), body.get("limits"))


def check_name(value: JsonValue) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise InvalidAutomation(
            f"name must be a non-blank string of at most {MAX_NAME} characters", field="name"
        )
    return value


def check_target(value: JsonValue) -> str:
    if not isinstance(value, str) or not TARGET.fullmatch(value):
        raise InvalidAutomation(
            f"target must be a machine target matching {TARGET.pattern}", field="target"
        )
    return value


def check_cron(value: JsonValue) -> str:
    if not isinstance(value, str):
        raise InvalidSchedule("cron must be a string such as '0 9 * * 1-5'", field="cron")
    try:
        cron.validate_cron(value)
    except InvalidSchedule as exc:
        raise InvalidSchedule(exc.message, field="cron") from None
    return value


def check_timezone(value: JsonValue) -> str:
    if not isinstance(value, str):
        raise InvalidSchedule("timezone must be an IANA time zone name", field="timezone")
    try:
        cron.validate_timezone(value)
    except InvalidSchedule as exc:
        raise InvalidSchedule(exc.message, field="timezone") from None
    return value


def check_max_occurrences(value: JsonValue) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OCCURRENCES:
        raise InvalidSchedule(
            f"maxOccurrences must be an integer from 1 to {MAX_OCCURRENCES}, or null for "
            "an unbounded schedule",
            field="maxOccurrences",
        )
    return value


def check_source(value: JsonValue) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_SOURCE:
        raise InvalidWebhook(
            f"source must be a non-blank string of at most {MAX_SOURCE} characters",
            field="source",
        )
    return value


def check_event(value: JsonValue) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_SOURCE:
        raise InvalidWebhook(
            f"event must be a non-blank string of at most {MAX_SOURCE} characters, or null "
            "for every event of the source",
            field="event",
        )
    return value


def check_secret(value: JsonValue) -> str:
    """A Standard Webhooks secret: `whsec_` and the base64 of 16 to 256 random bytes."""
    low, high = SECRET_BYTES
    match = _SECRET.fullmatch(value) if isinstance(value, str) else None
    try:
        raw = base64.b64decode(match.group(1), validate=True) if match else b""
    except (binascii.Error, ValueError):
        raw = b""
    if not low <= len(raw) <= high:
        raise InvalidWebhook(
            f"secret must be {SECRET_PREFIX!r} followed by the base64 of {low} to {high} bytes",
            field="secret",
        )
    assert isinstance(value, str)
    return value


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise Malformed(f"limit must be between 1 and {MAX_PAGE}")
    return limit


def _flag(value: JsonValue, error: type[CharterError]) -> bool:
    if not isinstance(value, bool):
        raise error("enabled must be true or false", field="enabled")
    return value


def parse_id(value: uuid.UUID | str, what: str) -> uuid.UUID:
    """An id from a path; anything that is not a UUID names nothing (404)."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"no {what} {value}") from None
