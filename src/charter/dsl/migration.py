"""The built-in `charter:migrate` action of a workflow with a `migration` block (docs/dsl.md).

An actor holding one of the block's roles moves a process to any state of the current
definition (its own state too) and cancels the schedules it lists. The action has a
fixed input schema naming the definition's states; it has no `when` and no `mutate`, so
the data stays as it is. Which work rows a definition no longer has is known only to
the database: the engine cancels those in the event's transaction (engine/effects.py),
from the action names this module hands it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from jsonschema import Draft202012Validator

from charter.core import identifiers
from charter.core.errors import InvalidInput
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.model import MIGRATE_ACTION, Action
from charter.dsl.mutate import MutateEffects

REASON_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""A migration's `reason`: a ticket reference, not prose."""
MAX_CANCEL_IDS = 256


@dataclass(frozen=True)
class MigrationInput:
    """A `charter:migrate` event's input, once its schema has passed."""

    state: str
    reason: str
    cancel: tuple[str, ...]

    @classmethod
    def of(cls, value: Mapping[str, JsonValue]) -> MigrationInput:
        """The input `value`, which passed `input_schema`. A schema `pattern` is searched,
        and `$` matches before a final newline: the names are matched whole again here."""
        state, reason, cancel = value["state"], value["reason"], value.get("cancel", [])
        assert isinstance(state, str)
        assert isinstance(reason, str)
        assert isinstance(cancel, list)
        if not REASON_PATTERN.fullmatch(reason):
            raise InvalidInput(
                f"input /reason: {reason!r} does not match {REASON_PATTERN.pattern}",
                problems=[{"pointer": "/reason", "message": "not a ticket reference"}],
            )
        for index, item in enumerate(cancel):
            if not isinstance(item, str) or not identifiers.NAME.fullmatch(item):
                raise InvalidInput(
                    f"input /cancel/{index}: {item!r} is not a schedule id",
                    problems=[{"pointer": f"/cancel/{index}", "message": "not a schedule id"}],
                )
        return cls(state, reason, tuple(dict.fromkeys(str(item) for item in cancel)))


def input_schema(states: tuple[str, ...]) -> JsonObject:
    """The fixed input of `charter:migrate` for a definition with these states."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["state", "reason"],
        "properties": {
            "state": {"type": "string", "enum": list(states)},
            "reason": {"type": "string", "pattern": identifiers.anchored(REASON_PATTERN)},
            "cancel": {
                "type": "array",
                "maxItems": MAX_CANCEL_IDS,
                "items": {"type": "string", "pattern": identifiers.anchored(identifiers.NAME)},
            },
        },
    }


def migration_action(roles: tuple[str, ...], states: tuple[str, ...]) -> Action:
    """`charter:migrate` as an `update` from any state, granted to `roles`."""
    schema = input_schema(states)
    return Action(
        name=MIGRATE_ACTION,
        type="update",
        roles=roles,
        from_states=None,
        to=None,
        input_schema=schema,
        input_validator=Draft202012Validator(schema),
        description="move the process to a state of the current definition; cancel work "
        "the definition no longer has",
    )


def apply_migration(document: Mapping[str, JsonValue], migration: MigrationInput) -> MutateEffects:
    """The effects of a checked `charter:migrate` input on `document` (with `state`): the
    new state, the same data, and the listed schedules cancelled."""
    return MutateEffects(
        new_document={**document, "state": migration.state}, cancels=migration.cancel
    )
