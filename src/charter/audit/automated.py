"""Automated events under verification: every `input.meta.automation` leads to its cause.

docs/automation.md: a fired event carries provenance copied from the durable work row the
engine wrote, and the engine checks it against that row at fire time. An auditor has
no work rows, only the chain, so here the evidence alone must show the same things:

- the provenance has exactly the row's shape (`ScheduledRow.provenance` and
  `QueueRow.provenance` in engine/work.py) and says it was fired by `automation`;
- the event is the automation actor's: recorded so, and signed by one of its keys;
- the cause is an earlier event of this chain with the action and actor the provenance
  names (the engine records a spawned process's work as caused by its own events, its
  genesis included, never by the parent's);
- the cause's action declared the work in the workflow version it was decided against:
  a `schedule` entry with this id targeting this action, or this action as `auto` (a
  recurring schedule keeps its scheduling event as its cause, so this holds every time);
- one work occurrence fires once (a scheduled row once per `run_at`, a queue row once),
  and every firing of one row tells the same story about it.

No database and no clock: the same checks run over a live process and an export bundle.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from charter.audit.evidence import EventRow, Evidence, Problem, short
from charter.core.canonical import sha256_hex
from charter.core.envelope import Envelope
from charter.core.jsontypes import JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.engine.records import AUTOMATION_ACTOR_ID
from charter.engine.rules import has_automation_meta
from charter.engine.work import AUTO_ACTION, SCHEDULED_ACTION

_HEX64 = re.compile("[0-9a-f]{64}")


def _is_name(value: JsonValue) -> bool:
    return isinstance(value, str) and value != ""


def _is_text(value: JsonValue) -> bool:
    return isinstance(value, str)


def _is_hex64(value: JsonValue) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def _is_uuid(value: JsonValue) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _is_time(value: JsonValue) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse_rfc3339(value)
    except TimeFormatError:
        return False
    return True


def _is_automation(value: JsonValue) -> bool:
    return value == AUTOMATION_ACTOR_ID


def _is_state(value: JsonValue) -> bool:
    return value is None or _is_name(value)


_Rule = tuple[Callable[[JsonValue], bool], str]
_HASH: _Rule = (_is_hex64, "64 lowercase hex characters")
_KEY: _Rule = (_is_hex64, "a public key (64 lowercase hex characters)")
_TIME: _Rule = (_is_time, "an RFC 3339 timestamp")
_SHARED: dict[str, _Rule] = {
    "work_id": (_is_uuid, "a UUID in its canonical form"),
    "fired_by_actor": (_is_automation, repr(AUTOMATION_ACTOR_ID)),
    "worker": (_is_name, "a worker id"),
}
# Every field of each kind besides `kind`, as engine/work.py writes them: no more, no less.
FIELDS: Mapping[str, Mapping[str, _Rule]] = {
    SCHEDULED_ACTION: _SHARED
    | {
        "schedule_id": (_is_name, "a schedule id"),
        "scheduled_by_event_hash": _HASH,
        "scheduled_by_action": (_is_name, "an action name"),
        "scheduled_by_actor": _KEY,
        "scheduled_at": _TIME,
        "run_at": _TIME,
    },
    AUTO_ACTION: _SHARED
    | {
        "queued_by_event_hash": _HASH,
        "queued_by_action": (_is_name, "an action name"),
        "queued_by_actor": _KEY,
        "queued_at": _TIME,
        "available_state": (_is_state, "a state or null"),
        "reason": (_is_text, "a string"),
    },
}
_CAUSE = {SCHEDULED_ACTION: "scheduled_by", AUTO_ACTION: "queued_by"}
_PER_FIRING = frozenset({"run_at", "worker"})  # what may differ between firings of one row


@dataclass(frozen=True)
class _Claim:
    """The well-formed provenance of one automated event."""

    seq: int
    action: str  # the action the event fired
    kind: str
    meta: Mapping[str, JsonValue]

    def _text(self, name: str) -> str:
        return str(self.meta[name])

    @property
    def cause_hash(self) -> str:
        return self._text(f"{_CAUSE[self.kind]}_event_hash")

    @property
    def cause_action(self) -> str:
        return self._text(f"{_CAUSE[self.kind]}_action")

    @property
    def cause_actor(self) -> str:
        return self._text(f"{_CAUSE[self.kind]}_actor")

    @property
    def work_id(self) -> str:
        return self._text("work_id")

    @property
    def occurrence(self) -> tuple[str, datetime | None]:
        """A scheduled row fires once per run_at (recurrences), a queue row once."""
        if self.kind == SCHEDULED_ACTION:
            return self.work_id, parse_rfc3339(self._text("run_at"))
        return self.work_id, None

    def row_facts(self) -> dict[str, JsonValue]:
        return {key: value for key, value in self.meta.items() if key not in _PER_FIRING}


_Linked = tuple[EventRow, Envelope | None]


def check_automated_events(
    evidence: Evidence,
    envelopes: Sequence[Envelope | None],
    automation_keys: Collection[str] | None,
) -> list[Problem]:
    """Problems of every event whose input carries meta.automation.

    `automation_keys` are the keys trusted as the automation actor's; None when nothing
    says which they are (then no automated event can be confirmed).
    """
    linked = list(zip(evidence.events, envelopes, strict=True))
    # A bad envelope is reported already; an ordinary event claims nothing.
    automated = [
        (event, envelope)
        for event, envelope in linked
        if envelope is not None and has_automation_meta(envelope.input)
    ]
    if not automated:
        return []
    # Causes are found by what their text hashes to, as links are: not by a stored column.
    chain: dict[str, _Linked] = {
        sha256_hex(event.envelope_text.encode("utf-8")): (event, envelope)
        for event, envelope in linked
    }
    problems: list[Problem] = []
    first_firing: dict[str, _Claim] = {}  # work_id → the first event that fired the row
    fired_at: dict[tuple[str, datetime | None], int] = {}  # occurrence → seq
    for event, envelope in automated:
        problems.extend(_actor_problems(event, envelope, automation_keys))
        claim = _claim(event, envelope, problems)
        if claim is None:
            continue
        problems.extend(_cause_problems(claim, chain, evidence))
        problems.extend(_repeat_problems(claim, first_firing, fired_at))
    return problems


def _actor_problems(
    event: EventRow, envelope: Envelope, keys: Collection[str] | None
) -> list[Problem]:
    seq, problems = event.seq, []
    if event.actor_id != AUTOMATION_ACTOR_ID:
        problems.append(
            Problem(
                seq,
                "provenance_actor",
                f"the event carries meta.automation but was decided as actor "
                f"{event.actor_id!r}, not {AUTOMATION_ACTOR_ID!r}",
            )
        )
    if keys is None:
        problems.append(
            Problem(
                seq,
                "provenance_actor",
                f"no automation key is known to check the signer {short(envelope.actor)} "
                "against (the evidence lists none: pin one with --automation-key)",
            )
        )
    elif envelope.actor not in keys:
        problems.append(
            Problem(
                seq,
                "provenance_actor",
                f"the event is signed by {short(envelope.actor)}, which is not one of the "
                f"{len(keys)} trusted automation key(s)",
            )
        )
    return problems


def _claim(event: EventRow, envelope: Envelope, problems: list[Problem]) -> _Claim | None:
    """The event's provenance if it is well formed; otherwise its problems are added."""
    holder = envelope.input["meta"]
    meta = holder.get("automation") if isinstance(holder, dict) else None
    if not isinstance(meta, dict):
        problems.append(
            Problem(event.seq, "provenance_malformed", "input.meta.automation must be an object")
        )
        return None
    kind = meta.get("kind")
    if not isinstance(kind, str) or kind not in FIELDS:
        problems.append(
            Problem(
                event.seq,
                "provenance_malformed",
                f"input.meta.automation.kind must be {SCHEDULED_ACTION!r} or {AUTO_ACTION!r}, "
                f"not {kind!r}",
            )
        )
        return None
    fields = FIELDS[kind]
    wrong = [f"{name} is missing" for name in fields if name not in meta]
    wrong += [
        f"{name} must be {what}, not {meta[name]!r}"
        for name, (valid, what) in fields.items()
        if name in meta and not valid(meta[name])
    ]
    wrong += [
        f"{name} is not a field of {kind}"
        for name in sorted(meta.keys() - fields.keys() - {"kind"})
    ]
    problems.extend(
        Problem(event.seq, "provenance_malformed", f"input.meta.automation.{what}")
        for what in wrong
    )
    return None if wrong else _Claim(event.seq, envelope.action, kind, meta)


# --- the cause -----------------------------------------------------------------------------


def _cause_problems(
    claim: _Claim, chain: Mapping[str, _Linked], evidence: Evidence
) -> list[Problem]:
    seq, wanted = claim.seq, claim.cause_hash
    found = chain.get(wanted)
    if found is None:
        return [Problem(seq, "provenance_cause_missing", _missing(wanted, evidence))]
    cause, envelope = found
    if cause.seq >= seq:
        return [
            Problem(
                seq,
                "provenance_cause_order",
                f"the cause {short(wanted)} is seq {cause.seq}, not an earlier event",
            )
        ]
    if envelope is None:
        return []  # the cause's bad_envelope says what is wrong with it
    mismatches = [
        f"{_CAUSE[claim.kind]}_{name} is {claimed!r} but the cause (seq {cause.seq}) has {actual!r}"
        for name, claimed, actual in (
            ("action", claim.cause_action, envelope.action),
            ("actor", claim.cause_actor, envelope.actor),
        )
        if claimed != actual
    ]
    if mismatches:
        return [Problem(seq, "provenance_cause_mismatch", "; ".join(mismatches))]
    undeclared = _undeclared(claim, cause, envelope, evidence)
    return [Problem(seq, "provenance_undeclared", undeclared)] if undeclared else []


def _missing(wanted: str, evidence: Evidence) -> str:
    elsewhere = evidence.causes.get(wanted)
    if elsewhere is not None:
        return (
            f"the cause {short(wanted)} is an event of {elsewhere.process_id!r}, not of this "
            "chain: a process's automated work is caused by its own events"
        )
    return f"the cause {short(wanted)} is not an event of this chain"


def _undeclared(
    claim: _Claim, cause: EventRow, envelope: Envelope, evidence: Evidence
) -> str | None:
    """Why the cause's recorded workflow version did not create this work, if it did not."""
    definition = evidence.workflows.get(cause.workflow_version)
    if definition is None:
        return None  # missing_workflow is reported at the cause's seq
    version = short(cause.workflow_version)
    if claim.kind == SCHEDULED_ACTION:
        schedule_id = claim.meta["schedule_id"]
        entries = _action(definition, envelope.action).get("schedule")
        declared = isinstance(entries, list) and any(
            isinstance(entry, dict)
            and entry.get("id") == schedule_id
            and entry.get("action") == claim.action
            for entry in entries
        )
        if declared:
            return None
        return (
            f"the cause's action {envelope.action!r} (workflow version {version}) declares "
            f"no schedule {schedule_id!r} of {claim.action!r}"
        )
    if _action(definition, claim.action).get("auto", False) not in (False, None):
        return None
    return (
        f"{claim.action!r} is not an automatic action of workflow version {version}, "
        "which its cause was decided against"
    )


def _action(definition: JsonValue, name: str) -> Mapping[str, JsonValue]:
    actions = definition.get("actions") if isinstance(definition, dict) else None
    action = actions.get(name) if isinstance(actions, dict) else None
    return action if isinstance(action, dict) else {}


# --- repeats ---------------------------------------------------------------------------------


def _repeat_problems(
    claim: _Claim,
    first_firing: dict[str, _Claim],
    fired_at: dict[tuple[str, datetime | None], int],
) -> list[Problem]:
    earlier = fired_at.setdefault(claim.occurrence, claim.seq)
    first = first_firing.setdefault(claim.work_id, claim)
    if earlier != claim.seq:
        _, run_at = claim.occurrence
        what = f"work row {claim.work_id}" + (f" for {claim.meta['run_at']}" if run_at else "")
        return [
            Problem(claim.seq, "provenance_duplicate", f"{what} already fired at seq {earlier}")
        ]
    facts, before = claim.row_facts(), first.row_facts()
    differing = sorted(
        key for key in facts.keys() | before.keys() if facts.get(key) != before.get(key)
    )
    if not differing:
        return []
    return [
        Problem(
            claim.seq,
            "provenance_inconsistent",
            f"work row {claim.work_id} fired at seq {first.seq} with a different "
            + ", ".join(differing),
        )
    ]
