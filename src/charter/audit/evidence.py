"""What verification reads and what it reports (docs/wire-format.md).

`Evidence` is everything needed to check one process: its row, its events with every
stored column, the workflow definitions they name, the events that caused spawn
geneses and the automation actor's keys. It comes from the database or from an export
bundle, so the checks that run over it are the same in both places.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from charter import wire
from charter.core.envelope import Envelope
from charter.core.jsontypes import JsonObject, JsonValue
from charter.engine.records import ProcessView
from charter.wire import engine as shapes

# Every problem code a report can carry (docs/verification.md explains each one).
CODES = frozenset(
    {
        "hash_mismatch",
        "not_canonical",
        "bad_envelope",
        "field_mismatch",
        "bad_signature",
        "unsigned_event",
        "seq_gap",
        "seq_duplicate",
        "seq_order",
        "broken_link",
        "bad_cause",
        "head_mismatch",
        "workflow_hash_mismatch",
        "missing_workflow",
        "replay_rejected",
        "replay_mismatch",
        # The personal values of v2 events (charter.audit.disclosures).
        "disclosure_missing",
        "disclosure_mismatch",
        "erasure_incomplete",
        "malformed_bundle",
        "provenance_malformed",
        "provenance_actor",
        "provenance_cause_missing",
        "provenance_cause_order",
        "provenance_cause_mismatch",
        "provenance_undeclared",
        "provenance_duplicate",
        "provenance_inconsistent",
        # Checks against a transparency-log mirror (charter.audit.log_check).
        "log_truncated",
        "log_fork",
        "not_logged",
        "log_equivocation",
        "log_rollback",
        "checkpoint_equivocation",
        "checkpoint_untrusted",
        "log_proof_invalid",
        "tile_missing",
        "process_missing",
        "witness_unreachable",
    }
)


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored event with every column the events table keeps.

    `envelope_text` is the exact text that was hashed and signed; `actor`, `action`,
    `workflow_path`, `prev_hash` and `cause_hash` are the row's copies of envelope fields,
    and `actor_id`/`actor_roles` the decision context (unsigned: the engine's record).
    """

    process_id: str
    seq: int
    hash: str
    prev_hash: str | None
    kind: str
    envelope_text: str
    signature: str | None
    actor: str
    actor_id: str
    actor_roles: tuple[str, ...]
    action: str
    workflow_path: str
    workflow_version: str
    cause_hash: str | None
    received_at: str | None
    # The parsed envelope an export shows beside its text; None when read from the database.
    shown_envelope: JsonValue | None = None
    # The workflow revision the event was decided under (unsigned, like `actor_roles`);
    # None in an export written before revisions were recorded.
    workflow_revision: int | None = None
    # The disclosure texts kept for a v2 event's personal fields, by pointer (unsigned:
    # the envelope's `sd` commits to each by digest). Absent ones are not listed.
    disclosures: Mapping[str, str] = field(default_factory=dict)
    # The erase event each erased disclosure names, by pointer (the database's record;
    # an export does not carry it: coverage is read from the chain).
    erased_by: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ActorKey:
    """A public key an actor holds or held: a retired key still verifies what it signed."""

    public_key: str
    added_at: str | None = None
    retired_at: str | None = None

    def to_json(self) -> JsonObject:
        return {
            "public_key": self.public_key,
            "added_at": self.added_at,
            "retired_at": self.retired_at,
        }


@dataclass(frozen=True)
class Evidence:
    """One process and everything needed to verify it."""

    process: ProcessView
    events: tuple[EventRow, ...]
    workflows: Mapping[str, JsonValue]  # version → definition
    causes: Mapping[str, EventRow]  # hash → event that caused a spawn genesis
    # Every key the automation actor holds or held; None when the evidence does not say
    # (an export written before bundles carried `actors`).
    automation_keys: tuple[ActorKey, ...] | None = None
    # An export made without its personal values (`--withhold-personal`).
    disclosures_withheld: bool = False


@dataclass(frozen=True)
class Problem:
    """One thing wrong: the event's seq (None for the process or the evidence as a whole)."""

    seq: int | None
    code: str
    message: str

    def to_json(self) -> JsonObject:
        return wire.to_json(self, shapes.Problem)


@dataclass(frozen=True)
class VerificationReport:
    """The result of verifying one process: `ok` exactly when there are no problems."""

    ok: bool
    events: int
    problems: tuple[Problem, ...]
    # What became of personal values; None for a process without any (envelope v1 only).
    erasure: Mapping[str, object] | None = None

    @classmethod
    def of(
        cls, events: int, problems: list[Problem], erasure: Mapping[str, object] | None = None
    ) -> VerificationReport:
        ordered = sorted(problems, key=_problem_order)
        return cls(ok=not ordered, events=events, problems=tuple(ordered), erasure=erasure)

    def to_json(self) -> JsonObject:
        """The `GET /v1/processes/{id}/verify` body (docs/api.md)."""
        shown: dict[str, object] = {"ok": self.ok, "events": self.events,
                                    "problems": self.problems}  # fmt: skip
        if self.erasure is not None:
            shown["erasure"] = self.erasure
        return wire.to_json(shown, shapes.Verification)


def _problem_order(problem: Problem) -> tuple[Any, ...]:
    # Process-wide problems first, then by seq; the order of discovery within a seq holds.
    return (problem.seq is not None, problem.seq or 0)


def parse_envelope(text: str) -> Envelope:
    """The envelope in `text` (strict I-JSON, every v1 rule), or Malformed."""
    return Envelope.from_text(text)


def short(digest: str | None) -> str:
    """A hash shortened for messages (12 hex characters are plenty to tell them apart)."""
    if digest is None:
        return "null"
    return digest[:12] + "…" if len(digest) > 12 else digest
