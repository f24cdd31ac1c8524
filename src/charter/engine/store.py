"""The engine's reads and writes: one typed method per named query (River's driver).

A Store wraps one connection inside the caller's transaction; it never commits.
Rows come out as frozen records, never raw tuples.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from charter.core.ijson import loads
from charter.core.jsontypes import JsonObject, JsonValue
from charter.core.timefmt import format_rfc3339, parse_rfc3339
from charter.db.database import Sync, answered
from charter.db.hints import Hint
from charter.db.payloads import dumps_payload
from charter.db.queries import query
from charter.engine.records import ProcessView, StoredEvent
from charter.engine.work import SCHEDULED_ACTION, QueueRow, ScheduledRow, WorkRow

Conn = psycopg.Connection[tuple[Any, ...]]


# (kind, work id) of the work row an automated event names in its provenance.
WorkRef = tuple[str, str]


@dataclass(frozen=True)
class FiringWork:
    """The work row an automated event fires, as the engine reads it at fire time."""

    row: WorkRow
    due: bool  # its occurrence is due by the engine's clock
    fired_event: str | None  # the event that already fired this occurrence, if one did
    # Held by this transaction (a batch read it through hold_*_v1: no other transaction may
    # change it now): an unclaimed row may fire — the lock is the claim. Otherwise a
    # leased claim must name the firer.
    held: bool = False


@dataclass(frozen=True)
class DecisionInputs:
    actor: tuple[str, tuple[str, ...], datetime | None, datetime | None] | None
    process: ProcessView | None
    version: str | None
    now: datetime  # the transaction's clock: what the writes will record
    work: FiringWork | None  # the work row named (None if none was, or it does not exist)
    revision: int | None = None  # of `version` at the path, for the answer


@dataclass
class BatchInputs:
    """`DecisionInputs` for many events; the batch keeps them current as it writes."""

    actor: tuple[str, tuple[str, ...], datetime | None, datetime | None] | None
    processes: dict[str, ProcessView]
    versions: dict[str, str]
    now: datetime
    work: dict[str, FiringWork]


@dataclass(frozen=True)
class DisclosureRow:
    """One row of charter.event_disclosures: `text` None once `erased_by` erased it."""

    event_hash: str
    pointer: str
    digest: str
    text: str | None
    erased_by: str | None


class Store:
    def __init__(
        self,
        conn: Conn,
        *,
        now: datetime | None = None,
        buffered: bool = False,
        sync: Sync | None = None,
        held_work: Collection[str] = (),
    ) -> None:
        self.conn = conn
        self.sync = sync  # the outermost pipeline's, when in one (see db.database.answered)
        self.now = now  # None: the database clock decides
        # Work rows the caller's transaction locked (a worker's batch): those may fire
        # while still active or pending, since no other transaction can take them.
        self.held_work = frozenset(held_work)
        # Buffered, writes wait in `_ops` until `send()`/`flush()`: one apply_writes_v1
        # call carries them all. Unbuffered, each write is sent as it is made.
        self.buffered = buffered
        self._ops: list[dict[str, Any]] = []
        self._sent: list[psycopg.Cursor[Any]] = []  # apply_writes calls, for their hints
        self.writes = 0  # writes made through this store, sent or waiting

    def _read(self, name: str, params: dict[str, Any] | None = None) -> psycopg.Cursor[Any]:
        """Run one read and wait for it with a Sync (see `answered`)."""
        with answered(self.conn, self.sync):
            return self.conn.execute(query(name), params or {})

    def _write(self, op: str, **fields: Any) -> None:
        self.writes += 1
        self._ops.append({"op": op, "now": self.now, **fields})
        if not self.buffered:
            self.send()

    def send(self) -> None:
        """Queue the waiting writes as one statement (nothing is waited for)."""
        if self._ops:
            ops, self._ops = self._ops, []
            self._sent.append(self.conn.execute(query("apply_writes"), {"ops": dumps_payload(ops)}))

    def returned_hints(self) -> list[Hint]:
        """The wake-up hints the sent writes produced in SQL (cancellations); call once
        they have been answered (after a flush or the COMMIT)."""
        found: list[Hint] = []
        for cursor in self._sent:
            row = cursor.fetchone()
            found.extend((str(c), str(p)) for c, p in (row[0] if row and row[0] else []))
        self._sent.clear()
        return found

    # --- actors and workflows --------------------------------------------------------

    def actor_for_key(
        self, public_key: str
    ) -> tuple[str, tuple[str, ...], datetime | None, datetime | None] | None:
        row = self._read("actor_for_key", {"public_key": public_key}).fetchone()
        if row is None:
            return None
        return str(row[0]), tuple(row[1]), row[2], row[3]

    def decision_inputs(
        self,
        *,
        public_key: str,
        process_id: str,
        workflow_path: str,
        lock: bool,
        work: WorkRef | None = None,
    ) -> DecisionInputs:
        """Everything an event is decided on, sent together (one round trip in pipeline
        mode): the signer's actor, the process (locked when `lock`), the current workflow
        version, the transaction's clock and, for an automated event, its work row."""
        with answered(self.conn, self.sync):
            actor = self.conn.execute(query("actor_for_key"), {"public_key": public_key})
            process = self.conn.execute(
                query("lock_process" if lock else "get_process"), {"id": process_id}
            )
            version = self.conn.execute(query("current_workflow_version"), {"path": workflow_path})
            clock = self.conn.execute(query("transaction_now")) if self.now is None else None
            found = None
            if work is not None:
                kind, work_id = work
                name = "scheduled_work_for_firing"
                if kind != SCHEDULED_ACTION:
                    name = "queue_work_for_firing"
                found = self.conn.cursor(row_factory=dict_row)
                found.execute(query(name), {"id": work_id, "now": self.now})
        actor_row, process_row, version_row = (
            actor.fetchone(),
            process.fetchone(),
            version.fetchone(),
        )
        now = self.now if clock is None else clock.fetchone()[0]  # type: ignore[index]
        work_row = found.fetchone() if found is not None else None
        return DecisionInputs(
            actor=(str(actor_row[0]), tuple(actor_row[1]), actor_row[2], actor_row[3])
            if actor_row
            else None,
            process=process_from_row(process_row) if process_row else None,
            version=str(version_row[0]) if version_row else None,
            now=cast(datetime, now),
            work=_firing_work(work_row, held=work is not None and work[1] in self.held_work)
            if work_row is not None
            else None,
            revision=int(version_row[1]) if version_row else None,
        )

    def batch_inputs(
        self,
        *,
        public_key: str,
        process_ids: Sequence[str],
        workflow_paths: Sequence[str],
        work: Sequence[WorkRef],
    ) -> BatchInputs:
        """What a batch of automated events is decided on, read at once (one round trip
        in pipeline mode): the signer's actor, the processes (locked), their workflows'
        current versions, the transaction's clock and the work rows the events fire."""
        with answered(self.conn, self.sync):
            actor = self.conn.execute(query("actor_for_key"), {"public_key": public_key})
            processes = self.conn.execute(query("batch_processes"), {"ids": list(process_ids)})
            versions = self.conn.execute(
                query("batch_workflow_versions"), {"paths": list(workflow_paths)}
            )
            clock = self.conn.execute(query("transaction_now")) if self.now is None else None
            scheduled = [work_id for kind, work_id in work if kind == SCHEDULED_ACTION]
            queued = [work_id for kind, work_id in work if kind != SCHEDULED_ACTION]
            lanes = [
                self.conn.cursor(row_factory=dict_row).execute(
                    query(name), {"ids": ids, "now": self.now}
                )
                for name, ids in (("batch_scheduled_work", scheduled), ("batch_queue_work", queued))
                if ids
            ]
        actor_row = actor.fetchone()
        found = {str(row[0]): process_from_row(row) for row in processes.fetchall()}
        current = {str(path): str(version) for path, version in versions.fetchall()}
        now = self.now if clock is None else clock.fetchone()[0]  # type: ignore[index]
        rows = [_firing_work(row, held=True) for lane in lanes for row in lane.fetchall()]
        return BatchInputs(
            actor=(str(actor_row[0]), tuple(actor_row[1]), actor_row[2], actor_row[3])
            if actor_row
            else None,
            processes=found,
            versions=current,
            now=cast(datetime, now),
            work={str(w.row.id): w for w in rows},
        )

    def flush(self) -> None:
        """Send every waiting write and wait for them: a refusal by the database (a unique
        key, a trigger) is raised here, not at some later statement or the COMMIT."""
        self.send()
        with answered(self.conn, self.sync):
            pass

    def current_workflow_version(self, path: str) -> str | None:
        row = self._read("current_workflow_version", {"path": path}).fetchone()
        return str(row[0]) if row else None

    def workflow_definition_text(self, version: str) -> str | None:
        row = self._read("workflow_definition", {"version": version}).fetchone()
        return str(row[0]) if row else None

    # --- processes -------------------------------------------------------------------

    def lock_process(self, process_id: str) -> ProcessView | None:
        row = self._read("lock_process", {"id": process_id}).fetchone()
        return process_from_row(row) if row else None

    def get_process(self, process_id: str) -> ProcessView | None:
        row = self._read("get_process", {"id": process_id}).fetchone()
        return process_from_row(row) if row else None

    def child_processes(self, process_id: str) -> list[ProcessView]:
        rows = self._read("child_processes", {"id": process_id}).fetchall()
        return [process_from_row(r) for r in rows]

    def insert_process(
        self,
        *,
        process_id: str,
        workflow_path: str,
        state: str,
        parent_id: str | None = None,
        parent_event_hash: str | None = None,
    ) -> bool:
        """Insert a head-less process row; False when the id is already taken (waits for
        the answer, after sending the writes made before it)."""
        self.send()
        self.writes += 1
        with answered(self.conn, self.sync):
            cursor = self.conn.execute(
                query("insert_process"),
                {
                    "id": process_id,
                    "workflow_path": workflow_path,
                    "state": state,
                    "data": Jsonb({}),
                    "parent_id": parent_id,
                    "parent_event_hash": parent_event_hash,
                    "now": self.now,
                },
            )
        return cursor.fetchone() is not None

    def advance_process(
        self, *, process_id: str, state: str, data: JsonObject, head_hash: str, seq: int
    ) -> None:
        self._write(
            "advance_process", id=process_id, state=state, data=data, head_hash=head_hash, seq=seq
        )

    # --- events ----------------------------------------------------------------------

    def create_process(self, *, process_id: str, workflow_path: str, state: str) -> None:
        """Queue a top-level process row before its first event, nothing waited for: a taken
        id is refused by the primary key (`processes_pkey`) when the writes are answered,
        which saves a creation the round trip `insert_process` waits for."""
        self.send()  # the writes made before it go first
        self.writes += 1
        self.conn.execute(
            query("create_process"),
            {
                "id": process_id,
                "workflow_path": workflow_path,
                "state": state,
                "data": Jsonb({}),
                "now": self.now,
            },
        )

    def insert_event(
        self,
        *,
        process_id: str,
        seq: int,
        event_hash: str,
        prev_hash: str | None,
        kind: str,
        envelope_text: str,
        signature: str | None,
        actor: str,
        actor_id: str,
        actor_roles: Sequence[str],
        action: str,
        workflow_path: str,
        workflow_version: str,
        cause_hash: str | None = None,
    ) -> None:
        self._write(
            "insert_event",
            process_id=process_id,
            seq=seq,
            hash=event_hash,
            prev_hash=prev_hash,
            kind=kind,
            envelope=envelope_text,
            signature=signature,
            actor=actor,
            actor_id=actor_id,
            actor_roles=list(actor_roles),
            action=action,
            workflow_path=workflow_path,
            workflow_version=workflow_version,
            cause_hash=cause_hash,
        )

    def insert_disclosures(
        self, event_hash: str, disclosures: Sequence[tuple[str, str, str]]
    ) -> None:
        """Store an event's (pointer, digest, text) disclosures. The queued writes, the
        event among them, go first: each row references its event."""
        self.send()
        payload = [{"pointer": p, "digest": d, "disclosure": t} for p, d, t in disclosures]
        self.writes += 1
        self.conn.execute(
            query("insert_disclosures"),
            {"event_hash": event_hash, "disclosures": dumps_payload(payload)},
        )

    def erase_disclosures(self, event_hash: str, targets: Sequence[tuple[str, str]]) -> int:
        """Erase the (event hash, pointer) disclosures for the erase event `event_hash`,
        sent after the queued writes (the event among them); how many were erased."""
        self.send()
        self.writes += 1
        payload = [{"event": event, "pointer": pointer} for event, pointer in targets]
        row = self._read(
            "erase_disclosures", {"event_hash": event_hash, "targets": dumps_payload(payload)}
        ).fetchone()
        return int(row[0]) if row else 0

    def held(self, process_id: str) -> bool:
        """Whether the process is under legal hold: its later hold or release is a hold."""
        row = self._read("legal_hold", {"process_id": process_id}).fetchone()
        return bool(row and row[0])

    def disclosures(self, process_id: str) -> list[DisclosureRow]:
        """Every disclosure row of a process's events, kept or erased, in event order."""
        return [
            DisclosureRow(str(h), str(p), str(d), t, e)
            for h, p, d, t, e in self._read("event_disclosures", {"process_id": process_id})
        ]

    def kept_disclosures(self, process_id: str) -> dict[str, dict[str, str]]:
        """The disclosure texts kept for a process's events: event hash -> pointer ->
        text (an erased one is not kept)."""
        kept: dict[str, dict[str, str]] = {}
        for row in self.disclosures(process_id):
            if row.text is not None:
                kept.setdefault(row.event_hash, {})[row.pointer] = row.text
        return kept

    def process_events(self, process_id: str) -> list[StoredEvent]:
        rows = self._read("process_events", {"process_id": process_id}).fetchall()
        return [event_from_row(r) for r in rows]

    def event_by_hash(self, event_hash: str) -> StoredEvent | None:
        row = self._read("event_by_hash", {"hash": event_hash}).fetchone()
        return event_from_row(row) if row else None

    # --- automation work ---------------------------------------------------------------

    def cancel_schedules(
        self, *, process_id: str, schedule_ids: Sequence[str], event_hash: str, reason: str
    ) -> None:
        """Cancel live rows, each with its NOTIFY hint (sent from SQL: only it knows them)."""
        self._write(
            "cancel_schedules",
            process_id=process_id,
            schedule_ids=list(schedule_ids),
            event_hash=event_hash,
            reason=reason,
        )

    def cancel_migrated_work(
        self,
        *,
        process_id: str,
        actions: Sequence[str],
        schedule_ids: Sequence[str],
        event_hash: str,
        listed_reason: str,
        orphan_reason: str,
    ) -> None:
        """A migration's cancellations: the live schedules in `schedule_ids`, and every live
        schedule or queue row whose action is not one of `actions`, each with its hint.
        Sent after the writes queued before it (the event it names goes first)."""
        self.send()
        self.writes += 1
        self._sent.append(
            self.conn.execute(
                query("cancel_migrated_work"),
                {
                    "process_id": process_id,
                    "actions": list(actions),
                    "schedule_ids": list(schedule_ids),
                    "event_hash": event_hash,
                    "listed_reason": listed_reason,
                    "orphan_reason": orphan_reason,
                    "now": self.now,
                },
            )
        )

    def insert_schedule(
        self,
        *,
        work_id: str,
        schedule_id: str,
        process_id: str,
        workflow_path: str,
        action_name: str,
        action_data: JsonObject,
        run_at: datetime,
        interval: str | None,
        until: datetime | None,
        max_count: int | None,
        event_hash: str,
        action: str,
        actor: str,
    ) -> None:
        self._write(
            "insert_schedule",
            id=work_id,
            schedule_id=schedule_id,
            process_id=process_id,
            workflow_path=workflow_path,
            action_name=action_name,
            action_data=action_data,
            run_at=run_at,
            interval=interval,
            until_ts=until,
            max_count=max_count,
            event_hash=event_hash,
            action=action,
            actor=actor,
        )

    def insert_auto_work(
        self,
        *,
        work_id: str,
        process_id: str,
        workflow_path: str,
        action_name: str,
        action_data: JsonObject,
        available_state: str,
        event_hash: str,
        action: str,
        actor: str,
        cascade_depth: int = 0,
        cascade_origin: str | None = None,
        error: str | None = None,
        reason: str = "auto action became available",
    ) -> None:
        """Queue an automatic action (written failed when `error` says why it cannot
        fire); nothing happens if this event already queued it."""
        self._write(
            "insert_auto_work",
            id=work_id,
            process_id=process_id,
            workflow_path=workflow_path,
            action_name=action_name,
            action_data=action_data,
            reason=reason,
            available_state=available_state,
            event_hash=event_hash,
            action=action,
            actor=actor,
            cascade_depth=cascade_depth,
            cascade_origin=cascade_origin,
            error=error,
        )

    def cascade_chain(self, process_id: str, origin: str) -> list[str]:
        """The actions of `process_id`'s events from `origin` on (empty if it is elsewhere),
        the event being written included."""
        self.send()  # a read after writes must see them
        rows = self._read("cascade_chain", {"process_id": process_id, "origin": origin}).fetchall()
        return [str(r[0]) for r in rows]

    def insert_firing(self, row: WorkRow, event_hash: str) -> None:
        """Record the occurrence `row` fired; if it had fired already, the flush raises
        a unique violation."""
        self._write(
            "insert_firing",
            work_id=row.id,
            kind=row.kind,
            occurrence=row.occurrence,
            process_id=row.process_id,
            event_hash=event_hash,
        )

    def process_work(self, process_id: str) -> tuple[list[JsonObject], list[JsonObject]]:
        """(scheduled rows, queue rows) of a process, as JSON objects."""
        scheduled: list[JsonObject] = []
        queue: list[JsonObject] = []
        for lane, row in self.conn.execute(query("process_work"), {"process_id": process_id}):
            (scheduled if lane == "scheduled" else queue).append(_api_times(row))
        return scheduled, queue

    # --- log and notifications --------------------------------------------------------

    def log(
        self,
        kind: str,
        *,
        level: str = "info",
        code: str | None = None,
        process_id: str | None = None,
        actor: str | None = None,
        action: str | None = None,
        event_hash: str | None = None,
        message: str = "",
        detail: JsonObject | None = None,
    ) -> None:
        self._write(
            "log",
            level=level,
            kind=kind,
            code=code,
            process_id=process_id,
            actor=actor,
            action=action,
            event_hash=event_hash,
            message=message,
            detail=detail or {},
        )


def _firing_work(row: dict[str, Any], *, held: bool = False) -> FiringWork:
    record: WorkRow = (
        ScheduledRow.from_dict(row) if "schedule_id" in row else QueueRow.from_dict(row)
    )
    fired = row["fired_event"]
    fired_event = str(fired) if fired is not None else None
    return FiringWork(record, bool(row["due"]), fired_event, held=held)


def process_from_row(row: tuple[Any, ...]) -> ProcessView:
    return ProcessView(
        id=row[0],
        workflow=row[1],
        state=row[2],
        data=cast(JsonObject, row[3]),
        head=row[4],
        seq=int(row[5]),
        parent=row[6],
        parent_event=row[7],
        created_at=row[8],
        updated_at=row[9],
        revision=row[10] if len(row) > 10 else None,
    )


def event_from_row(row: tuple[Any, ...]) -> StoredEvent:
    text = str(row[3])
    envelope: JsonValue = loads(text)
    return StoredEvent(
        process_id=row[0],
        seq=int(row[1]),
        hash=row[2],
        envelope_text=text,
        envelope=cast(JsonObject, envelope),
        signature=row[4],
        kind=row[5],
        workflow_version=row[6],
        received_at=row[7],
        actor_id=row[8],
        actor_roles=tuple(row[9]),
        workflow_revision=row[10],
    )


# The timestamptz columns of scheduled_actions and automation_queue: to_jsonb writes them
# as PostgreSQL prints them (+00:00, microseconds); the API speaks RFC 3339 UTC with
# milliseconds everywhere (docs/api.md).
_WORK_TIMES = frozenset(
    {"cancelled_at", "claimed_at", "completed_at", "created_at", "last_attempt_at",
     "last_fired_at", "lease_expires_at", "not_before", "queued_at", "run_at", "until_ts"}
)  # fmt: skip


def _api_times(row: JsonObject) -> JsonObject:
    return {
        key: format_rfc3339(parse_rfc3339(value))
        if key in _WORK_TIMES and isinstance(value, str)
        else value
        for key, value in row.items()
    }
