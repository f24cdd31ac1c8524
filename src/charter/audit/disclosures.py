"""The personal values of v2 events: each one kept matches its digest in the signed `sd`,
and none is missing (docs/verification.md).

The envelope commits to each personal field by the SHA-256 of its disclosure, so a kept
disclosure is checked by hashing it, with no key. A value that is not kept at all was
removed outside Charter's rules: there is no governed way to remove one yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from charter.audit.evidence import EventRow, Problem
from charter.core.disclosures import join_disclosures, parse_disclosure
from charter.core.envelope import Envelope
from charter.core.errors import BadDisclosure
from charter.core.jsontypes import JsonObject


def check_disclosures(
    events: Sequence[EventRow], envelopes: Sequence[Envelope | None]
) -> list[Problem]:
    """`disclosure_missing` for each committed field without its disclosure, and
    `disclosure_mismatch` for each kept one that is not what `sd` commits to."""
    problems: list[Problem] = []
    for event, envelope in zip(events, envelopes, strict=True):
        if envelope is None:
            continue  # bad_envelope says so
        committed = envelope.sd or {}
        for pointer, digest in sorted(committed.items()):
            text = event.disclosures.get(pointer)
            if text is None:
                problems.append(
                    Problem(
                        event.seq,
                        "disclosure_missing",
                        f"the disclosure of {pointer} is missing: the personal value the "
                        "event commits to is not kept, and no erasure removed it",
                    )
                )
            elif not _matches(text, pointer, digest):
                problems.append(
                    Problem(
                        event.seq,
                        "disclosure_mismatch",
                        f"the disclosure kept for {pointer} is not the one sd commits to",
                    )
                )
        for pointer in sorted(set(event.disclosures) - set(committed)):
            problems.append(
                Problem(
                    event.seq,
                    "disclosure_mismatch",
                    f"a disclosure is kept for {pointer}, which the envelope does not commit to",
                )
            )
    return problems


def replay_input(event: EventRow, envelope: Envelope) -> JsonObject:
    """The input the event was decided on: a v2 envelope's `input` with its kept
    disclosures joined in. BadDisclosure when one is missing or does not match."""
    if envelope.sd is None:
        return envelope.input
    return join_disclosures(envelope.input, envelope.sd, list(event.disclosures.values()))


def _matches(text: str, pointer: str, digest: str) -> bool:
    try:
        disclosure = parse_disclosure(text)
    except BadDisclosure:
        return False
    return disclosure.pointer == pointer and disclosure.digest == digest
