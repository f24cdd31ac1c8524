"""What the SDK's calls return: frozen dataclasses, each parsed from its response object.

The objects `charter.wire` defines are re-exported as they are (read with `parser`); the
others are still described here, each with its own `parse`.

Every result keeps the object it came from in `raw` (what `--json` prints); a missing or
mistyped field is `UnexpectedResponse`, never a half-filled value. Times are aware
`datetime`s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from charter import wire
from charter.core.jsontypes import JsonObject, JsonValue
from charter.sdk.errors import UnexpectedResponse

# Re-exported: the SDK's results are these wire objects themselves.
from charter.wire.automations import (
    Automation as Automation,
)
from charter.wire.automations import (
    AutomationDetail as AutomationDetail,
)
from charter.wire.automations import (
    Machine as Machine,
)
from charter.wire.automations import (
    Plan as Plan,
)
from charter.wire.automations import (
    PlanStep as PlanStep,
)
from charter.wire.automations import (
    Run as Run,
)
from charter.wire.automations import (
    RunDetail as RunDetail,
)
from charter.wire.automations import (
    RunStep as RunStep,
)
from charter.wire.automations import (
    Schedule as Schedule,
)
from charter.wire.automations import (
    Webhook as Webhook,
)
from charter.wire.engine import Accepted as Accepted
from charter.wire.engine import Actor as Actor
from charter.wire.engine import Deployed as Deployed
from charter.wire.engine import Deployment as Deployment
from charter.wire.engine import Event as Event
from charter.wire.engine import Problem as Problem
from charter.wire.engine import Process as Process
from charter.wire.engine import Verification as Verification
from charter.wire.engine import Workflow as Workflow

T = TypeVar("T")
W = TypeVar("W", bound=wire.Wire)


# --- the automations control API: the wire's own objects -------------------------------


def parser(cls: type[W]) -> Callable[[JsonObject], W]:
    """How a call reads an answer that is a wire object: strictly, any flaw being
    UnexpectedResponse."""
    return lambda body: wire.parse(cls, body, UnexpectedResponse)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; `next_cursor` fetches the next (None: this is the last)."""

    items: tuple[T, ...]
    next_cursor: str | None
    raw: JsonObject = field(repr=False, compare=False)


class _Reader:
    """Typed access to a response object; a missing or mistyped key is UnexpectedResponse."""

    def __init__(self, body: JsonObject, what: str) -> None:
        self.body = body
        self.what = what

    def _fail(self, key: str, expected: str) -> UnexpectedResponse:
        return UnexpectedResponse(f"the {self.what} in the response has no {expected} {key!r}")

    def text(self, key: str) -> str:
        value = self.body.get(key)
        if not isinstance(value, str):
            raise self._fail(key, "string")
        return value

    def optional_text(self, key: str) -> str | None:
        return None if self.body.get(key) is None else self.text(key)

    def flag(self, key: str) -> bool:
        value = self.body.get(key)
        if not isinstance(value, bool):
            raise self._fail(key, "boolean")
        return value

    def integer(self, key: str) -> int:
        value = self.body.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "integer")
        return value

    def optional_int(self, key: str) -> int | None:
        return None if self.body.get(key) is None else self.integer(key)

    def time(self, key: str) -> datetime:
        try:
            return datetime.fromisoformat(self.text(key))
        except ValueError:
            raise self._fail(key, "RFC 3339 time") from None

    def optional_time(self, key: str) -> datetime | None:
        return None if self.body.get(key) is None else self.time(key)

    def obj(self, key: str) -> JsonObject:
        value = self.body.get(key)
        if not isinstance(value, dict):
            raise self._fail(key, "object")
        return value

    def array(self, key: str) -> list[JsonValue]:
        value = self.body.get(key)
        if not isinstance(value, list):
            raise self._fail(key, "list")
        return value

    def objects(self, key: str) -> list[JsonObject]:
        items = self.array(key)
        if not all(isinstance(item, dict) for item in items):
            raise self._fail(key, "list of objects")
        return [item for item in items if isinstance(item, dict)]


def _page(body: JsonObject, parse: Callable[[JsonObject], T]) -> Page[T]:
    """A list answer: every list route answers `{"items": [...], "next_cursor": ...}`."""
    reader = _Reader(body, "page")
    return Page(
        tuple(parse(item) for item in reader.objects("items")),
        reader.optional_text("next_cursor"),
        body,
    )


def _strings(r: _Reader, key: str) -> tuple[str, ...]:
    items = r.array(key)
    if not all(isinstance(item, str) for item in items):
        raise r._fail(key, "list of strings")
    return tuple(str(item) for item in items)


# --- the engine ------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkItem:
    """A scheduled action or an automatic-action queue row, as the operator views list
    them (`kind` is `scheduled_action` or `auto_action`; `what` the action it fires)."""

    id: str
    kind: str
    what: str
    process: str
    workflow: str
    due: datetime | None
    status: str
    attempts: int
    last_error: str | None
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> WorkItem:
        r = _Reader(body, "work row")
        return cls(
            id=r.text("id"),
            kind=r.text("kind"),
            what=r.text("what"),
            process=r.text("process"),
            workflow=r.text("workflow"),
            due=r.optional_time("due"),
            status=r.text("status"),
            attempts=r.integer("attempts"),
            last_error=r.optional_text("last_error"),
            raw=body,
        )


@dataclass(frozen=True)
class ProcessAutomation:
    """A process's scheduled actions and automatic-action queue rows, as stored."""

    scheduled: tuple[JsonObject, ...]
    queue: tuple[JsonObject, ...]
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> ProcessAutomation:
        r = _Reader(body, "process automation")
        return cls(tuple(r.objects("scheduled")), tuple(r.objects("queue")), body)


@dataclass(frozen=True)
class Stats:
    """Counts for a dashboard (GET /v1/stats)."""

    # (workflow, state) → how many processes are in it.
    processes: dict[tuple[str, str], int]
    timers_due_next_hour: int
    queue: dict[str, int]
    failed_work: int
    runs: dict[str, int]
    machines_seen_recently: int | None
    as_of: datetime
    raw: JsonObject = field(repr=False, compare=False)

    @classmethod
    def parse(cls, body: JsonObject) -> Stats:
        r = _Reader(body, "stats")
        counts = {}
        for item in r.objects("processes"):
            c = _Reader(item, "process count")
            counts[(c.text("workflow"), c.text("state"))] = c.integer("count")
        return cls(
            processes=counts,
            timers_due_next_hour=r.integer("timers_due_next_hour"),
            queue=_counts(r, "queue"),
            failed_work=r.integer("failed_work"),
            runs=_counts(r, "runs"),
            machines_seen_recently=r.optional_int("machines_seen_recently"),
            as_of=r.time("as_of"),
            raw=body,
        )


def _counts(r: _Reader, key: str) -> dict[str, int]:
    counts = r.obj(key)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values()):
        raise r._fail(key, "map of counts")
    return {k: int(str(v)) for k, v in counts.items()}
