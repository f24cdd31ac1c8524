"""`process_event`: the one chokepoint through which every change passes (docs/architecture.md).

One transaction per event: the signature is verified before any lock, the process row
is locked, `prev` checked, the rules decided purely (`rules.decide`), then the event,
the new head, spawns, schedules, cancellations and automatic-action queue rows are
written together with a system_log row and NOTIFY hints (delivered at commit). A
rejection changes nothing and is logged with its code in a transaction of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

from charter import wire
from charter.core.clock import Clock, SystemClock
from charter.core.config import Settings
from charter.core.disclosures import parse_disclosure
from charter.core.envelope import Envelope, Submission, verify_submission
from charter.core.errors import (
    BadDisclosure,
    CharterError,
    ClockSkew,
    Duplicate,
    IntegrityViolation,
    StalePrev,
    UnknownActor,
    UnknownProcess,
    UnknownWorkflow,
    WorkflowMismatch,
)
from charter.core.jsontypes import JsonObject
from charter.db.database import Conn, Database, Role, Sync, act_as, pipelined_transaction
from charter.db.hint_sender import HintSender
from charter.db.hints import send_hints
from charter.dsl.model import ERASE_ACTION
from charter.engine import metrics
from charter.engine.cascade import DEFAULT_MAX_AUTO_CASCADE, Cascade
from charter.engine.effects import Effects, Tally, appended_hint
from charter.engine.erasing import plan_erasure
from charter.engine.provenance import already_fired, refuse_if_fired, work_ref, work_row_for
from charter.engine.records import ActorContext, ProcessView
from charter.engine.registry import Registry
from charter.engine.rules import HOLD_SENSITIVE, decide
from charter.engine.store import DecisionInputs, Store
from charter.engine.vacuum import Vacuum
from charter.engine.work import WorkRow
from charter.tracing import span
from charter.wire import engine as shapes

log = logging.getLogger(__name__)

# Codes a submitter can cause; anything else is an engine or database failure.
SUBMISSION_CODES = frozenset(
    {
        "malformed",
        "bad_signature",
        "unknown_actor",
        "forbidden_role",
        "reserved_field",
        "unknown_process",
        "unknown_workflow",
        "unknown_action",
        "stale_prev",
        "duplicate",
        "too_large",
        "wrong_state",
        "condition_failed",
        "invalid_input",
        "workflow_mismatch",
        "clock_skew",
        "not_due",
        "bad_disclosure",
        "personal_in_clear",
    }
)


@dataclass(frozen=True)
class Accepted:
    """The `POST /v1/events` answer: the event's hash and seq and the new process."""

    hash: str
    seq: int
    process: ProcessView

    def to_json(self) -> JsonObject:
        return wire.to_json(self, shapes.Accepted)


class Engine:
    """process_event and the engine's reads, bound to one database."""

    def __init__(
        self,
        database: Database,
        *,
        clock: Clock | None = None,
        max_skew_seconds: float = 300.0,
        max_auto_cascade: int = DEFAULT_MAX_AUTO_CASCADE,
        registry: Registry | None = None,
        hint_sender: HintSender | None = None,
    ) -> None:
        if max_auto_cascade < 1:
            raise ValueError("max_auto_cascade must be at least 1")
        self.database = database
        self.clock = clock or SystemClock()
        self.max_skew = timedelta(seconds=max_skew_seconds)
        self.max_auto_cascade = max_auto_cascade
        self.registry = registry or Registry()
        # Set: hints leave from its thread, after the answer (the API's choice); unset:
        # they are sent before process_event returns, on the event's connection.
        self.hint_sender = hint_sender
        self.vacuum = Vacuum(database.url)

    @classmethod
    def from_settings(
        cls, database: Database, settings: Settings, *, clock: Clock | None = None
    ) -> Engine:
        """An engine with the limits the environment sets (clock skew, cascade limit)."""
        return cls(
            database,
            clock=clock,
            max_skew_seconds=settings.clock_skew_seconds,
            max_auto_cascade=settings.max_auto_cascade,
        )

    def process_event(self, submission: Submission) -> Accepted:
        """Apply one signed event, or raise the CharterError that says why not."""
        envelope = submission.envelope
        attributes = {"charter.process_id": envelope.process, "charter.action": envelope.action,
                      "charter.workflow": envelope.workflow}  # fmt: skip
        with span("charter.process_event", attributes) as current:
            accepted = self._process_event(submission)
            current.set_attribute("charter.seq", accepted.seq)
            return accepted

    def _process_event(self, submission: Submission) -> Accepted:
        started = time.perf_counter()
        envelope = submission.envelope
        try:
            self.check_clock(envelope)
            verify_submission(submission)  # before any lock: a forgery costs no contention
            submission.full_input()  # its disclosures match sd, or bad_disclosure now
            # Pipeline mode: statements whose results are not needed yet travel together
            # (the reads, then the writes with the COMMIT), saving round trips.
            tally = Tally()
            with self.database.connection(Role.ENGINE) as conn:
                try:
                    with pipelined_transaction(conn) as pipeline:
                        store = Store(
                            conn, now=self.clock.now_or_none(), buffered=True, sync=pipeline.sync
                        )
                        accepted = self._apply(store, submission, tally, flush=False)
                        store.send()  # the writes go with the COMMIT: one round trip
                except psycopg.errors.UniqueViolation as exc:
                    raise _duplicate(exc, envelope.hash(), None) from exc
                hints = [*store.returned_hints(), *tally.hints]  # cancels first
                if self.hint_sender is None:
                    send_hints(conn, hints)
            if self.hint_sender is not None:
                self.hint_sender.post(hints)
            if envelope.action == ERASE_ACTION:
                self.vacuum.request()  # the erased texts' row versions are dead now
        except CharterError as exc:
            self.record_rejection(exc, envelope)
            raise
        finally:
            metrics.EVENT_SECONDS.observe(time.perf_counter() - started)
        tally.count()
        return accepted

    def process_within(
        self,
        conn: Conn,
        submission: Submission,
        tally: Tally,
        *,
        caller: Role,
        sync: Sync | None = None,
        held_work: Collection[str] = (),
    ) -> Accepted:
        """Apply one signed event inside the caller's transaction on `conn`, in a savepoint
        of its own and as the engine's role: the automation worker fires a batch of due
        work in one transaction, and a refused event undoes only itself. `held_work` names
        the work rows that transaction locked: the event may fire one of them unclaimed.

        The rules, checks and writes are `process_event`'s own; a refusal is logged in the
        caller's transaction too. `caller` is the role the connection goes back to; the
        caller commits, then counts `tally`."""
        envelope = submission.envelope
        try:
            self.check_clock(envelope)
            verify_submission(submission)
            submission.full_input()
            # `_apply` flushes its writes before it returns, so a refusal by the database
            # is raised inside the savepoint and undoes only this event.
            with conn.transaction():
                act_as(conn, Role.ENGINE)  # undone by the savepoint's rollback on refusal
                store = Store(
                    conn,
                    now=self.clock.now_or_none(),
                    buffered=True,
                    sync=sync,
                    held_work=held_work,
                )
                accepted = self._apply(store, submission, tally)
                tally.hints[:0] = store.returned_hints()  # cancellations come first
            act_as(conn, caller)
        except CharterError as exc:
            if exc.code in SUBMISSION_CODES:
                tally.rejected.append(exc.code)
                with conn.transaction():
                    act_as(conn, Role.ENGINE)
                    store = Store(conn, now=self.clock.now_or_none(), sync=sync)
                    self.log_rejection(store, exc, envelope)
                    act_as(conn, caller)
            raise
        return accepted

    def record_rejection(self, exc: CharterError, envelope: Envelope | None = None) -> None:
        """Write a rejected submission to system_log (its own transaction)."""
        if exc.code not in SUBMISSION_CODES:
            return
        metrics.EVENTS_REJECTED.labels(code=exc.code).inc()
        try:
            with self.database.connection(Role.ENGINE) as conn, conn.transaction():
                self.log_rejection(Store(conn, now=self.clock.now_or_none()), exc, envelope)
        except CharterError:
            # The rejection stands even if the log cannot be written (database down).
            log.warning("could not record rejection %s", exc.code, exc_info=True)

    @staticmethod
    def log_rejection(store: Store, exc: CharterError, envelope: Envelope | None) -> None:
        store.log(
            "event.rejected",
            level="warning",
            code=exc.code,
            process_id=envelope.process if envelope else None,
            actor=envelope.actor if envelope else None,
            action=envelope.action if envelope else None,
            event_hash=envelope.hash() if envelope else None,
            message=exc.message[:1000],
        )

    # --- the transaction -------------------------------------------------------------

    def check_clock(self, envelope: Envelope) -> None:
        skew = abs(envelope.at_datetime() - self.clock.now())
        if skew > self.max_skew:
            raise ClockSkew(
                f"`at` is {skew.total_seconds():.0f} s from the server clock; "
                f"at most {self.max_skew.total_seconds():.0f} s is allowed"
            )

    def _apply(
        self,
        store: Store,
        submission: Submission,
        tally: Tally | None = None,
        *,
        flush: bool = True,
    ) -> Accepted:
        envelope = submission.envelope
        inputs = store.decision_inputs(
            public_key=envelope.actor,
            process_id=envelope.process,
            workflow_path=envelope.workflow,
            lock=envelope.prev is not None,
            work=work_ref(envelope),
        )
        return self.decide_and_write(
            store, submission, inputs, tally if tally is not None else Tally(), flush=flush
        )

    def decide_and_write(
        self,
        store: Store,
        submission: Submission,
        inputs: DecisionInputs,
        tally: Tally,
        *,
        flush: bool = True,
    ) -> Accepted:
        """The rules on `inputs` (read under the process lock), then the writes. With
        `flush`, the writes are sent and waited for before this returns; without, the
        caller flushes (`flush()`) before it commits — a batch of events, one round trip.
        A refusal raised here may follow queued writes (a spawn that cannot happen): the
        caller rolls back to before the event, as `process_event` does."""
        envelope = submission.envelope
        actor = self._actor(envelope.actor, inputs.actor)
        event_hash = envelope.hash()
        if envelope.prev is None:
            process = None
            if inputs.process is not None:
                raise Duplicate(f"process {envelope.process!r} already exists")
        else:
            process = inputs.process
            if process is None:
                raise UnknownProcess(f"no process {envelope.process!r}")
            if process.workflow != envelope.workflow:
                raise WorkflowMismatch(
                    f"process {process.id!r} runs {process.workflow!r}, not {envelope.workflow!r}"
                )
            if process.head != envelope.prev:
                if store.event_by_hash(event_hash) is not None:
                    raise Duplicate(f"event {event_hash} is already recorded")
                raise StalePrev(head=process.head, seq=process.seq)
        if inputs.version is None:
            raise UnknownWorkflow(f"no workflow is deployed at {envelope.workflow!r}")
        version = inputs.version
        workflow = self.registry.workflow(store, version)
        firing = work_row_for(inputs.work, envelope, actor)
        if firing is not None:
            refuse_if_fired(firing)
        work = firing.row if firing is not None else None
        held = envelope.action in HOLD_SENSITIVE and store.held(envelope.process)
        decision = decide(
            process, workflow, envelope, actor, event_hash=event_hash,
            full_input=submission.full_input(), held=held,
        )  # fmt: skip
        data = decision.data
        erasure = None
        if decision.erasure is not None:
            assert process is not None  # an erasure is an update
            erasure = plan_erasure(store, self.registry, process, decision.erasure, process.seq + 1)
            data = erasure.data
        if process is None:
            # A concurrent creation of the same id is refused by the primary key when the
            # writes are answered (`_duplicate`), not waited for here.
            store.create_process(
                process_id=envelope.process, workflow_path=envelope.workflow, state=decision.state
            )
        seq = (process.seq if process is not None else 0) + 1
        # From here on every write is queued; one flush sends them and waits.
        store.insert_event(
            process_id=envelope.process,
            seq=seq,
            event_hash=event_hash,
            prev_hash=envelope.prev,
            kind="action",
            envelope_text=envelope.message().decode("utf-8"),
            signature=submission.signature,
            actor=envelope.actor,
            actor_id=actor.id,
            actor_roles=actor.roles,
            action=envelope.action,
            workflow_path=envelope.workflow,
            workflow_version=version,
        )
        if submission.disclosures:
            # Parsed again: cheap (a JSON array of three), and full_input() matched them.
            disclosed = map(parse_disclosure, submission.disclosures)
            store.insert_disclosures(event_hash, [(d.pointer, d.digest, d.text) for d in disclosed])
        if erasure is not None:
            erased = store.erase_disclosures(event_hash, erasure.targets)
            if erased != len(erasure.targets):  # the process lock rules this out
                raise IntegrityViolation(f"erased {erased} of {len(erasure.targets)} values")
        store.advance_process(
            process_id=envelope.process,
            state=decision.state,
            data=data,
            head_hash=event_hash,
            seq=seq,
        )
        if work is not None:
            store.insert_firing(work, event_hash)
        tally.hints.append(appended_hint(envelope.process, seq, event_hash, envelope.action, actor))
        cascade = Cascade.after(work, event_hash)
        Effects(self.registry, self.max_auto_cascade).persist(
            store, envelope, event_hash, actor, decision, cascade, tally, depth=0
        )
        # No system_log row for an accepted event: the events table is that log.
        if flush:
            self.flush(store, event_hash, work)
        tally.accepted += 1
        after = ProcessView(
            id=envelope.process,
            workflow=envelope.workflow,
            state=decision.state,
            data=data,
            head=event_hash,
            seq=seq,
            parent=process.parent if process is not None else None,
            parent_event=process.parent_event if process is not None else None,
            created_at=process.created_at if process is not None else inputs.now,
            updated_at=inputs.now,
            revision=inputs.revision,
        )
        return Accepted(event_hash, seq, after)

    @staticmethod
    def flush(store: Store, event_hash: str | None = None, work: WorkRow | None = None) -> None:
        """Send the queued writes and wait; a unique key's refusal becomes `duplicate`."""
        try:
            store.flush()
        except psycopg.errors.UniqueViolation as exc:
            raise _duplicate(exc, event_hash, work) from exc

    @staticmethod
    def _actor(
        public_key: str,
        found: tuple[str, tuple[str, ...], datetime | None, datetime | None] | None,
    ) -> ActorContext:
        if found is None:
            raise UnknownActor(f"no actor has the key {public_key}")
        actor_id, roles, retired_at, disabled_at = found
        if retired_at is not None:
            raise UnknownActor(f"the key {public_key} of {actor_id!r} was retired")
        if disabled_at is not None:
            raise UnknownActor(f"actor {actor_id!r} is disabled")
        return ActorContext(actor_id, public_key, roles)


def _duplicate(
    exc: psycopg.errors.UniqueViolation, event_hash: str | None, work: WorkRow | None
) -> Duplicate | BadDisclosure:
    """What a unique key refusing an event's writes means (the checks before the writes
    make this a race: another transaction did the same first)."""
    constraint = exc.diag.constraint_name or ""
    if constraint.startswith("automation_firings") and work is not None:
        return already_fired(work, None)
    if constraint == "event_disclosures_digest_key":
        return BadDisclosure(
            "a disclosure's digest is stored already: its salt was used before (each "
            "disclosure needs a fresh random salt)"
        )
    if constraint == "events_hash_key":
        return Duplicate(f"event {event_hash or ''} is already recorded")
    if constraint == "processes_pkey":
        return Duplicate(f"process {_key_value(exc)!r} already exists")
    return Duplicate(exc.diag.message_primary or "it already exists", constraint=constraint)


def _key_value(exc: psycopg.errors.UniqueViolation) -> str:
    """The value a unique key refused, from PostgreSQL's "Key (id)=(value) already exists."."""
    detail = exc.diag.message_detail or ""
    _, _, rest = detail.partition(")=(")
    return rest.rpartition(") already exists")[0] or "?"
