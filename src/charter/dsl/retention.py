"""The `retention` block (docs/dsl.md, "Retention and legal hold"): how long a finished
process stays in the hot tables, and who may hold it there.

`{"after": "7y", "states": ["offboarded", "rejected"], "hold_role": ["legal"]}`: a
process that has rested in one of `states` for `after` since its last event leaves the
hot tables for a bundle file (charter.archive). The block
grants two built-in `update` actions to the `hold_role`s: `charter:hold` puts the
process under legal hold, and `charter:release` lifts it; both take a ticket reference
as `reason`. A held process is never archived, and `charter:erase` on it is refused
(`condition_failed`). Whether
a process is held is read from its chain: the later of its hold and release events says.
"""

from __future__ import annotations

from jsonschema import Draft202012Validator

from charter.core import identifiers
from charter.core.jsontypes import JsonObject
from charter.dsl.migration import REASON_PATTERN
from charter.dsl.model import HOLD_ACTION, RELEASE_ACTION, Action, RetentionSpec

HOLD_ACTIONS = (HOLD_ACTION, RELEASE_ACTION)


def input_schema() -> JsonObject:
    """The fixed input of `charter:hold` and `charter:release`."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["reason"],
        "properties": {
            "reason": {"type": "string", "pattern": identifiers.anchored(REASON_PATTERN)}
        },
    }


def hold_actions(spec: RetentionSpec) -> tuple[Action, Action]:
    """`charter:hold` and `charter:release`, `update`s from any state for the hold roles."""
    schema = input_schema()

    def built_in(name: str, description: str) -> Action:
        return Action(
            name=name,
            type="update",
            roles=spec.hold_roles,
            from_states=None,
            to=None,
            input_schema=schema,
            input_validator=Draft202012Validator(schema),
            description=description,
        )

    return (
        built_in(HOLD_ACTION, "put the process under legal hold: never archived nor erased"),
        built_in(RELEASE_ACTION, "lift the process's legal hold"),
    )
