"""What an accepted event sets going, queued in its transaction: schedules (and their
cancellations), automatic actions (with the cascade limit), spawned processes (each a
genesis event of its own, with its own effects), and the hints to send after COMMIT.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from charter.core.envelope import Envelope, genesis_envelope
from charter.core.errors import Duplicate, InvalidWorkflow
from charter.core.jsontypes import JsonObject
from charter.core.timefmt import format_rfc3339
from charter.db.hints import Hint, hint
from charter.dsl.durations import format_duration
from charter.engine import metrics
from charter.engine.cascade import Cascade, cascade_diagnostic
from charter.engine.records import ActorContext
from charter.engine.registry import Registry
from charter.engine.rules import Decision, decide
from charter.engine.store import Store

MAX_SPAWN_DEPTH = 8  # a child's create action may spawn too, but not without end
SCHEDULES_CHANNEL = "scheduled_actions_changed"
QUEUE_CHANNEL = "automation_queue_changed"
EVENTS_CHANNEL = "charter_events"  # an event was appended: for live views, not the worker


@dataclass
class Tally:
    """What accepted events did that metrics count once their transaction committed."""

    accepted: int = 0
    cascade_stops: int = 0
    render_failures: int = 0
    rejected: list[str] = field(default_factory=list)  # codes, logged in the transaction
    hints: list[Hint] = field(default_factory=list)  # NOTIFY hints, sent after the COMMIT
    # (process, schedule id) of every live schedule the events cancelled or replaced: a
    # row an event cancelled — even the very row it fired — is finished by the engine,
    # not by the worker's bookkeeping.
    cancelled_schedules: set[tuple[str, str]] = field(default_factory=set)

    def count(self) -> None:
        """Add to the metrics: call after the commit (once per tally)."""
        metrics.EVENTS_ACCEPTED.inc(self.accepted)
        metrics.CASCADE_STOPS.inc(self.cascade_stops)
        metrics.AUTO_RENDER_FAILURES.inc(self.render_failures)
        for code in self.rejected:
            metrics.EVENTS_REJECTED.labels(code=code).inc()


class Effects:
    """Queues the writes of an accepted event's effects: schedules, automatic actions,
    spawned processes (each a genesis event of its own, with its own effects)."""

    def __init__(self, registry: Registry, max_auto_cascade: int) -> None:
        self.registry = registry
        self.max_auto_cascade = max_auto_cascade

    def persist(
        self,
        store: Store,
        envelope: Envelope,
        event_hash: str,
        actor: ActorContext,
        decision: Decision,
        cascade: Cascade,
        tally: Tally,
        *,
        depth: int,
    ) -> None:
        """Queue the writes of an event's effects (nothing is waited for here)."""
        process_id, path = envelope.process, envelope.workflow
        provenance = {"event_hash": event_hash, "action": envelope.action, "actor": envelope.actor}
        # Cancellations hint the worker from SQL (their rows are only known there);
        # new rows get their ids here, so their hints need no answer from the database.
        if decision.cleanup is not None:
            # A migration: its listed schedules and all work of actions the definition
            # no longer has, found and cancelled in SQL.
            ticket = decision.cleanup.reason
            store.cancel_migrated_work(
                process_id=process_id,
                actions=decision.cleanup.actions,
                schedule_ids=decision.cancels,
                event_hash=event_hash,
                listed_reason=f"cancelled by {envelope.action} ({ticket})",
                orphan_reason=f"cancelled by {envelope.action} ({ticket}): its action is not "
                "in the workflow's current definition",
            )
        elif decision.cancels:
            store.cancel_schedules(
                process_id=process_id,
                schedule_ids=decision.cancels,
                event_hash=event_hash,
                reason=f"cancelled by {envelope.action}",
            )
        tally.cancelled_schedules.update(
            (process_id, schedule_id)
            for schedule_id in (*decision.cancels, *(s.id for s in decision.schedules))
        )
        for schedule in decision.schedules:
            store.cancel_schedules(
                process_id=process_id,
                schedule_ids=[schedule.id],
                event_hash=event_hash,
                reason="replaced",
            )
            work_id = str(uuid.uuid4())
            store.insert_schedule(
                work_id=work_id,
                schedule_id=schedule.id,
                process_id=process_id,
                workflow_path=path,
                action_name=schedule.action,
                action_data=schedule.data,
                run_at=schedule.run_at,
                interval=format_duration(schedule.every) if schedule.every else None,
                until=schedule.until,
                max_count=schedule.count,
                **provenance,
            )
            tally.hints.append(
                hint(
                    SCHEDULES_CHANNEL,
                    {
                        "id": work_id,
                        "process_id": process_id,
                        "workflow_path": path,
                        "action_name": schedule.action,
                        "run_at": format_rfc3339(schedule.run_at),
                        "kind": "scheduled_action",
                        "op": "scheduled",
                    },
                )
            )
        for work in decision.auto:
            error = work.error
            if error is None and cascade.depth >= self.max_auto_cascade:
                chain = store.cascade_chain(process_id, cascade.origin)
                error = cascade_diagnostic(
                    cascade,
                    self.max_auto_cascade,
                    work.action,
                    chain[1:],
                    chain[0] if chain else None,
                )
            queued = str(uuid.uuid4())
            store.insert_auto_work(
                work_id=queued,
                process_id=process_id,
                workflow_path=path,
                action_name=work.action,
                action_data=work.data,
                available_state=work.available_state,
                cascade_depth=cascade.depth,
                cascade_origin=cascade.origin,
                error=error,
                **provenance,
            )
            if error is not None:
                stopped = work.error is None
                tally.cascade_stops += stopped
                tally.render_failures += not stopped
                store.log(
                    "automation.cascade_stopped" if stopped else "automation.render_failed",
                    level="warning",
                    code="cascade_limit" if stopped else "auto_data",
                    process_id=process_id,
                    actor=envelope.actor,
                    action=work.action,
                    event_hash=event_hash,
                    message=error,
                    detail={
                        "work_id": queued,
                        "cascade_depth": cascade.depth,
                        "cascade_origin": cascade.origin,
                        "limit": self.max_auto_cascade,
                    },
                )
            else:
                tally.hints.append(
                    hint(
                        QUEUE_CHANNEL,
                        {
                            "id": queued,
                            "process_id": process_id,
                            "workflow_path": path,
                            "action_name": work.action,
                            "kind": "auto_action",
                        },
                    )
                )
        for spawn in decision.spawns:
            self._spawn(
                store,
                envelope,
                event_hash,
                actor,
                spawn.workflow,
                spawn.process,
                spawn.action,
                spawn.data,
                cascade,
                tally,
                depth=depth + 1,
            )

    def _spawn(
        self,
        store: Store,
        parent: Envelope,
        parent_hash: str,
        actor: ActorContext,
        workflow_path: str,
        process_id: str,
        action: str,
        data: JsonObject,
        cascade: Cascade,
        tally: Tally,
        *,
        depth: int,
    ) -> None:
        if depth > MAX_SPAWN_DEPTH:
            raise InvalidWorkflow(f"spawning goes deeper than {MAX_SPAWN_DEPTH} levels")
        version, workflow = self.registry.current(store, workflow_path)
        genesis = genesis_envelope(
            parent, process=process_id, workflow=workflow_path, action=action, input=data
        )
        genesis_hash = genesis.hash()
        decision = decide(None, workflow, genesis, actor, event_hash=genesis_hash, genesis=True)
        if not store.insert_process(
            process_id=process_id,
            workflow_path=workflow_path,
            state=decision.state,
            parent_id=parent.process,
            parent_event_hash=parent_hash,
        ):
            raise Duplicate(f"cannot spawn {process_id!r}: the process already exists")
        store.insert_event(
            process_id=process_id,
            seq=1,
            event_hash=genesis_hash,
            prev_hash=None,
            kind="spawn",
            envelope_text=genesis.message().decode("utf-8"),
            signature=None,
            actor=genesis.actor,
            actor_id=actor.id,
            actor_roles=actor.roles,
            action=action,
            workflow_path=workflow_path,
            workflow_version=version,
            cause_hash=parent_hash,
        )
        store.advance_process(
            process_id=process_id,
            state=decision.state,
            data=decision.data,
            head_hash=genesis_hash,
            seq=1,
        )
        # A genesis is part of its parent's event: it carries on the parent's cascade.
        self.persist(store, genesis, genesis_hash, actor, decision, cascade, tally, depth=depth)
        tally.hints.append(appended_hint(process_id, 1, genesis_hash, action, actor))
        store.log(
            "process.spawned",
            process_id=process_id,
            actor=genesis.actor,
            action=action,
            event_hash=genesis_hash,
            detail={"parent": parent.process, "cause": parent_hash, "workflow_version": version},
        )


def appended_hint(
    process_id: str, seq: int, event_hash: str, action: str, actor: ActorContext
) -> Hint:
    return hint(
        EVENTS_CHANNEL,
        {"process": process_id, "seq": seq, "hash": event_hash, "action": action,
         "actor_id": actor.id},
    )  # fmt: skip
