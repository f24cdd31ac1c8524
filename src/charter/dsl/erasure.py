"""The built-in `charter:erase` action of a workflow with an `erasure` block (docs/dsl.md).

An actor holding one of the block's roles, from the block's states and when its
condition holds, erases personal values of the process's earlier events: the values
are removed from the disclosures kept beside the events, and the process data is
derived again with each erased value (and whatever came from it) as `{"erased": true}`.
The input names a legal basis from the block and a ticket reference, so that no free
text (nor any personal value) enters the permanent record, and says which values go.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from jsonschema import Draft202012Validator

from charter.core import identifiers
from charter.core.errors import InvalidInput
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.model import ERASE_ACTION, Action, ErasureSpec

REQUEST_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""An erasure's `request`: the data subject's request as a ticket reference, not prose."""
BASIS_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""An erasure basis: a short reference to a legal ground (`art17-1a`), not prose."""
HASH_PATTERN = re.compile(r"[0-9a-f]{64}")
MAX_SCOPE_ITEMS = 1000
ALL = "all"


@dataclass(frozen=True)
class EraseInput:
    """A `charter:erase` event's input, once its schema has passed. `events` and
    `pointers` are None for "all"."""

    basis: str
    request: str
    events: frozenset[str] | None
    pointers: frozenset[str] | None

    @classmethod
    def of(cls, value: Mapping[str, JsonValue]) -> EraseInput:
        """The input `value`, which passed `input_schema`. A schema `pattern` is searched,
        and `$` matches before a final newline: the request is matched whole again here."""
        basis, request = value["basis"], value["request"]
        assert isinstance(basis, str)
        assert isinstance(request, str)
        if not REQUEST_PATTERN.fullmatch(request):
            raise InvalidInput(
                f"input /request: {request!r} does not match {REQUEST_PATTERN.pattern}",
                problems=[{"pointer": "/request", "message": "not a ticket reference"}],
            )
        scope = value.get("scope", {})
        assert isinstance(scope, dict)
        events, pointers = scope.get("events", ALL), scope.get("pointers", ALL)
        if isinstance(events, list):
            for index, item in enumerate(events):
                if not isinstance(item, str) or not HASH_PATTERN.fullmatch(item):
                    raise InvalidInput(
                        f"input /scope/events/{index} is not an event hash",
                        problems=[{"pointer": f"/scope/events/{index}",
                                   "message": "not an event hash"}],
                    )  # fmt: skip
        return cls(
            basis=basis,
            request=request,
            events=None if events == ALL else frozenset(map(str, events)),  # type: ignore[arg-type]
            pointers=None if pointers == ALL else frozenset(map(str, pointers)),  # type: ignore[arg-type]
        )

    def covers(self, event_hash: str, pointer: str) -> bool:
        """Whether the erasure asks for the value at `pointer` of event `event_hash`."""
        return (self.events is None or event_hash in self.events) and (
            self.pointers is None or pointer in self.pointers
        )


def input_schema(bases: tuple[str, ...]) -> JsonObject:
    """The fixed input of `charter:erase` for a block citing these bases."""

    def all_or(items: JsonObject) -> JsonObject:
        listed: JsonObject = {"type": "array", "minItems": 1, "maxItems": MAX_SCOPE_ITEMS,
                              "uniqueItems": True, "items": items}  # fmt: skip
        return {"oneOf": [{"const": ALL}, listed]}

    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["basis", "request"],
        "properties": {
            "basis": {"type": "string", "enum": list(bases)},
            "request": {"type": "string", "pattern": identifiers.anchored(REQUEST_PATTERN)},
            "scope": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "events": all_or(
                        {"type": "string", "pattern": identifiers.anchored(HASH_PATTERN)}
                    ),
                    "pointers": all_or({"type": "string", "pattern": "^(/([^~/]|~[01])*)+$"}),
                },
            },
        },
    }


def erase_action(spec: ErasureSpec) -> Action:
    """`charter:erase` as an `update` with the block's roles, states and condition."""
    schema = input_schema(spec.bases)
    return Action(
        name=ERASE_ACTION,
        type="update",
        roles=spec.roles,
        from_states=spec.from_states,
        to=None,
        when=spec.when,
        input_schema=schema,
        input_validator=Draft202012Validator(schema),
        description="erase personal values of the process's events; the data keeps "
        '`{"erased": true}` where they were',
    )
