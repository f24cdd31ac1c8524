"""What the SDK's calls return: frozen dataclasses, each parsed from its response object.

The objects `charter.wire` defines are re-exported as they are (read with `parser`);
only `Page`, the list envelope around them, is still described here.

Every result keeps the object it came from in `raw` (what `--json` prints); a missing or
mistyped field is `UnexpectedResponse`, never a half-filled value. Times are aware
`datetime`s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
from charter.wire.engine import ProcessAutomation as ProcessAutomation
from charter.wire.engine import Stats as Stats
from charter.wire.engine import Verification as Verification
from charter.wire.engine import Workflow as Workflow
from charter.wire.engine import WorkItem as WorkItem

T = TypeVar("T")
W = TypeVar("W", bound=wire.Wire)


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
