"""The personal values of v2 events: each one kept matches its digest in the signed `sd`,
each one gone was erased by a `charter:erase` in the chain (or withheld from an export),
and each erase event removed all it covers (docs/verification.md).

The envelope commits to each personal field by the SHA-256 of its disclosure, so a kept
disclosure is checked by hashing it, with no key. Which values an erase event covers is
read from the chain alone — its signed scope, over the values no earlier erase event
took — never from what the database says, so a deleted value cannot pass for an erased one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from charter.audit.evidence import EventRow, Problem
from charter.core.disclosures import parse_disclosure
from charter.core.envelope import Envelope
from charter.core.errors import BadDisclosure, CharterError
from charter.dsl.erased import WITHHELD, Erased
from charter.dsl.erasure import EraseInput
from charter.dsl.model import ERASE_ACTION

Key = tuple[str, str]  # (event hash, pointer)


@dataclass(frozen=True)
class Eraser:
    """The erase event that covers a value."""

    seq: int
    hash: str
    basis: str


@dataclass
class DisclosureFindings:
    """What the disclosure check found: its problems, the report's lists, and for replay
    the marker that stands for each value that is gone, by event hash and pointer."""

    problems: list[Problem] = field(default_factory=list)
    erased: list[tuple[int, str, int, str]] = field(default_factory=list)  # seq, ptr, by, basis
    withheld: list[tuple[int, str]] = field(default_factory=list)
    gone: dict[str, dict[str, Erased]] = field(default_factory=dict)
    personal: bool = False  # some event has personal fields

    def report(self, unverifiable: Sequence[tuple[int, str]] = ()) -> dict[str, object]:
        return {
            "erased": [
                {"seq": seq, "pointer": pointer, "by_seq": by, "basis": basis}
                for seq, pointer, by, basis in self.erased
            ],
            "withheld": [{"seq": seq, "pointer": pointer} for seq, pointer in self.withheld],
            "unverifiable": [{"seq": seq, "why": why} for seq, why in unverifiable],
        }


def covered_by(
    events: Sequence[EventRow], envelopes: Sequence[Envelope | None]
) -> dict[Key, Eraser]:
    """Which erase event covers each committed value: the first after it whose scope
    names it, as the engine resolves a scope over the values not yet erased."""
    waiting: dict[Key, None] = {}
    found: dict[Key, Eraser] = {}
    for event, envelope in zip(events, envelopes, strict=True):
        if envelope is None:
            continue
        if envelope.action == ERASE_ACTION:
            erase = _erase_input(envelope)
            if erase is not None:
                for key in [key for key in waiting if erase.covers(*key)]:
                    found[key] = Eraser(event.seq, event.hash, erase.basis)
                    del waiting[key]
        for pointer in envelope.sd or {}:
            waiting[(event.hash, pointer)] = None
    return found


def check_disclosures(
    events: Sequence[EventRow],
    envelopes: Sequence[Envelope | None],
    *,
    withheld: bool = False,
) -> DisclosureFindings:
    """Each committed value is kept and matches, or was erased by an erase event that
    covers it, or (`withheld`: an export without personal values) was left out."""
    findings = DisclosureFindings()
    covers = covered_by(events, envelopes)
    seq_of = {event.hash: event.seq for event in events}
    for event, envelope in zip(events, envelopes, strict=True):
        if envelope is None:
            continue  # bad_envelope says so
        committed = envelope.sd or {}
        findings.personal = findings.personal or bool(committed)
        for pointer, digest in sorted(committed.items()):
            _check_one(findings, event, pointer, digest, covers.get((event.hash, pointer)), seq_of,
                       withheld)  # fmt: skip
        for pointer in sorted(set(event.disclosures) - set(committed)):
            findings.problems.append(
                Problem(
                    event.seq,
                    "disclosure_mismatch",
                    f"a disclosure is kept for {pointer}, which the envelope does not commit to",
                )
            )
    return findings


def _check_one(
    findings: DisclosureFindings,
    event: EventRow,
    pointer: str,
    digest: str,
    eraser: Eraser | None,
    seq_of: Mapping[str, int],
    withheld: bool,
) -> None:
    seq, problems = event.seq, findings.problems
    text = event.disclosures.get(pointer)
    if text is not None:
        if not _matches(text, pointer, digest):
            shown = f"the disclosure kept for {pointer} is not the one sd commits to"
            problems.append(Problem(seq, "disclosure_mismatch", shown))
        elif eraser is not None:
            problems.append(
                Problem(
                    eraser.seq,
                    "erasure_incomplete",
                    f"this erase event covers {pointer} of seq {seq}, whose disclosure is "
                    "still kept",
                )
            )
        return
    recorded = event.erased_by.get(pointer)
    if eraser is not None and recorded in (None, eraser.hash):
        findings.erased.append((seq, pointer, eraser.seq, eraser.basis))
        findings.gone.setdefault(event.hash, {})[pointer] = Erased(eraser.seq)
    elif eraser is None and recorded is None and withheld:
        findings.withheld.append((seq, pointer))
        findings.gone.setdefault(event.hash, {})[pointer] = Erased(WITHHELD)
    elif recorded is not None:
        by = f"seq {seq_of[recorded]}" if recorded in seq_of else "an event outside the chain"
        problems.append(
            Problem(
                seq,
                "disclosure_missing",
                f"the disclosure of {pointer} is recorded as erased by {by}, which is not the "
                "erase event that covers it",
            )
        )
    else:
        problems.append(
            Problem(
                seq,
                "disclosure_missing",
                f"the disclosure of {pointer} is missing: the personal value the event commits "
                "to is not kept, and no erasure removed it",
            )
        )


def _erase_input(envelope: Envelope) -> EraseInput | None:
    # The engine checked the input against the fixed schema; a chain tampered with may
    # hold anything, and then the event covers nothing (replay refuses it).
    try:
        return EraseInput.of(envelope.input)
    except (CharterError, KeyError, AssertionError, TypeError):
        return None


def _matches(text: str, pointer: str, digest: str) -> bool:
    try:
        disclosure = parse_disclosure(text)
    except BadDisclosure:
        return False
    return disclosure.pointer == pointer and disclosure.digest == digest
