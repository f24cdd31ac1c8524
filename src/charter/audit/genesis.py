"""Spawn geneses under verification: an unsigned first event must resolve to its cause.

docs/wire-format.md: a verifier accepts an unsigned event only as seq 1 of a spawned process and
only if its `cause` is a valid signed event of the parent process with the same actor.
A child's create action may spawn too, so a cause can itself be a genesis; the chain of
causes is then followed until it reaches a signed event. The cause's action must also
declare a `spawn` in its recorded workflow version, so an unsigned genesis cannot be
hung on any other signed event of the parent.
"""

from __future__ import annotations

from collections.abc import Sequence

from charter.audit.evidence import EventRow, Evidence, Problem, parse_envelope, short
from charter.core.canonical import sha256_hex
from charter.core.envelope import Envelope, Submission, check_genesis
from charter.core.errors import BadSignature, Malformed

MAX_CAUSE_DEPTH = 16  # well beyond the engine's spawn depth; a loop of causes stops here


def check_spawn_genesis(evidence: Evidence, envelopes: Sequence[Envelope | None]) -> list[Problem]:
    """Problems with the first event's standing as a genesis, or with the row's parent."""
    process = evidence.process
    if not evidence.events:
        return []
    first, envelope = evidence.events[0], envelopes[0]
    if first.kind != "spawn":
        if process.parent is not None or process.parent_event is not None:
            return [
                Problem(
                    first.seq,
                    "field_mismatch",
                    f"the process row names the parent {process.parent!r} "
                    "but its first event is not a spawn genesis",
                )
            ]
        return []
    if envelope is None:
        return []  # already reported as bad_envelope
    problems: list[Problem] = []
    if process.parent_event != envelope.cause:
        problems.append(
            Problem(
                first.seq,
                "field_mismatch",
                f"the process row's parent_event is {short(process.parent_event)} "
                f"but the genesis cause is {short(envelope.cause)}",
            )
        )
    reason = _cause_problem(envelope, first.signature, process.parent, evidence, depth=0)
    if reason is not None:
        problems.append(Problem(first.seq, "bad_cause", reason))
    return problems


def _cause_problem(
    child: Envelope,
    signature: str | None,
    parent_process: str | None,
    evidence: Evidence,
    *,
    depth: int,
) -> str | None:
    """Why `child` is not a genesis validly caused by an event of `parent_process`."""
    if signature is not None:
        return "a spawn genesis must be unsigned, but this one carries a signature"
    if child.cause is None:
        return "the spawn genesis has no cause"
    cause = evidence.causes.get(child.cause)
    if cause is None:
        return f"the cause {short(child.cause)} is not a known event"
    text = cause.envelope_text.encode("utf-8")
    if sha256_hex(text) != child.cause:
        return f"the cause event's envelope does not hash to {short(child.cause)}"
    try:
        parent = parse_envelope(cause.envelope_text)
    except Malformed as exc:
        return f"the cause event is invalid: {exc.message}"
    if parent.message() != text:
        return "the cause event's envelope is not canonical"
    if parent_process is not None and parent.process != parent_process:
        return (
            f"the cause is an event of {parent.process!r}, "
            f"not of the parent process {parent_process!r}"
        )
    if cause.process_id != parent.process:
        return (
            f"the cause event's row says process {cause.process_id!r}, "
            f"its envelope {parent.process!r}"
        )
    if child.at != parent.at:
        return f"the genesis `at` {child.at} is not its cause's {parent.at}"
    spawns = _spawn_problem(cause, parent, evidence)
    if spawns is not None:
        return spawns
    if cause.kind == "spawn":
        if child.actor != parent.actor:
            return "the actor of a spawn genesis must be its cause's actor"
        if depth >= MAX_CAUSE_DEPTH:
            return f"spawn causes nest deeper than {MAX_CAUSE_DEPTH} levels"
        return _cause_problem(parent, cause.signature, None, evidence, depth=depth + 1)
    if cause.signature is None:
        return "the cause event is unsigned"
    try:
        check_genesis(child, signature, Submission(parent, cause.signature))
    except BadSignature:
        return f"the cause event's signature does not verify against {short(parent.actor)}"
    except Malformed as exc:
        return f"the cause does not authorize this genesis: {exc.message}"
    return None


def _spawn_problem(cause: EventRow, parent: Envelope, evidence: Evidence) -> str | None:
    definition = evidence.workflows.get(cause.workflow_version)
    if definition is None:
        return (
            f"the cause's workflow version {short(cause.workflow_version)} is not in the evidence"
        )
    actions = definition.get("actions") if isinstance(definition, dict) else None
    action = actions.get(parent.action) if isinstance(actions, dict) else None
    spawn = action.get("spawn") if isinstance(action, dict) else None
    if not (isinstance(spawn, list) and spawn):
        return f"the cause event's action {parent.action!r} spawns no process"
    return None
