"""The personal-field rule of an event: what the action marks personal is committed to by
digest, never sent in clear, and nothing else is committed to that way.

Checked after the input schema, on the full input (the envelope's `input` with its
disclosures), so that a schema error is reported as such first. Messages name fields,
never values: a rejection is logged.
"""

from __future__ import annotations

from charter.core import pointers
from charter.core.envelope import Envelope
from charter.core.errors import BadDisclosure, PersonalInClear
from charter.dsl.model import Action


def check_personal(action: Action, envelope: Envelope) -> None:
    """PersonalInClear when a personal field of `action` is in the envelope's `input`;
    BadDisclosure when `sd` commits to a field the action does not mark personal."""
    committed = envelope.sd or {}
    if not action.personal and not committed:
        return
    personal = set(action.personal)
    for pointer in sorted(committed):
        if pointer not in personal:
            raise BadDisclosure(
                f"sd commits to {pointer}, which is not a personal field of action "
                f"{action.name!r}: send it in input"
            )
    for pointer in action.personal:
        if pointer not in committed and pointers.holds(envelope.input, pointer):
            raise PersonalInClear(
                f"input {pointer} is a personal field of action {action.name!r}: commit to it "
                "in sd and send its disclosure beside the signature (envelope v2)"
            )
