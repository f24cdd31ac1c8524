"""An export without personal values (`charter export --withhold-personal`): for an
auditor who may check everything but must not see the personal data.

The bundle keeps every signed byte, so it verifies in full; it carries no disclosure,
and the process data it shows is derived again from the events with each personal value
withheld, so that what was computed from one reads `{"withheld": true}` (and what was
erased, `{"erased": true}`, as stored). Replay reports the checks it cannot make without
the values as unverifiable.
"""

from __future__ import annotations

from dataclasses import replace

from charter.audit.disclosures import check_disclosures
from charter.audit.evidence import Evidence, Problem, parse_envelope
from charter.audit.replay import rederive
from charter.core.canonical import canonical_bytes
from charter.core.envelope import Envelope
from charter.core.errors import IntegrityViolation, Malformed


def withhold_personal(evidence: Evidence) -> Evidence:
    """`evidence` without its disclosures, its process data derived without them.
    IntegrityViolation when the stored data is not what the events give: then the
    derived data would hide that, and the process needs verifying first."""
    envelopes = [_envelope(event.envelope_text) for event in evidence.events]
    stripped = tuple(replace(event, disclosures={}, erased_by={}) for event in evidence.events)
    withheld = replace(evidence, events=stripped, disclosures_withheld=True)
    findings = check_disclosures(stripped, envelopes, withheld=True)
    if not findings.personal:
        return withheld
    full = check_disclosures(evidence.events, envelopes)
    as_stored = rederive(evidence, envelopes, full.gone)
    if isinstance(as_stored, Problem) or canonical_bytes(as_stored.data()) != canonical_bytes(
        evidence.process.data
    ):
        raise IntegrityViolation(
            f"the stored data of {evidence.process.id!r} is not what its events give: "
            "verify it (charter verify --replay) before exporting it without personal values"
        )
    derived = rederive(withheld, envelopes, findings.gone)
    if isinstance(derived, Problem):
        raise IntegrityViolation(
            f"cannot derive the data of {evidence.process.id!r} without its personal "
            f"values: {derived.message}"
        )
    return replace(withheld, process=replace(evidence.process, data=derived.data()))


def _envelope(text: str) -> Envelope | None:
    try:
        return parse_envelope(text)
    except Malformed:
        return None
