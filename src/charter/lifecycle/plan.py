"""A deploy plan: what deploying a definition at a path would do to the processes that
live there, computed without changing anything (docs/lifecycle.md).

Three lists, each in a stable order and paged together under one cursor:
`stranded` processes (their state is gone, or nothing can run from it any more),
`orphaned_work` (live timers and queue rows that could only fail), and `diverging`
processes (a recorded history the new rules would not accept event by event). The
counts are always whole; the lists hold up to `limit` entries each.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from charter.core.errors import CharterError, UnknownWorkflow
from charter.core.errors.lists import InvalidCursor
from charter.core.jsontypes import JsonObject, JsonValue
from charter.db.database import Conn
from charter.dsl.model import Workflow
from charter.engine.registry import Registry
from charter.engine.store import Store
from charter.lifecycle.divergence import Fingerprints, first_divergence
from charter.lifecycle.reach import UNREACHABLE, Reach, stranded_reason
from charter.lifecycle.store import PlanReads, WorkGroup

PAGE = 100
WHOLE = 2**31 - 1  # as a last seq to read: every event of the history


@dataclass(frozen=True)
class Stranded:
    process: str
    state: str
    reason: str  # reach.STATE_REMOVED or reach.NO_ACTION


@dataclass(frozen=True)
class OrphanedWork:
    process: str
    work_id: str
    kind: str  # "scheduled" or "queue"
    action: str
    reason: str  # reach.ACTION_REMOVED or reach.UNREACHABLE
    state: str  # the process's state now
    schedule_id: str | None = None  # for a scheduled row: what a migration may cancel


@dataclass(frozen=True)
class Diverging:
    process: str
    seq: int
    code: str
    message: str


@dataclass(frozen=True)
class PlanCursor:
    """Where each list's next page starts; None: that list has been shown whole."""

    stranded: str | None = ""
    orphaned: tuple[str, str] | None = ("", "")
    diverging: str | None = ""

    def encode(self) -> str:
        raw = json.dumps([self.stranded, self.orphaned, self.diverging], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> PlanCursor:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            stranded, orphaned, diverging = json.loads(raw)
            if orphaned is not None:
                process, work = orphaned
                orphaned = (_text(process), _text(work))
            return cls(_optional(stranded), orphaned, _optional(diverging))
        except (ValueError, TypeError) as exc:
            raise InvalidCursor("the cursor is not one a plan answered with") from exc


@dataclass
class StateGroups:
    """The whole counts, by the state (and work group) the judgement was made on."""

    stranded: dict[str, tuple[str, int]] = field(default_factory=dict)  # state → (reason, n)
    orphaned: list[tuple[WorkGroup, str]] = field(default_factory=list)  # (group, reason)

    def stranded_count(self) -> int:
        return sum(n for _, n in self.stranded.values())

    def orphaned_count(self) -> int:
        return sum(group.count for group, _ in self.orphaned)


@dataclass(frozen=True)
class DeployPlan:
    groups: StateGroups
    stranded: list[Stranded]
    orphaned_work: list[OrphanedWork]
    diverging: list[Diverging] | None  # None: not computed
    diverging_count: int | None
    next_cursor: str | None

    def counts(self) -> JsonObject:
        counts: JsonObject = {
            "stranded": self.groups.stranded_count(),
            "orphaned_work": self.groups.orphaned_count(),
        }
        if self.diverging_count is not None:
            counts["diverging"] = self.diverging_count
        return counts

    def to_json(self) -> JsonObject:
        answer: JsonObject = {
            "counts": self.counts(),
            "stranded": [
                {"process": s.process, "state": s.state, "reason": s.reason} for s in self.stranded
            ],
            "orphaned_work": [_orphan_json(o) for o in self.orphaned_work],
        }
        if self.diverging is not None:
            answer["diverging"] = [
                {"process": d.process, "seq": d.seq, "code": d.code, "message": d.message}
                for d in self.diverging
            ]
        answer["next_cursor"] = self.next_cursor
        return answer


def _orphan_json(work: OrphanedWork) -> JsonObject:
    found: JsonObject = {
        "process": work.process,
        "work_id": work.work_id,
        "kind": work.kind,
        "action": work.action,
        "reason": work.reason,
        "state": work.state,
    }
    if work.schedule_id is not None:
        found["schedule_id"] = work.schedule_id
    return found


class Planner:
    """Plans deploying `workflow` (parsed from `definition`) at `path`, on `conn`."""

    def __init__(
        self,
        conn: Conn,
        registry: Registry,
        path: str,
        definition: JsonValue,
        workflow: Workflow,
    ) -> None:
        self.reads = PlanReads(conn, path)
        self.definition = definition
        self.workflow = workflow
        try:
            _, self.before = registry.current(Store(conn), path)
            self.first_deploy = False
        except UnknownWorkflow:
            self.first_deploy = True

    def groups(self) -> StateGroups:
        """Every stranded state and orphaned work group, with whole counts."""
        found = StateGroups()
        if self.first_deploy:
            return found
        for state, count in sorted(self.reads.state_counts().items()):
            reason = stranded_reason(self.before, self.workflow, state)
            if reason is not None:
                found.stranded[state] = (reason, count)
        reach = Reach(self.workflow)
        for group in self.reads.work_groups():
            reason = reach.orphan_reason(group.action, group.state)
            if reason is not None:
                found.orphaned.append((group, reason))
        return found

    def diverging(self) -> list[Diverging]:
        """Every process whose history the new definition refuses, by process id."""
        found, replayed = self.replay_targets()
        for history in self.reads.histories(replayed):
            first = first_divergence(history.process, history.parent, self.workflow,
                                     history.events)  # fmt: skip
            if first is not None:
                found.append(Diverging(history.process, first.seq, first.code, first.message))
        return sorted(found, key=lambda d: d.process)

    def replay_targets(self) -> tuple[list[Diverging], list[tuple[str, int]]]:
        """The histories that diverge without a replay, and the (process, last seq) of
        each one to replay, by process id."""
        if self.first_deploy:
            return [], []
        pairs = self.reads.event_pairs()
        old = self.reads.definitions(sorted({version for version, _ in pairs}))
        fingerprints = Fingerprints(self.definition, old)
        changed = sorted(fingerprints.changed(pairs))
        if not changed:
            return [], []
        reshaping = fingerprints.reshaping(changed)
        gone = {action: fingerprints.gone(action) for _, action in changed}
        found: list[Diverging] = []
        replayed: list[tuple[str, int]] = []
        for span in self.reads.changed_spans(changed, reshaping):
            if gone[span.first_action]:
                # Everything before decides as it did; this one names no action now.
                refusal = self._unknown(span.first_action)
                found.append(Diverging(span.process, span.first_seq, refusal.code,
                                       refusal.message))  # fmt: skip
            else:
                # Past its last changed event a history that nothing reshapes decides
                # as it did: those events are not read.
                replayed.append((span.process, WHOLE if span.reshapes else span.last_seq))
        return found, replayed

    def _unknown(self, action: str) -> CharterError:
        try:
            self.workflow.action(action)
        except CharterError as exc:
            return exc
        raise AssertionError(f"{action!r} is an action of the new definition")

    def plan(
        self,
        cursor: PlanCursor | None = None,
        *,
        limit: int = PAGE,
        replay: bool = True,
        groups: StateGroups | None = None,
    ) -> DeployPlan:
        """The plan's counts and one page of each list; `replay=False` leaves out the
        diverging list (the one part that reads every changed history). `groups`: what
        `groups()` answered already for this plan, not read again."""
        cursor = cursor or PlanCursor()
        groups = groups if groups is not None else self.groups()
        stranded: list[Stranded] = []
        next_stranded: str | None = None
        if cursor.stranded is not None and groups.stranded:
            rows = self.reads.processes_in(
                sorted(groups.stranded), after=cursor.stranded, limit=limit + 1
            )
            stranded = [Stranded(p, s, groups.stranded[s][0]) for p, s in rows[:limit]]
            next_stranded = stranded[-1].process if len(rows) > limit else None
        orphaned: list[OrphanedWork] = []
        next_orphaned: tuple[str, str] | None = None
        if cursor.orphaned is not None and groups.orphaned:
            reasons = {(g.kind, g.action, g.state): r for g, r in groups.orphaned}
            work = self.reads.work_in(
                [g for g, _ in groups.orphaned], after=cursor.orphaned, limit=limit + 1
            )
            orphaned = [
                OrphanedWork(w.process, w.work_id, w.kind, w.action,
                             reasons[(w.kind, w.action, w.state)], w.state, w.schedule_id)
                for w in work[:limit]
            ]  # fmt: skip
            if len(work) > limit:
                next_orphaned = (orphaned[-1].process, orphaned[-1].work_id)
        diverging: list[Diverging] | None = None
        diverging_count: int | None = None
        next_diverging: str | None = None
        if replay:
            every = self.diverging()
            diverging_count = len(every)
            after = cursor.diverging
            page = [] if after is None else [d for d in every if d.process > after][: limit + 1]
            diverging = page[:limit]
            next_diverging = diverging[-1].process if len(page) > limit else None
        following = PlanCursor(next_stranded, next_orphaned, next_diverging)
        more = following != PlanCursor(None, None, None)
        return DeployPlan(
            groups, stranded, orphaned, diverging, diverging_count,
            following.encode() if more else None,
        )  # fmt: skip


def covered(groups: StateGroups, state_map: Mapping[str, str]) -> StateGroups:
    """What of `groups` a migration with `state_map` does not take care of.

    A process in a mapped state is moved. Any process with orphaned work is migrated too
    (to its own state when the map does not name it): the migration cancels the work of
    actions the definition dropped and the timers it lists. What is left is a queue row
    whose action still exists but cannot run, on a process the map does not move."""
    left = StateGroups()
    left.stranded = {s: v for s, v in groups.stranded.items() if s not in state_map}
    left.orphaned = [
        (group, reason)
        for group, reason in groups.orphaned
        if group.state not in state_map and reason == UNREACHABLE and group.kind == "queue"
    ]
    return left


def _optional(value: object) -> str | None:
    return None if value is None else _text(value)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value
