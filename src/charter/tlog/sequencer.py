"""The sequencer: integrates queued events into the log directory
(docs/transparency-log.md, "The sequencer").

One leader at a time holds `pg_try_advisory_lock(hashtext('charter.log'))` on its own
session; a standby retries until the lock frees. Each tick takes the oldest queued
events, checks each against the head it already logged for that process (next seq, prev
= logged hash), writes tiles and entry bundles, then the signed checkpoint (each file
atomically, the checkpoint last), then its head index, then records the batch in the
database in one transaction. A disagreement between the database and the log halts it
with a code (`db_behind_log`, `log_behind_db`, `log_gap`, `log_queue_forged`,
`log_behind_witness`): never silently, and never by skipping.

A checkpoint, once signed, is offered to the witnesses until they publish it: a batch
whose quorum failed is kept (in memory and as `unpublished` in the state directory) and
the next tick offers the same signed checkpoint again instead of building a new batch.
A log must never sign two inconsistent trees, and a witness may already hold this one
(it cosigned before the quorum failed, or before a crash).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from charter.core.crashpoints import (
    LOG_AFTER_CHECKPOINT,
    LOG_AFTER_TILES,
    LOG_AFTER_WITNESSES,
    LOG_BEFORE_DB_COMMIT,
    crash_point,
)
from charter.core.errors.log import (
    CheckpointNotPublished,
    DbBehindLog,
    LogBehindDb,
    LogDirectoryMoved,
    LogGap,
    LogHalted,
    LogQueueForged,
    TlogError,
)
from charter.db.database import Conn, Role, connect, pipelined_transaction
from charter.db.errors import translated
from charter.tlog import store
from charter.tlog.checkpoint import Checkpoint, sign_checkpoint
from charter.tlog.entry import LogEntry, process_key
from charter.tlog.heads import Head, HeadIndex
from charter.tlog.logdir import UNPUBLISHED, LogDirectory, write_atomically
from charter.tlog.merkle import EMPTY_ROOT, tree_root
from charter.tlog.metrics import FIGURES
from charter.tlog.note import Ed25519Signer, parse_note
from charter.tlog.tiles import TileHashReader, append_tiles

logger = logging.getLogger("charter.log")

BATCH_LIMIT = 4096
BUSY_BATCH = 256  # a batch this full means more is waiting: tick again at once
GAP_SECONDS = 60.0
STANDBY_SECONDS = 1.0

Publish = Callable[[bytes, Checkpoint, int], bytes]
"""`publish(signed_note, checkpoint, old_size)`: the note to write, with any witness
cosignatures, called after the tiles are written (so consistency proofs can be read from
them) and before the checkpoint is. The witness step plugs in here: it raises
`CheckpointNotPublished` while the quorum is not met (retried next tick) and
`LogBehindWitness` when a witness holds a larger tree (a halt)."""


def _unwitnessed(note: bytes, checkpoint: Checkpoint, old_size: int) -> bytes:
    return note


@dataclass
class TickResult:
    """What one tick did."""

    appended: int = 0
    requeued: int = 0  # already-logged events re-offered, just dequeued
    deferred: int = 0
    size: int = 0


@dataclass
class _Batch:
    entries: list[LogEntry] = field(default_factory=list)
    logged: list[store.LoggedEvent] = field(default_factory=list)
    dequeue: list[str] = field(default_factory=list)
    heads: dict[bytes, Head] = field(default_factory=dict)
    deferred: int = 0
    gap: LogGap | None = None  # raised once what precedes it is logged


@dataclass(frozen=True)
class _Unpublished:
    """A signed checkpoint whose tiles are written but which lacks its witness quorum."""

    batch: _Batch
    note: bytes
    checkpoint: Checkpoint


class Sequencer:
    """The log's single writer. `run` is the loop; `tick` is one pass (for tests)."""

    def __init__(
        self,
        url: str,
        log: LogDirectory,
        signer: Ed25519Signer,
        salt: bytes,
        *,
        batch_ms: int = 250,
        publish: Publish | None = None,
        witnessed: bool = False,
        gap_seconds: float = GAP_SECONDS,
    ) -> None:
        """`witnessed`: `publish` gathers a witness quorum (recorded in log_checkpoints)."""
        self._url = url
        self._log = log
        self._signer = signer
        self._salt = salt
        self._batch_s = batch_ms / 1000
        self._publish = publish or _unwitnessed
        self._witnessed = witnessed
        self._unpublished: _Unpublished | None = None
        self._gap_seconds = gap_seconds
        self._keys: dict[str, bytes] = {}
        self._heads: HeadIndex | None = None
        self._size = 0
        self.halted: LogHalted | None = None

    @property
    def origin(self) -> str:
        return self._signer.name

    def run(self, stop: threading.Event) -> LogHalted | None:
        """Lead (or wait to lead) and sequence until `stop` is set or a halt; returns the halt."""
        with connect(self._url, Role.SEQUENCER, application_name="charter-sequencer") as conn:
            while not stop.is_set():
                with translated():
                    leader = store.try_leader(conn)
                    conn.commit()
                if leader:
                    break
                stop.wait(STANDBY_SECONDS)
            else:
                return None
            logger.info("log sequencer leading", extra={"action": "log.lead"})
            try:
                self.start(conn)
                unpublished = ""  # said once per outage, not once per tick
                while not stop.is_set():
                    try:
                        result = self.tick(conn)
                    except CheckpointNotPublished as exc:
                        # Tiles are written, the checkpoint is not: the next tick offers
                        # the same signed checkpoint again (its rows are still queued).
                        if exc.message != unpublished:
                            logger.warning(
                                "checkpoint not published: %s",
                                exc.message,
                                extra={"action": "log.unpublished"},
                            )
                        unpublished = exc.message
                        stop.wait(self._batch_s)
                        continue
                    if unpublished and result.appended:
                        logger.info("checkpoint published", extra={"action": "log.published"})
                        unpublished = ""
                    if result.appended + result.requeued < BUSY_BATCH:
                        stop.wait(self._batch_s)
            except LogHalted as halt:
                conn.rollback()
                self._halt(conn, halt)
                return halt
            finally:
                self.close()
        return None

    def start(self, conn: Conn) -> None:
        """Catch up after a restart (reconcile the directory with the database's log tables)."""
        self._log.adopt_legacy_state()
        self._log.clear_halt()
        FIGURES.clear_halt()  # a restart is the operator's acknowledgement
        note = self._log.checkpoint_note()
        if note is None:  # a fresh directory starts at the empty tree (nothing to witness)
            empty = Checkpoint(self.origin, 0, EMPTY_ROOT)
            self._log.write_checkpoint(sign_checkpoint(empty, self._signer))
            note = self._log.checkpoint_note()
        checkpoint = self._log.checkpoint()
        assert checkpoint is not None
        assert note is not None
        if checkpoint.origin != self.origin:
            raise LogBehindDb(
                f"the log directory belongs to {checkpoint.origin}, not to {self.origin}"
            )
        self._size = checkpoint.size
        self._log.nodes.clear()  # the directory may have changed while no one led
        self._check_root(checkpoint)
        self._heads = HeadIndex.open(self._log, self._size)
        with translated(), conn.transaction():
            # Events are queued only once a log leads (migration 0016): the first leader
            # switches the queue on, queuing every event accepted before it.
            backfilled = store.enable_queue(conn)
            if backfilled:
                logger.info(
                    "log queue switched on: %d earlier events queued",
                    backfilled,
                    extra={"action": "log.queue_on"},
                )
            db_size = store.db_size(conn)
            if db_size > self._size:
                raise LogBehindDb(
                    f"the database recorded {db_size} logged entries but the log directory"
                    f" holds {self._size}: restore the directory from a mirror",
                    db_size=db_size,
                    log_size=self._size,
                )
            if db_size < self._size:
                self._finish_recording(conn, db_size, checkpoint, note)
        self._unpublished = self._recover_unpublished(conn)

    def _check_root(self, checkpoint: Checkpoint) -> None:
        try:
            read = TileHashReader(self._log.tiles, checkpoint.size, self._log.nodes)
            root = tree_root(checkpoint.size, read)
        except TlogError as exc:
            raise LogBehindDb(f"the log tiles are unreadable: {exc.message}") from None
        if root != checkpoint.root:
            raise LogBehindDb("the log tiles do not lead to the checkpoint root")

    def _recover_unpublished(self, conn: Conn) -> _Unpublished | None:
        """The checkpoint signed before a restart and not yet published, with its batch
        rebuilt from the entry bundles: it is offered again before anything else."""
        path = self._log.state / UNPUBLISHED
        try:
            note = path.read_bytes()
            checkpoint = Checkpoint.parse(parse_note(note).text)
        except FileNotFoundError:
            return None
        except TlogError:
            path.unlink()
            return None
        if checkpoint.origin != self.origin or checkpoint.size <= self._size:
            path.unlink()  # published (or for another log): nothing pending
            return None
        try:
            root = tree_root(checkpoint.size, TileHashReader(self._log.tiles, checkpoint.size))
        except TlogError:
            root = b""
        if root != checkpoint.root:
            raise LogBehindDb(
                f"the tiles no longer lead to the signed, unpublished checkpoint of size"
                f" {checkpoint.size}: restore the log directory from a mirror"
            )
        entries = self._log.entries(self._size, checkpoint.size, checkpoint.size)
        with translated(), conn.transaction():
            logged = self._match_events(conn, self._size, entries)
        batch = _Batch(entries=entries, logged=logged, dequeue=[e.event_hash for e in logged])
        logger.info(
            "offering the unpublished checkpoint %d again",
            checkpoint.size,
            extra={"action": "log.unpublished"},
        )
        return _Unpublished(batch, note, checkpoint)

    def _finish_recording(
        self, conn: Conn, db_size: int, checkpoint: Checkpoint, note: bytes
    ) -> None:
        """The log holds entries the database has not recorded: a crash between the
        checkpoint and the database commit, or a database restored to before them."""
        entries = self._log.entries(db_size, checkpoint.size)
        logged = self._match_events(conn, db_size, entries)
        store.record_batch(
            conn,
            logged=logged,
            dequeue=[e.event_hash for e in logged],
            size=checkpoint.size,
            root_hex=checkpoint.root.hex(),
            note=note.decode(),
            witnessed=self._witnessed,
        )

    def _match_events(
        self, conn: Conn, first: int, entries: list[LogEntry]
    ) -> list[store.LoggedEvent]:
        """The database's events for log entries from index `first`, or `DbBehindLog`."""
        db_size = first
        found = store.events_by_hash(conn, [e.event_hash.hex() for e in entries])
        logged: list[store.LoggedEvent] = []
        for offset, entry in enumerate(entries):
            event = found.get(entry.event_hash.hex())
            if event is None or self._key(event[0]) != entry.process_key or event[1] != entry.seq:
                raise DbBehindLog(
                    f"the log holds entry {db_size + offset} (seq {entry.seq}, event"
                    f" {entry.event_hash.hex()}) that the database lacks: it was restored"
                    " to an earlier state or rolled back",
                    index=db_size + offset,
                    event_hash=entry.event_hash.hex(),
                )
            logged.append(
                store.LoggedEvent(
                    db_size + offset,
                    event_hash=entry.event_hash.hex(),
                    process_id=event[0],
                    seq=entry.seq,
                )
            )
        return logged

    def tick(self, conn: Conn) -> TickResult:
        """One batch: read the queue, check it, write the log, record it."""
        if self._heads is None:
            self.start(conn)
        if self._unpublished is not None:
            batch = self._unpublished.batch  # the signed checkpoint comes first
        else:
            with translated(), conn.transaction():
                pending = store.pending_batch(conn, limit=BATCH_LIMIT)
            FIGURES.set_pending_oldest(max((event.age_s for event in pending), default=0.0))
            batch = self._check(conn, pending)
        old_size = self._size
        if batch.entries and self._log.size() != old_size:
            # Only a second writer moves it: a leader whose session died while it worked.
            # Not a halt: starting again reconciles the directory and the database.
            raise LogDirectoryMoved(
                f"the log directory is at size {self._log.size()}, not {old_size}"
            )
        new_size = old_size + len(batch.entries)
        note = b""
        checkpoint: Checkpoint | None = None
        if batch.entries:
            note, checkpoint = self._write_checkpoint(old_size, batch)
            assert self._heads is not None
            self._heads.record(old_size, batch.entries)
        if batch.entries or batch.dequeue:
            checkpoint = checkpoint or self._log.checkpoint()
            assert checkpoint is not None
            crash_point(LOG_BEFORE_DB_COMMIT)
            with translated(), pipelined_transaction(conn):  # one round trip: no reads
                store.record_batch(
                    conn,
                    logged=batch.logged,
                    dequeue=batch.dequeue,
                    size=new_size,
                    root_hex=checkpoint.root.hex(),
                    note=(note or self._log.checkpoint_note() or b"").decode(),
                    witnessed=self._witnessed,
                )
        self._size = new_size
        FIGURES.add_integrated(len(batch.entries))
        FIGURES.set_size(new_size)
        if batch.gap is not None:
            raise batch.gap
        requeued = len(batch.dequeue) - len(batch.logged)
        return TickResult(len(batch.entries), requeued, batch.deferred, new_size)

    def _write_checkpoint(self, old_size: int, batch: _Batch) -> tuple[bytes, Checkpoint]:
        """The checkpoint of the batch, published and written: (its note, its body)."""
        unpublished = self._unpublished
        if unpublished is None:
            entries = batch.entries
            encoded = [e.encode() for e in entries]
            files = append_tiles(self._log.tiles, old_size, encoded, self._log.nodes)
            self._log.write_tiles(files)
            crash_point(LOG_AFTER_TILES)
            new_size = old_size + len(entries)
            root = tree_root(new_size, TileHashReader(self._log.tiles, new_size, self._log.nodes))
            checkpoint = Checkpoint(self.origin, new_size, root)
            signed = sign_checkpoint(checkpoint, self._signer)
            if self._witnessed:  # kept before any witness may see it (see the module doc)
                write_atomically(self._log.state / UNPUBLISHED, signed)
            unpublished = _Unpublished(batch, signed, checkpoint)
        try:
            note = self._publish(unpublished.note, unpublished.checkpoint, old_size)
        except CheckpointNotPublished:
            self._unpublished = unpublished
            raise
        crash_point(LOG_AFTER_WITNESSES)
        self._log.write_checkpoint(note)
        self._unpublished = None
        if self._witnessed:  # published: nothing to offer again (a crash first: see start)
            (self._log.state / UNPUBLISHED).unlink(missing_ok=True)
        crash_point(LOG_AFTER_CHECKPOINT)
        return note, unpublished.checkpoint

    def _check(self, conn: Conn, pending: list[store.PendingEvent]) -> _Batch:
        """Which queued events extend what is logged; the rest wait or halt the log."""
        batch = _Batch()
        waiting = pending
        progress = True
        while waiting and progress:  # a successor may come before its predecessor
            progress = False
            later: list[store.PendingEvent] = []
            for row in waiting:
                verdict = self._verdict(conn, row, batch)
                if verdict == "append":
                    key = self._key(row.process_id)
                    entry = LogEntry(key, row.seq, bytes.fromhex(row.event_hash))
                    index = self._size + len(batch.entries)
                    batch.entries.append(entry)
                    batch.logged.append(
                        store.LoggedEvent(index, row.event_hash, row.process_id, row.seq)
                    )
                    batch.dequeue.append(row.event_hash)
                    batch.heads[key] = Head(row.seq, entry.event_hash, index)
                    progress = True
                elif verdict == "dequeue":
                    batch.dequeue.append(row.event_hash)
                else:
                    later.append(row)
            waiting = later
        for row in waiting:
            if row.age_s > self._gap_seconds and batch.gap is None:
                batch.gap = LogGap(
                    f"event {row.seq} of process {row.process_id} has waited"
                    f" {row.age_s:.0f} s for its predecessor, which is neither logged nor"
                    " queued",
                    process_id=row.process_id,
                    seq=row.seq,
                )
        batch.deferred = len(waiting)
        return batch

    def _verdict(self, conn: Conn, row: store.PendingEvent, batch: _Batch) -> str:
        if not row.genuine:
            raise LogQueueForged(
                f"the queued event {row.event_hash} (process {row.process_id}, seq {row.seq})"
                " is not a genuine event row",
                event_hash=row.event_hash,
            )
        key = self._key(row.process_id)
        assert self._heads is not None
        head = batch.heads.get(key) or self._heads.get(key)
        logged_seq = head.seq if head else 0
        if row.seq == logged_seq + 1:
            expected = head.event_hash.hex() if head else None
            if row.prev_hash != expected:
                raise DbBehindLog(
                    f"event {row.seq} of process {row.process_id} follows {row.prev_hash},"
                    f" but the log holds {expected} at seq {logged_seq}",
                    process_id=row.process_id,
                    seq=row.seq,
                )
            return "append"
        if row.seq > logged_seq + 1:
            return "wait"
        if head is not None and row.seq == head.seq and row.event_hash == head.event_hash.hex():
            return "dequeue"  # re-offered after a crash
        raise DbBehindLog(
            f"event {row.seq} of process {row.process_id} ({row.event_hash}) is at or below"
            f" the logged seq {logged_seq}: the database was rolled back or forked",
            process_id=row.process_id,
            seq=row.seq,
            logged_seq=logged_seq,
        )

    def _key(self, process_id: str) -> bytes:
        key = self._keys.get(process_id)
        if key is None:
            key = self._keys[process_id] = process_key(self._salt, process_id)
        return key

    def _halt(self, conn: Conn, halt: LogHalted) -> None:
        self.halted = halt
        FIGURES.halt(halt.code)
        logger.error(
            "log sequencer halted: %s",
            halt.message,
            extra={"action": "log.halted", "code": halt.code},
        )
        self._log.record_halt(halt.code, halt.message)
        try:
            with translated(), conn.transaction():
                detail = {k: v for k, v in halt.context.items() if isinstance(v, str | int)}
                store.record_halt(conn, code=halt.code, message=halt.message, detail=detail)
        except Exception:  # the halt file and the log line already say it
            logger.exception("could not record the halt in system_log")

    def close(self) -> None:
        if self._heads is not None:
            self._heads.close()
            self._heads = None
