"""The export bundle, `charter-export/1` and `/2`: Evidence as one JSON document
(docs/verification.md).

An auditor verifies a bundle offline with nothing else: it carries the process row, every
event with its exact envelope text, the workflow definitions the events were decided
against (and the causes' definitions), the events that caused spawn geneses, and the
automation actor's keys (`actors`, current and retired) that automated events are signed
with. Reading a bundle checks shapes and types only; what the values mean is the
verifier's job. `actors` is always written but optional when read: bundles exported
before it existed stay readable (their automated events then need pinned keys).

A v2 event (one with personal fields) also carries `disclosures`, the disclosure texts kept
for it by pointer, and a bundle with such events says `disclosures_withheld`: true when
it was exported without them (charter.audit.withhold). v1 events have neither, so
their bundles read as before.

A deployment with a transparency log exports `charter-export/2`: the same members plus
`log`, the C2SP tlog-proof of the last logged event (`charter.audit.bundle_log` builds and
checks it). Without a log the bundle stays `charter-export/1`, byte for byte as before.
"""

from __future__ import annotations

from datetime import datetime

from charter.audit.evidence import ActorKey, EventRow, Evidence
from charter.core import ijson
from charter.core.errors import Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import TimeFormatError, parse_rfc3339
from charter.engine.records import AUTOMATION_ACTOR_ID, ProcessView

FORMAT = "charter-export/1"
FORMAT_LOGGED = "charter-export/2"
FORMATS = (FORMAT, FORMAT_LOGGED)


def bundle_json(evidence: Evidence, log: JsonObject | None = None) -> JsonObject:
    """The bundle of `evidence`; with `log` (the deployment has a log), `charter-export/2`."""
    events = [event_json(event) for event in evidence.events]
    bundle: JsonObject = {
        "format": FORMAT if log is None else FORMAT_LOGGED,
        "process": process_json(evidence.process),
        "events": list(events),
        "workflows": dict(sorted(evidence.workflows.items())),
        "causes": {key: event_json(event) for key, event in sorted(evidence.causes.items())},
    }
    if evidence.automation_keys is not None:
        bundle["actors"] = actors_json(evidence.automation_keys)
    if evidence.disclosures_withheld or any("disclosures" in event for event in events):
        bundle["disclosures_withheld"] = evidence.disclosures_withheld
    if log is not None:
        bundle["log"] = log
    return bundle


def actors_json(automation_keys: tuple[ActorKey, ...]) -> JsonObject:
    """The `actors` member: actor id → its keys, for the automation actor."""
    return {AUTOMATION_ACTOR_ID: {"keys": [key.to_json() for key in automation_keys]}}


def process_json(process: ProcessView) -> JsonObject:
    """The `<process>` shape of docs/wire-format.md plus `parent_event`, the hash that
    spawned it."""
    return process.to_json() | {"parent_event": process.parent_event}


def event_json(event: EventRow) -> JsonObject:
    """A stored event (docs/wire-format.md) with its exact `envelope_text` and the row's columns."""
    try:
        shown: JsonValue = ijson.loads(event.envelope_text)
    except Malformed:
        shown = None  # the text itself is the evidence; the verifier names what is wrong
    found = _event_json(event, shown)
    if isinstance(shown, dict) and "sd" in shown:
        found["disclosures"] = dict(sorted(event.disclosures.items()))
    return found


def _event_json(event: EventRow, shown: JsonValue) -> JsonObject:
    return {
        "seq": event.seq,
        "hash": event.hash,
        "envelope": shown,
        "signature": event.signature,
        "kind": event.kind,
        "workflow_version": event.workflow_version,
        "revision": event.workflow_revision,
        "received_at": event.received_at,
        "actor_id": event.actor_id,
        "actor_roles": list(event.actor_roles),
        "envelope_text": event.envelope_text,
        "process_id": event.process_id,
        "prev_hash": event.prev_hash,
        "actor": event.actor,
        "action": event.action,
        "workflow_path": event.workflow_path,
        "cause_hash": event.cause_hash,
    }


def evidence_from_bundle(bundle: JsonValue) -> Evidence:
    """Read a bundle; Malformed names the first field that has the wrong shape."""
    top = _Object(bundle, "bundle")
    if top.value.get("format") not in FORMATS:
        raise Malformed(f"bundle.format must be {FORMAT!r} or {FORMAT_LOGGED!r}")
    if top.value.get("format") == FORMAT_LOGGED:
        top.get("log")  # its shape is checked with the log proof (charter.audit.bundle_log)
    events_value = top.value.get("events")
    if not isinstance(events_value, list):
        raise Malformed("bundle.events must be an array")
    workflows = top.member_object("workflows")
    causes = top.member_object("causes")
    return Evidence(
        process=_process(top.value.get("process")),
        events=tuple(_event(item, f"bundle.events[{i}]") for i, item in enumerate(events_value)),
        workflows=dict(workflows),
        causes={key: _event(item, f"bundle.causes[{key[:16]!r}]") for key, item in causes.items()},
        automation_keys=_automation_keys(top),
        disclosures_withheld=_withheld(top),
    )


def _withheld(top: _Object) -> bool:
    """Whether the bundle says it was exported without personal values."""
    value = top.value.get("disclosures_withheld", False)
    if not isinstance(value, bool):
        raise Malformed("bundle.disclosures_withheld must be true or false")
    return value


def _automation_keys(top: _Object) -> tuple[ActorKey, ...] | None:
    """The automation actor's keys the bundle lists; None for a bundle without `actors`."""
    if "actors" not in top.value:
        return None
    found: tuple[ActorKey, ...] = ()
    for actor_id, value in top.member_object("actors").items():
        where = f"bundle.actors[{actor_id[:32]!r}]"
        items = _Object(value, where).get("keys")
        if not isinstance(items, list):
            raise Malformed(f"{where}.keys must be an array")
        keys = tuple(_actor_key(item, f"{where}.keys[{i}]") for i, item in enumerate(items))
        if actor_id == AUTOMATION_ACTOR_ID:
            found = keys
    return found


def _actor_key(value: JsonValue, where: str) -> ActorKey:
    row = _Object(value, where)
    row.time("added_at")
    row.time("retired_at")
    return ActorKey(
        public_key=row.text("public_key"),
        added_at=row.optional_text("added_at"),
        retired_at=row.optional_text("retired_at"),
    )


class _Object:
    """Typed reads of one JSON object's members, each failure naming `where.member`."""

    def __init__(self, value: JsonValue, where: str) -> None:
        if not isinstance(value, dict):
            raise Malformed(f"{where} must be an object")
        self.value = value
        self.where = where

    def _fail(self, name: str, what: str) -> Malformed:
        return Malformed(f"{self.where}.{name} must be {what}")

    def get(self, name: str) -> JsonValue:
        """A member that must be present (null allowed where the type says so)."""
        if name not in self.value:
            raise Malformed(f"{self.where}.{name} is missing")
        return self.value[name]

    def text(self, name: str) -> str:
        value = self.get(name)
        if not isinstance(value, str):
            raise self._fail(name, "a string")
        return value

    def optional_text(self, name: str) -> str | None:
        value = self.get(name)
        if value is not None and not isinstance(value, str):
            raise self._fail(name, "a string or null")
        return value

    def integer(self, name: str) -> int:
        value = self.get(name)
        if type(value) is not int:
            raise self._fail(name, "an integer")
        return value

    def optional_integer(self, name: str) -> int | None:
        """A member that may be absent (an older export) or null."""
        value = self.value.get(name)
        if value is not None and type(value) is not int:
            raise self._fail(name, "an integer or null")
        return value

    def member_object(self, name: str) -> JsonObject:
        value = self.get(name)
        if not isinstance(value, dict):
            raise self._fail(name, "an object")
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        value = self.get(name)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._fail(name, "an array of strings")
        return tuple(item for item in value if isinstance(item, str))

    def time(self, name: str) -> datetime | None:
        text = self.optional_text(name)
        try:
            return parse_rfc3339(text) if text is not None else None
        except TimeFormatError:
            raise self._fail(name, "an RFC 3339 timestamp or null") from None


def _process(value: JsonValue) -> ProcessView:
    row = _Object(value, "bundle.process")
    return ProcessView(
        id=row.text("id"),
        workflow=row.text("workflow"),
        state=row.text("state"),
        data=row.member_object("data"),
        head=row.optional_text("head"),
        seq=row.integer("seq"),
        parent=row.optional_text("parent"),
        parent_event=row.optional_text("parent_event"),
        created_at=row.time("created_at"),
        updated_at=row.time("updated_at"),
    )


def _event(value: JsonValue, where: str) -> EventRow:
    row = _Object(value, where)
    return EventRow(
        process_id=row.text("process_id"),
        seq=row.integer("seq"),
        hash=row.text("hash"),
        prev_hash=row.optional_text("prev_hash"),
        kind=row.text("kind"),
        envelope_text=row.text("envelope_text"),
        signature=row.optional_text("signature"),
        actor=row.text("actor"),
        actor_id=row.text("actor_id"),
        actor_roles=row.texts("actor_roles"),
        action=row.text("action"),
        workflow_path=row.text("workflow_path"),
        workflow_version=row.text("workflow_version"),
        cause_hash=row.optional_text("cause_hash"),
        received_at=row.optional_text("received_at"),
        shown_envelope=row.get("envelope"),
        workflow_revision=row.optional_integer("revision"),
        disclosures=_disclosures(row),
    )


def _disclosures(row: _Object) -> dict[str, str]:
    """A v2 event's kept disclosure texts by pointer; none for an event without them."""
    if "disclosures" not in row.value:
        return {}
    found = row.member_object("disclosures")
    if not all(isinstance(text, str) for text in found.values()):
        raise Malformed(f"{row.where}.disclosures must map pointers to disclosure texts")
    return {pointer: text for pointer, text in found.items() if isinstance(text, str)}
