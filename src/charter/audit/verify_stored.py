"""Verify a process's hash chain and export it for offline audit (docs/wire-format.md and
docs/api.md).

`verify_process` and `export_bundle` read one consistent snapshot as the reader role, in
a handful of queries whatever the number of events (no per-event round trips);
`verify_bundle` needs no database at all. Both run the same pure checks (`verify.py`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import psycopg

from charter.audit.bundle import bundle_json, evidence_from_bundle
from charter.audit.bundle_log import BundleTrust, check_bundle_log, logged_member
from charter.audit.evidence import ActorKey, EventRow, Evidence, Problem, VerificationReport
from charter.audit.genesis import MAX_CAUSE_DEPTH
from charter.audit.verify_evidence import verify_evidence
from charter.audit.withhold import withhold_personal as withheld
from charter.core import ijson
from charter.core.errors import Malformed, UnknownProcess
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339
from charter.db.database import Database, Role
from charter.db.queries import query
from charter.engine.records import AUTOMATION_ACTOR_ID, ProcessView
from charter.engine.store import Store
from charter.tlog.logdir import LogDirectory

__all__ = [
    "Problem",
    "VerificationReport",
    "export_bundle",
    "load_evidence",
    "process_ids",
    "verify_bundle",
    "verify_bundle_log",
    "verify_process",
]

Conn = psycopg.Connection[tuple[Any, ...]]
_LOG_POLL_SECONDS = 0.1


def verify_process(
    database: Database, process_id: str, *, replay: bool = False
) -> VerificationReport:
    """Verify a stored process (UnknownProcess if there is none); `replay` re-derives state."""
    return verify_evidence(load_evidence(database, process_id), replay_state=replay)


def export_bundle(
    database: Database,
    process_id: str,
    log: LogDirectory | None = None,
    wait_log: float = 0.0,
    *,
    withhold_personal: bool = False,
) -> JsonObject:
    """The bundle of a stored process (UnknownProcess if there is none): `charter-export/1`,
    or `/2` when `log` (the deployment's log directory) has a checkpoint, carrying the
    tlog-proof of the last logged event; `wait_log` seconds are given to the sequencer to
    log the head first. `withhold_personal` leaves every personal value out."""
    evidence = load_evidence(database, process_id)
    if withhold_personal:
        evidence = withheld(evidence)
    if log is None or not log.exists():
        return bundle_json(evidence)
    deadline = time.monotonic() + wait_log
    while True:
        with database.connection(Role.READER) as conn:
            member = logged_member(conn, log, evidence)
        if member.unlogged == 0 or time.monotonic() >= deadline:
            return bundle_json(evidence, member.to_json())
        time.sleep(_LOG_POLL_SECONDS)


def verify_bundle(
    bundle: JsonValue, *, replay: bool = False, automation_keys: Collection[str] | None = None
) -> VerificationReport:
    """Verify an export bundle with no database; a bundle of the wrong shape is one problem.

    `automation_keys` are the automation actor's keys as the auditor knows them; without
    them, the keys the bundle itself lists are trusted.
    """
    try:
        evidence = evidence_from_bundle(bundle)
    except Malformed as exc:
        return VerificationReport.of(0, [Problem(None, "malformed_bundle", exc.message)])
    return verify_evidence(evidence, replay_state=replay, automation_keys=automation_keys)


def verify_bundle_log(
    bundle: JsonValue,
    report: VerificationReport,
    trust: BundleTrust,
    now: datetime | None = None,
) -> tuple[VerificationReport, JsonObject | None]:
    """`report` (of `verify_bundle`) with the problems of the bundle's log proof added, and
    the report's `log` object; None for a bundle without a log. Offline, like the rest."""
    try:
        evidence = evidence_from_bundle(bundle)
        problems, log = check_bundle_log(
            bundle, evidence.events, evidence.process.id, trust, now or datetime.now(UTC)
        )
    except Malformed as exc:
        if not report.ok and any(p.code == "malformed_bundle" for p in report.problems):
            return report, None  # already said
        problems, log = [Problem(None, "malformed_bundle", exc.message)], None
    return VerificationReport.of(report.events, [*report.problems, *problems]), log


def process_ids(database: Database) -> list[str]:
    """Every process id, oldest first."""
    with database.connection(Role.READER) as conn:
        return [str(row[0]) for row in conn.execute(query("all_process_ids"))]


def load_evidence(database: Database, process_id: str) -> Evidence:
    """A process, its events, their definitions, spawn causes and the automation actor's
    keys, as of one snapshot."""
    with database.connection(Role.READER) as conn, conn.transaction():
        # A repeatable-read snapshot: an event committed between two of these reads
        # would otherwise look like a head that does not match its events.
        conn.execute(query("begin_snapshot"))
        process = Store(conn).get_process(process_id)
        if process is None:
            raise UnknownProcess(f"no process {process_id!r}")
        rows = conn.execute(query("verification_events"), {"process_id": process_id})
        events = tuple(map(_event_row, rows.fetchall()))  # fetchall: no per-row cursor call
        events = _with_disclosures(conn, process_id, events)
        causes = _causes(conn, process, events)
        versions = {event.workflow_version for event in events}
        versions |= {event.workflow_version for event in causes.values()}
        workflows = _definitions(conn, versions)
        automation_keys = _actor_keys(conn, AUTOMATION_ACTOR_ID)
    return Evidence(
        process=process,
        events=events,
        workflows=workflows,
        causes=causes,
        automation_keys=automation_keys,
    )


def _with_disclosures(
    conn: Conn, process_id: str, events: tuple[EventRow, ...]
) -> tuple[EventRow, ...]:
    """`events` with the disclosure texts kept for them, and the erase event the database
    names for each one erased."""
    kept: dict[str, dict[str, str]] = {}
    erased: dict[str, dict[str, str]] = {}
    for row in Store(conn).disclosures(process_id):
        if row.text is not None:
            kept.setdefault(row.event_hash, {})[row.pointer] = row.text
        elif row.erased_by is not None:
            erased.setdefault(row.event_hash, {})[row.pointer] = row.erased_by
    if not kept and not erased:
        return events
    return tuple(
        replace(event, disclosures=kept.get(event.hash, {}), erased_by=erased.get(event.hash, {}))
        if event.hash in kept or event.hash in erased
        else event
        for event in events
    )


def _causes(conn: Conn, process: ProcessView, events: tuple[EventRow, ...]) -> dict[str, EventRow]:
    """The events that caused the genesis, following nested spawns to a signed event.

    Every hash that claims to be a cause is fetched (the process row's, the row column's
    and the envelope's), so a disagreement between them is visible to the verifier.
    """
    wanted = {process.parent_event}
    if events:
        wanted |= {events[0].cause_hash, _declared_cause(events[0].envelope_text)}
    found: dict[str, EventRow] = {}
    for _ in range(MAX_CAUSE_DEPTH + 1):
        missing = sorted(h for h in wanted if h is not None and h not in found)
        if not missing:
            break
        fetched = [
            _event_row(row)
            for row in conn.execute(query("verification_events_by_hash"), {"hashes": missing})
        ]
        found |= {event.hash: event for event in fetched}
        wanted = {event.cause_hash for event in fetched}
        wanted |= {_declared_cause(event.envelope_text) for event in fetched}
    return found


def _declared_cause(text: str) -> str | None:
    try:
        value = ijson.loads(text)
    except Malformed:
        return None
    cause = value.get("cause") if isinstance(value, dict) else None
    return cause if isinstance(cause, str) else None


def _definitions(conn: Conn, versions: Iterable[str]) -> dict[str, JsonValue]:
    found: dict[str, JsonValue] = {}
    rows = conn.execute(query("verification_definitions"), {"versions": sorted(versions)})
    for version, text in rows:
        try:
            found[str(version)] = ijson.loads(str(text))
        except Malformed:
            # The json column keeps what I-JSON refuses (duplicate keys): keep the text
            # itself, whose hash cannot be the version, so the verifier reports it.
            found[str(version)] = str(text)
    return found


def _actor_keys(conn: Conn, actor_id: str) -> tuple[ActorKey, ...]:
    rows = conn.execute(query("verification_actor_keys"), {"actor_id": actor_id})
    return tuple(
        ActorKey(str(key), _time(added_at), _time(retired_at)) for key, added_at, retired_at in rows
    )


def _time(moment: Any) -> str | None:
    return format_rfc3339(moment) if moment is not None else None


def _event_row(row: tuple[Any, ...]) -> EventRow:
    return EventRow(
        process_id=str(row[0]),
        seq=int(row[1]),
        hash=str(row[2]),
        prev_hash=row[3],
        kind=str(row[4]),
        envelope_text=str(row[5]),
        signature=row[6],
        actor=str(row[7]),
        actor_id=str(row[8]),
        actor_roles=tuple(row[9]),
        action=str(row[10]),
        workflow_path=str(row[11]),
        workflow_version=str(row[12]),
        cause_hash=row[13],
        received_at=_time(row[14]),
        workflow_revision=row[15],
    )
