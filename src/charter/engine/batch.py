"""Automated events in batches: their inputs read once, their writes sent once.

The automation worker fires a batch of due work in one transaction (charter/firing/batch.py).
`EngineBatch` is the engine's side of it. The rules and the writes are `process_event`'s
own (`Engine.decide_and_write`); what changes is the round trips: the actor, the
processes (locked), their current workflow versions and the work rows of the whole
batch are read in one, each event's writes are queued, and `flush()` sends them all and
waits once. The batch keeps what it read current as it goes: an event sees the head,
state and data the previous one on its process left, and an occurrence fired earlier
in the batch is refused as `duplicate` like one fired before it.

A refusal the rules raise before any write (wrong state, a condition, a forgery...) is
logged in the transaction and leaves the batch as it was. A refusal raised after some of
an event's writes were queued (a spawn that cannot happen), or by the database at the
flush, cannot be undone alone: `BatchAborted`, and the caller rolls the whole batch back
and fires its rows one savepoint at a time instead (`Engine.process_within`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from charter.core.envelope import Submission, verify_submission
from charter.core.errors import CharterError
from charter.db.database import Conn, Sync
from charter.engine.effects import Tally
from charter.engine.process_event import SUBMISSION_CODES, Accepted, Engine
from charter.engine.provenance import work_ref
from charter.engine.store import DecisionInputs, Store, WorkRef


class BatchAborted(CharterError):
    """An event of the batch cannot be undone alone: roll the batch back."""

    code = "batch_aborted"
    retryable = True


class EngineBatch:
    """Decides and writes automated events for one batch transaction (engine role)."""

    def __init__(
        self,
        engine: Engine,
        conn: Conn,
        *,
        public_key: str,
        process_ids: Sequence[str],
        workflow_paths: Sequence[str],
        work: Sequence[WorkRef],
        sync: Sync | None = None,
    ) -> None:
        self.engine = engine
        self.store = Store(conn, now=engine.clock.now_or_none(), buffered=True, sync=sync)
        self.inputs = self.store.batch_inputs(
            public_key=public_key,
            process_ids=sorted(set(process_ids)),
            workflow_paths=sorted(set(workflow_paths)),
            work=work,
        )
        self.public_key = public_key

    def head(self, process_id: str) -> str | None:
        """The head an event on `process_id` must extend now (None: unknown process)."""
        process = self.inputs.processes.get(process_id)
        return process.head if process is not None else None

    def apply(self, submission: Submission, tally: Tally) -> Accepted:
        """Decide one event and queue its writes; the CharterError that says why not."""
        envelope = submission.envelope
        writes = self.store.writes
        try:
            self.engine.check_clock(envelope)
            verify_submission(submission)
            accepted = self.engine.decide_and_write(
                self.store, submission, self._inputs(submission), tally, flush=False
            )
        except CharterError as exc:
            if self.store.writes != writes:
                raise BatchAborted(f"{exc.code} after the event's writes: {exc.message}") from exc
            if exc.code in SUBMISSION_CODES:
                tally.rejected.append(exc.code)
                self.engine.log_rejection(self.store, exc, envelope)
            raise
        self.inputs.processes[envelope.process] = accepted.process
        ref = work_ref(envelope)
        if ref is not None and ref[1] in self.inputs.work:
            fired = self.inputs.work[ref[1]]
            self.inputs.work[ref[1]] = dataclasses.replace(fired, fired_event=accepted.hash)
        return accepted

    def flush(self, tally: Tally) -> None:
        """Send every queued write and wait: BatchAborted if the database refused one.
        The hints the writes made in SQL join `tally`'s, for after the COMMIT."""
        try:
            self.engine.flush(self.store)
        except CharterError as exc:
            if exc.retryable:
                raise  # the database went away: the batch is lost either way
            raise BatchAborted(f"the database refused the batch: {exc.message}") from exc
        tally.hints[:0] = self.store.returned_hints()  # cancellations come first

    def _inputs(self, submission: Submission) -> DecisionInputs:
        envelope = submission.envelope
        batch = self.inputs
        ref = work_ref(envelope)
        process = batch.processes.get(envelope.process)
        version = batch.versions.get(envelope.workflow)
        if (
            envelope.actor != self.public_key
            or process is None
            or version is None
            or (ref is not None and ref[1] not in batch.work)
        ):
            # Not what the batch read: read it as a single event would.
            return self.store.decision_inputs(
                public_key=envelope.actor,
                process_id=envelope.process,
                workflow_path=envelope.workflow,
                lock=envelope.prev is not None,
                work=ref,
            )
        return DecisionInputs(
            actor=batch.actor,
            process=process,
            version=version,
            now=batch.now,
            work=batch.work[ref[1]] if ref is not None else None,
        )
