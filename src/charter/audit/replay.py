"""Replay: re-derive a process's state and data from its events (docs/wire-format.md).

Each event is decided again with the pure `decide`, against the workflow version it
recorded and the actor context the engine recorded for it, from the state the events
before it produced. The result must equal the stored process row. `decide` reads no
clock (time comes from each envelope's signed `at`), so a replay decides as the engine did.
"""

from __future__ import annotations

from collections.abc import Sequence

from charter.audit.disclosures import replay_input
from charter.audit.evidence import EventRow, Evidence, Problem, short
from charter.core.canonical import canonical_bytes
from charter.core.envelope import Envelope
from charter.core.errors import BadDisclosure, CharterError, Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.model import Workflow
from charter.dsl.validate import load_workflow
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rules import decide


class _Stop(Exception):
    """Replay cannot go on past this event."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def replay(evidence: Evidence, envelopes: Sequence[Envelope | None]) -> list[Problem]:
    """`replay_rejected` at the first event that does not decide, else `replay_mismatch`s."""
    process = evidence.process
    workflows: dict[str, Workflow] = {}
    current: ProcessView | None = None
    for event, envelope in zip(evidence.events, envelopes, strict=True):
        try:
            if envelope is None:
                raise _Stop("the envelope is invalid")
            workflow = workflows.get(event.workflow_version)
            if workflow is None:
                workflow = _load(evidence, event.workflow_version)
                workflows[event.workflow_version] = workflow
            actor = ActorContext(event.actor_id, event.actor, event.actor_roles)
            full_input = _full_input(event, envelope)
            decision = decide(
                current,
                workflow,
                envelope,
                actor,
                event_hash=envelope.hash(),
                genesis=event.kind == "spawn",
                full_input=full_input,
            )
        except _Stop as stop:
            return [Problem(event.seq, "replay_rejected", f"cannot replay: {stop.message}")]
        except CharterError as exc:
            return [
                Problem(
                    event.seq,
                    "replay_rejected",
                    f"the rules reject this event on replay ({exc.code}: {exc.message})",
                )
            ]
        current = ProcessView(
            id=process.id,
            workflow=process.workflow,
            state=decision.state,
            data=decision.data,
            head=envelope.hash(),
            seq=event.seq,
            parent=process.parent,
            parent_event=process.parent_event,
        )
    return _compare(process, current)


def _full_input(event: EventRow, envelope: Envelope) -> JsonObject:
    try:
        return replay_input(event, envelope)
    except BadDisclosure as exc:
        raise _Stop(f"its personal input is not all there ({exc.message})") from None


def _load(evidence: Evidence, version: str) -> Workflow:
    definition = evidence.workflows.get(version)
    if definition is None:
        raise _Stop(f"workflow version {short(version)} is not available")
    try:
        return load_workflow(definition)
    except CharterError as exc:
        raise _Stop(f"workflow version {short(version)} does not load: {exc.message}") from None


def _compare(stored: ProcessView, derived: ProcessView | None) -> list[Problem]:
    if derived is None:
        return []  # no events: nothing to derive, and the head check speaks for the row
    problems: list[Problem] = []
    if stored.state != derived.state:
        problems.append(
            Problem(
                None,
                "replay_mismatch",
                f"the stored state is {stored.state!r} but the events give {derived.state!r}",
            )
        )
    # Canonical bytes, not ==: True == 1 in Python, while JSON tells them apart.
    if _canonical(stored.data) != _canonical(derived.data):
        keys = sorted(
            key
            for key in stored.data.keys() | derived.data.keys()
            if key not in stored.data
            or key not in derived.data
            or _canonical(stored.data[key]) != _canonical(derived.data[key])
        )
        problems.append(
            Problem(
                None,
                "replay_mismatch",
                "the stored data differs from what the events give, at "
                + ", ".join(repr(key) for key in keys),
            )
        )
    return problems


def _canonical(value: JsonValue) -> bytes | None:
    # A tampered row may hold what JCS cannot encode (1e400 read back as inf): no match.
    try:
        return canonical_bytes(value)
    except Malformed:
        return None
