"""Replay: re-derive a process's state and data from its events (docs/wire-format.md).

Each event is decided again (charter.engine.rederive), and the result must equal the
stored process row. `decide` reads no clock (time comes from each envelope's signed
`at`), so a replay decides as the engine did; where a personal value is gone, with the
three-valued reading the engine used when it stored the data after an erasure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from charter.audit.evidence import EventRow, Evidence, Problem, short
from charter.core.canonical import canonical_bytes
from charter.core.envelope import Envelope
from charter.core.errors import BadDisclosure, CharterError, Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.dsl.erased import Erased
from charter.dsl.model import Workflow
from charter.dsl.validate import load_workflow
from charter.engine.records import ActorContext, ProcessView
from charter.engine.rederive import PastEvent, Rederivation, past_input


class _Stop(Exception):
    """Replay cannot go on past this event."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def replay(
    evidence: Evidence,
    envelopes: Sequence[Envelope | None],
    gone: Mapping[str, Mapping[str, Erased]] | None = None,
    unverifiable: list[tuple[int, str]] | None = None,
) -> list[Problem]:
    """`replay_rejected` at the first event that does not decide, else `replay_mismatch`s.

    `gone` holds, by event hash and pointer, the marker of each personal value that was
    erased or withheld; what replay could not check without them goes to `unverifiable`.
    """
    derived = rederive(evidence, envelopes, gone or {})
    if isinstance(derived, Problem):
        return [derived]
    if unverifiable is not None:
        unverifiable.extend(derived.unverifiable)
    if derived.current is None:
        return []  # no events: nothing to derive, and the head check speaks for the row
    return _compare(evidence.process, replace(derived.current, data=derived.data()))


def rederive(
    evidence: Evidence,
    envelopes: Sequence[Envelope | None],
    gone: Mapping[str, Mapping[str, Erased]],
) -> Rederivation | Problem:
    """The process as its events make it, or the `replay_rejected` of the first event
    that does not decide again."""
    workflows: dict[str, Workflow] = {}
    derived = Rederivation(evidence.process, three_valued=any(gone.values()))
    for event, envelope in zip(evidence.events, envelopes, strict=True):
        try:
            if envelope is None:
                raise _Stop("the envelope is invalid")
            workflow = workflows.get(event.workflow_version)
            if workflow is None:
                workflow = _load(evidence, event.workflow_version)
                workflows[event.workflow_version] = workflow
            derived.step(
                PastEvent(
                    seq=event.seq,
                    hash=envelope.hash(),
                    envelope=envelope,
                    actor=ActorContext(event.actor_id, event.actor, event.actor_roles),
                    genesis=event.kind == "spawn",
                    workflow=workflow,
                    input=_full_input(event, envelope, gone.get(event.hash, {})),
                )
            )
        except _Stop as stop:
            return Problem(event.seq, "replay_rejected", f"cannot replay: {stop.message}")
        except CharterError as exc:
            return Problem(
                event.seq,
                "replay_rejected",
                f"the rules reject this event on replay ({exc.code}: {exc.message})",
            )
    return derived


def _full_input(event: EventRow, envelope: Envelope, gone: Mapping[str, Erased]) -> JsonObject:
    try:
        return past_input(envelope, event.disclosures, gone)
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


def _compare(stored: ProcessView, derived: ProcessView) -> list[Problem]:
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
