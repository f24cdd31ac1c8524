"""Personal values held in clear by the signed record (`charter workflows lint-history`).

An event signed before its action marked a field `"x-personal"` carries that field in
its envelope's `input`: the hash and the signature cover it, so it cannot be erased
without breaking the chain. `personal_in_clear` finds every such value of the processes
at a path, judged by the path's current revision: for each event whose action that
revision marks personal fields of, the pointers at which the `input` (of a v1 envelope,
or the part of a v2 one in clear) holds a value. It names the field, never the value.

It reads as the reader role, one page of events at a time in short transactions, so
that a long history is neither held in memory nor read under one long-lived snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from charter.core import ijson, pointers
from charter.core.errors import UnknownWorkflow
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, Role
from charter.db.queries import query
from charter.dsl.model import Workflow
from charter.dsl.validate import load_workflow
from charter.engine.registry import revisions
from charter.engine.store import Store

DEFAULT_BATCH = 1000


@dataclass(frozen=True)
class Revision:
    """The deployment a history is judged by: the path's current one."""

    path: str
    revision: int
    version: str
    workflow: Workflow


@dataclass(frozen=True)
class InClear:
    """A value at a personal pointer in the signed `input` of one stored event."""

    process: str
    seq: int
    action: str
    pointer: str
    hash: str

    def to_json(self) -> JsonObject:
        return {
            "process": self.process,
            "seq": self.seq,
            "action": self.action,
            "pointer": self.pointer,
            "hash": self.hash,
        }


def current_revision(database: Database, path: str) -> Revision:
    """The revision deployed last at `path`, parsed; UnknownWorkflow when there is none."""
    with database.connection(Role.READER) as conn, conn.transaction():
        current = revisions(conn, path)[0]
        text = Store(conn).workflow_definition_text(current.version)
    if text is None:  # the registry is append-only: a deployment names a stored version
        raise UnknownWorkflow(f"the definition of {path!r} is missing")
    return Revision(path, current.revision, current.version, load_workflow(ijson.loads(text)))


def personal_in_clear(
    database: Database, revision: Revision, *, batch: int = DEFAULT_BATCH
) -> Iterator[InClear]:
    """Every value in clear at a pointer `revision` marks personal, by process and seq
    (an event's pointers in the definition's order), read `batch` events at a time."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    workflow = revision.workflow
    actions = sorted(workflow.personal())
    if not actions:
        return  # nothing is marked: no event can hold a personal value
    after: tuple[str, int] = ("", 0)  # before every process id (none is empty)
    while True:
        params = {
            "path": revision.path,
            "actions": actions,
            "after_process": after[0],
            "after_seq": after[1],
            "limit": batch,
        }
        with database.connection(Role.READER) as conn, conn.transaction():
            found = conn.execute(query("personal_lint_events"), params).fetchall()
        rows = cast("list[tuple[str, int, str, str, str]]", found)
        for process_id, seq, action, event_hash, input_text in rows:
            document = ijson.loads(input_text)
            if not isinstance(document, dict):
                continue  # every stored envelope's input is an object
            for pointer in workflow.action(action).personal:
                if pointers.holds(document, pointer):
                    yield InClear(process_id, seq, action, pointer, event_hash)
        if len(rows) < batch:
            return
        after = (rows[-1][0], rows[-1][1])
