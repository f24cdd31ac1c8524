"""The pure verifier: checks Evidence the way docs/wire-format.md says an auditor would.

Every hash recomputes from the exact envelope text, the text is canonical and agrees
with its row, every signature verifies (strictly) against `actor`, seq runs 1..n, each
`prev` is the preceding hash, an unsigned event is only a spawn genesis whose cause
resolves, every automated event leads back to its cause, and the process row's head is
the last event. No database, no clock: the same code checks a live process and an
export bundle.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from charter.audit.automated import check_automated_events
from charter.audit.disclosures import check_disclosures
from charter.audit.evidence import (
    EventRow,
    Evidence,
    Problem,
    VerificationReport,
    parse_envelope,
    short,
)
from charter.audit.genesis import check_spawn_genesis
from charter.audit.replay import replay
from charter.core import ijson
from charter.core.canonical import canonical_bytes, sha256_hex
from charter.core.canonical_fast import encodes_to
from charter.core.ed25519 import verify
from charter.core.envelope import Envelope
from charter.core.errors import Malformed
from charter.dsl.canonical import version_hash
from charter.engine.records import ProcessView


def verify_evidence(
    evidence: Evidence,
    *,
    replay_state: bool = False,
    automation_keys: Collection[str] | None = None,
) -> VerificationReport:
    """Every problem of `evidence`; with `replay_state`, also re-derive state and data.

    `automation_keys` pins the keys trusted as the automation actor's in place of the
    ones the evidence lists (an auditor's own copy, not the bundle's claim).
    """
    problems: list[Problem] = []
    # Each text is encoded and hashed once: the event's own check, the next event's link
    # and the head all compare with this digest.
    messages = [event.envelope_text.encode("utf-8") for event in evidence.events]
    digests = [sha256_hex(message) for message in messages]
    envelopes = [
        _check_event(event, message, digest, evidence.process, problems)
        for event, message, digest in zip(evidence.events, messages, digests, strict=True)
    ]
    _check_sequence(evidence.events, envelopes, digests, problems)
    problems.extend(check_spawn_genesis(evidence, envelopes))
    problems.extend(
        check_automated_events(evidence, envelopes, _trusted(evidence, automation_keys))
    )
    _check_head(evidence.process, evidence.events, digests, problems)
    personal = check_disclosures(evidence.events, envelopes, withheld=evidence.disclosures_withheld)
    problems.extend(personal.problems)
    _check_workflows(evidence, problems)
    unverifiable: list[tuple[int, str]] = []
    if replay_state:
        problems.extend(replay(evidence, envelopes, personal.gone, unverifiable))
    erasure = personal.report(unverifiable) if personal.personal else None
    return VerificationReport.of(len(evidence.events), problems, erasure)


def _trusted(evidence: Evidence, pinned: Collection[str] | None) -> frozenset[str] | None:
    if pinned is not None:
        return frozenset(pinned)
    if evidence.automation_keys is None:
        return None
    return frozenset(key.public_key for key in evidence.automation_keys)


# --- one event ---------------------------------------------------------------------------


def _check_event(
    event: EventRow, message: bytes, digest: str, process: ProcessView, problems: list[Problem]
) -> Envelope | None:
    """Check what one event says about itself (`message` is its text's UTF-8 bytes and
    `digest` their hash); its parsed envelope, or None if it has none."""
    seq = event.seq
    if digest != event.hash:
        problems.append(
            Problem(
                seq,
                "hash_mismatch",
                f"stored hash {short(event.hash)} but the envelope hashes to {short(digest)}",
            )
        )
    try:
        envelope = parse_envelope(event.envelope_text)
    except Malformed as exc:
        problems.append(Problem(seq, "bad_envelope", f"the envelope is invalid: {exc.message}"))
        return None
    if envelope.message() != message:
        problems.append(
            Problem(seq, "not_canonical", "the envelope text is not its RFC 8785 canonical form")
        )
    if event.shown_envelope is not None and not _same_json(event.shown_envelope, envelope):
        problems.append(
            Problem(seq, "field_mismatch", "the exported envelope differs from envelope_text")
        )
    if not _fields_agree(event, process, envelope):
        for name, stored, signed in _fields(event, process, envelope):
            if stored != signed:
                problems.append(
                    Problem(
                        seq,
                        "field_mismatch",
                        f"{name} is {stored!r} but the signed envelope says {signed!r}",
                    )
                )
    _check_signature(event, envelope, message, problems)
    return envelope


def _fields_agree(event: EventRow, process: ProcessView, envelope: Envelope) -> bool:
    # The common case in one expression; `_fields` names what differs.
    return (
        event.process_id == envelope.process == process.id
        and event.workflow_path == envelope.workflow == process.workflow
        and event.actor == envelope.actor
        and event.action == envelope.action
        and event.prev_hash == envelope.prev
        and event.cause_hash == envelope.cause
    )


def _fields(
    event: EventRow, process: ProcessView, envelope: Envelope
) -> list[tuple[str, object, object]]:
    # (what, stored value, envelope value): each row copy must agree with what was signed.
    return [
        ("the event's process_id", event.process_id, envelope.process),
        ("the process id", process.id, envelope.process),
        ("the event's workflow_path", event.workflow_path, envelope.workflow),
        ("the process workflow", process.workflow, envelope.workflow),
        ("the event's actor", event.actor, envelope.actor),
        ("the event's action", event.action, envelope.action),
        ("the event's prev_hash", event.prev_hash, envelope.prev),
        ("the event's cause_hash", event.cause_hash, envelope.cause),
    ]


def _same_json(shown: object, envelope: Envelope) -> bool:
    try:
        value = ijson.check_value(shown)
        # The C encoder settles the common case; rfc8785 whatever it cannot.
        return encodes_to(value, envelope.message()) or canonical_bytes(value) == envelope.message()
    except Malformed:
        return False


def _check_signature(
    event: EventRow, envelope: Envelope, message: bytes, problems: list[Problem]
) -> None:
    seq = event.seq
    if event.kind == "spawn":
        # Whether this unsigned event may exist is the genesis check's business.
        if seq != 1:
            problems.append(
                Problem(seq, "unsigned_event", "a spawn genesis is only allowed as seq 1")
            )
        return
    if event.kind != "action":
        problems.append(Problem(seq, "field_mismatch", f"unknown event kind {event.kind!r}"))
    if envelope.cause is not None:
        problems.append(
            Problem(seq, "field_mismatch", "the envelope has a cause but is not a spawn genesis")
        )
    if event.signature is None:
        problems.append(
            Problem(seq, "unsigned_event", "the event is unsigned but is not a spawn genesis")
        )
    elif not verify(envelope.actor, message, event.signature):
        problems.append(
            Problem(
                seq,
                "bad_signature",
                f"the signature does not verify against actor {short(envelope.actor)}",
            )
        )


# --- the chain ---------------------------------------------------------------------------


def _check_sequence(
    events: Sequence[EventRow],
    envelopes: Sequence[Envelope | None],
    digests: Sequence[str],
    problems: list[Problem],
) -> None:
    """seq is 1..n without gaps or repeats, and each prev is the preceding event's hash."""
    expected = 1
    seen: set[int] = set()
    previous: EventRow | None = None
    before = ""
    for event, envelope, digest in zip(events, envelopes, digests, strict=True):
        seq = event.seq
        if seq in seen:
            problems.append(Problem(seq, "seq_duplicate", f"seq {seq} appears more than once"))
        elif seq > expected:
            missing = str(expected) if seq == expected + 1 else f"{expected}..{seq - 1}"
            problems.append(Problem(seq, "seq_gap", f"seq {missing} missing before seq {seq}"))
        elif seq < expected:
            problems.append(Problem(seq, "seq_order", f"seq {seq} comes after seq {expected - 1}"))
        seen.add(seq)
        expected = max(expected, seq + 1)
        prev = envelope.prev if envelope is not None else event.prev_hash
        if previous is None:
            if prev is not None:
                problems.append(
                    Problem(
                        seq, "broken_link", f"the first event's prev is {short(prev)}, not null"
                    )
                )
        else:
            # The link is to what the preceding event's text hashes to (`before`), not to
            # its stored hash column, so a rewritten event breaks the link after it.
            if prev != before:
                problems.append(
                    Problem(
                        seq,
                        "broken_link",
                        f"prev is {short(prev)} but the preceding event "
                        f"(seq {previous.seq}) hashes to {short(before)}",
                    )
                )
        previous = event
        before = digest


def _check_head(
    process: ProcessView,
    events: Sequence[EventRow],
    digests: Sequence[str],
    problems: list[Problem],
) -> None:
    if not events:
        if process.seq != 0 or process.head is not None:
            problems.append(
                Problem(
                    None,
                    "head_mismatch",
                    f"the process row has seq {process.seq} and head {short(process.head)} "
                    "but there are no events",
                )
            )
        return
    last, digest = events[-1], digests[-1]
    if process.seq != last.seq:
        problems.append(
            Problem(
                None,
                "head_mismatch",
                f"the process row has seq {process.seq} but the last event is seq {last.seq}",
            )
        )
    if process.head != digest:
        problems.append(
            Problem(
                None,
                "head_mismatch",
                f"the process head is {short(process.head)} but the last event "
                f"(seq {last.seq}) hashes to {short(digest)}",
            )
        )


def _check_workflows(evidence: Evidence, problems: list[Problem]) -> None:
    for version, definition in evidence.workflows.items():
        try:
            digest = version_hash(definition)
            actual = f"hashes to {short(digest)}"
        except Malformed as exc:
            digest, actual = None, f"cannot be canonicalized ({exc.message})"
        if digest != version:
            problems.append(
                Problem(
                    None,
                    "workflow_hash_mismatch",
                    f"the definition of workflow version {short(version)} {actual}",
                )
            )
    reported: set[str] = set()
    for event in evidence.events:
        version = event.workflow_version
        if version not in evidence.workflows and version not in reported:
            reported.add(version)
            problems.append(
                Problem(
                    event.seq,
                    "missing_workflow",
                    f"workflow version {short(version)} is not in the evidence",
                )
            )
