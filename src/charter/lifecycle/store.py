"""The reads a deploy plan makes (charter/sql/queries/lifecycle.sql), in one snapshot
of the caller's transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass
from typing import cast

from charter.core.ijson import loads
from charter.core.jsontypes import JsonValue
from charter.db.database import Conn
from charter.db.queries import query
from charter.lifecycle.divergence import RecordedEvent

HISTORY_CHUNK = 1000  # processes whose events are read in one round trip


@dataclass(frozen=True)
class WorkGroup:
    """Live work of one kind and action on processes in one state, and how much."""

    kind: str  # "scheduled" or "queue"
    action: str
    state: str
    count: int


@dataclass(frozen=True)
class LiveWork:
    kind: str
    work_id: str
    process: str
    action: str
    schedule_id: str | None
    state: str


@dataclass(frozen=True)
class ChangedSpan:
    """Where a process's events of changed actions lie in its history."""

    process: str
    first_seq: int
    first_action: str
    last_seq: int
    reshapes: bool  # whether one of them may leave another state or data now


@dataclass(frozen=True)
class History:
    process: str
    parent: str | None
    events: tuple[RecordedEvent, ...]


def one_snapshot(conn: Conn) -> None:
    """Make the transaction just begun on `conn` read one snapshot, and nothing else."""
    conn.execute(query("plan_snapshot"))


class PlanReads:
    def __init__(self, conn: Conn, path: str) -> None:
        self.conn = conn
        self.path = path

    def state_counts(self) -> dict[str, int]:
        rows = self.conn.execute(query("plan_state_counts"), {"path": self.path}).fetchall()
        return {str(state): int(cast(int, count)) for state, count in rows}

    def processes_in(
        self, states: Sequence[str], *, after: str, limit: int
    ) -> list[tuple[str, str]]:
        rows = self.conn.execute(
            query("plan_processes_in_states"),
            {"path": self.path, "states": list(states), "after": after, "limit": limit},
        ).fetchall()
        return [(str(process), str(state)) for process, state in rows]

    def work_groups(self) -> list[WorkGroup]:
        rows = self.conn.execute(query("plan_live_work_counts"), {"path": self.path}).fetchall()
        return [WorkGroup(str(k), str(a), str(s), int(cast(int, n))) for k, a, s, n in rows]

    def work_in(
        self, groups: Sequence[WorkGroup], *, after: tuple[str, str], limit: int
    ) -> list[LiveWork]:
        rows = self.conn.execute(
            query("plan_live_work_page"),
            {
                "path": self.path,
                "kinds": [g.kind for g in groups],
                "actions": [g.action for g in groups],
                "states": [g.state for g in groups],
                "after_process": after[0],
                "after_work": after[1],
                "limit": limit,
            },
        ).fetchall()
        return [
            LiveWork(str(k), str(w), str(p), str(a), None if s is None else str(s), str(st))
            for k, w, p, a, s, st in rows
        ]

    def event_pairs(self) -> list[tuple[str, str]]:
        rows = self.conn.execute(query("plan_event_pairs"), {"path": self.path}).fetchall()
        return [(str(version), str(action)) for version, action in rows]

    def changed_spans(
        self, pairs: Sequence[tuple[str, str]], reshaping: Set[tuple[str, str]]
    ) -> list[ChangedSpan]:
        """Where each process's events of `pairs` lie, by process id."""
        rows = self.conn.execute(
            query("plan_changed_spans"),
            {
                "path": self.path,
                "versions": [version for version, _ in pairs],
                "actions": [action for _, action in pairs],
                "reshapes": [pair in reshaping for pair in pairs],
            },
        ).fetchall()
        return [
            ChangedSpan(str(p), int(cast(int, first)), str(a), int(cast(int, last)), bool(r))
            for p, first, a, last, r in rows
        ]

    def histories(self, wanted: Sequence[tuple[str, int]]) -> Iterator[History]:
        """Each (process, up to seq)'s history, in the order given (ids sorted), a chunk
        at a time."""
        for start in range(0, len(wanted), HISTORY_CHUNK):
            chunk = wanted[start : start + HISTORY_CHUNK]
            rows = self.conn.execute(
                query("plan_histories"),
                {"ids": [p for p, _ in chunk], "upto": [seq for _, seq in chunk]},
            ).fetchall()
            yield from _grouped(rows)

    def definitions(self, versions: Sequence[str]) -> dict[str, JsonValue]:
        rows = self.conn.execute(query("plan_definitions"), {"versions": list(versions)}).fetchall()
        return {str(version): loads(str(text)) for version, text in rows}


def _grouped(rows: Sequence[tuple[object, ...]]) -> Iterator[History]:
    current: str | None = None
    parent: str | None = None
    events: list[RecordedEvent] = []
    for process, parent_id, seq, kind, hash_, text, actor_id, actor, roles in rows:
        if process != current:
            if current is not None:
                yield History(current, parent, tuple(events))
            current, parent, events = str(process), _text(parent_id), []
        events.append(
            RecordedEvent(
                seq=int(cast(int, seq)),
                kind=str(kind),
                hash=str(hash_),
                envelope_text=str(text),
                actor_id=str(actor_id),
                actor_key=str(actor),
                actor_roles=tuple(cast("list[str]", roles)),
            )
        )
    if current is not None:
        yield History(current, parent, tuple(events))


def _text(value: object) -> str | None:
    return None if value is None else str(value)
