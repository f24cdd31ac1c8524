"""Archival: a process whose retention ran out leaves the hot tables for a bundle file that
was written, read back and verified first, and a tombstone stays; what holds a process
back (its state, its age, a child, a live timer, a legal hold) keeps it where it is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from charter.archive.files import bundle_files, read_bundle, write_bundle
from charter.archive.run import Candidate, archive_due, archive_one
from charter.audit.verify_stored import export_bundle, verify_bundle
from charter.core import ijson
from charter.core.envelope import sign
from charter.db.database import Database, Role, connect
from tests.integration.apikit import NOW, Harness, make_harness, new_id

PATH, PARENT = "tests/archive", "tests/archive-parent"
ITEM: dict[str, Any] = {
    "dsl": 2,
    "states": ["open", "closed"],
    "roles": ["clerk", "legal", "AUTOMATION"],
    "retention": {"after": "1d", "states": ["closed"], "hold_role": "legal"},
    "actions": {
        "open": {"type": "create", "role": "clerk", "to": "open",
                 "input": {"type": "object", "properties": {"n": {"type": "integer"}}},
                 "mutate": {"$set": {"n": "{{ input.n }}"}}},
        "close": {"role": "clerk", "from": "open", "to": "closed"},
        "close_later": {"role": "clerk", "from": "open", "to": "closed",
                        "schedule": [{"id": "nudge", "action": "nudge", "in": "30d", "data": {}}]},
        "nudge": {"type": "update", "role": "AUTOMATION", "from": "closed"},
        "note": {"type": "update", "role": "clerk", "from": "*"},
    },
}  # fmt: skip
PARENT_FLOW: dict[str, Any] = {
    "dsl": 2,
    "states": ["done"],
    "roles": ["clerk"],
    "retention": {"after": "1d", "states": ["done"], "hold_role": "clerk"},
    "actions": {
        "start": {"type": "create", "role": "clerk", "to": "done",
                  "spawn": [{"workflow": PATH, "process": "{{ process.id }}-child",
                             "action": "open", "data": {"n": 1}}]},
    },
}  # fmt: skip
LATER = NOW + timedelta(days=2)


@pytest.fixture(scope="module")
def h(database: Database) -> Iterator[Harness]:
    harness = make_harness(database)
    harness.deploy(PATH, ITEM)
    harness.deploy(PARENT, PARENT_FLOW)
    harness.actor("legal", "legal")
    yield harness
    harness.http.close()


def act(h: Harness, process: str, action: str, input_: Any = None, *, actor: str = "clerk",
        workflow: str = PATH) -> str:  # fmt: skip
    key = h.keys[actor]
    head = _head(h, process)
    envelope = h.envelope(key, process, action, input_ or {}, prev=head, workflow=workflow)
    return str(h.accept(sign(envelope, key))["hash"])


def _head(h: Harness, process: str) -> str | None:
    with connect(h.database.url) as conn:
        row = conn.execute("SELECT head_hash FROM charter.processes WHERE id = %s",
                           (process,)).fetchone()  # fmt: skip
    return None if row is None else str(row[0])


def closed(h: Harness, action: str = "close") -> str:
    process = new_id("item")
    act(h, process, "open", {"n": 7})
    act(h, process, action)
    return process


def rows(h: Harness, process: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    with connect(h.database.url) as conn:
        for table in ("processes", "events", "scheduled_actions", "archived_processes"):
            column = "id" if table == "processes" else "process_id"
            row = conn.execute(f"SELECT count(*) FROM charter.{table} WHERE {column} = %s",
                               (process,)).fetchone()  # fmt: skip
            counts[table] = int(str(row[0])) if row else 0
    return counts


def run(h: Harness, directory: Path, now: Any = LATER, limit: int = 1000) -> Any:
    return archive_due(h.database, directory, now=now, by="tests", limit=limit)


def test_a_finished_process_leaves_for_a_verified_bundle_and_a_tombstone(
    h: Harness, tmp_path: Path
) -> None:
    process = closed(h)
    bundle_before = export_bundle(h.database, process)
    done = run(h, tmp_path)
    [archived] = [a for a in done.archived if a.process_id == process]
    assert archived.path == f"{LATER:%Y}/{LATER:%m}/{process}.json"
    data, digest = read_bundle(tmp_path / archived.path)
    assert digest == archived.sha256
    bundle: Any = ijson.loads(data)
    assert bundle == bundle_before  # the export as it stood, byte for byte in JCS
    report = verify_bundle(bundle, replay=True)
    assert report.ok, report.problems
    assert rows(h, process) == {"processes": 0, "events": 0, "scheduled_actions": 0,
                                "archived_processes": 1}  # fmt: skip
    with connect(h.database.url) as conn:
        tombstone = conn.execute(
            "SELECT workflow_path, state, seq, head_hash, bundle_sha256, bundle_path,"
            " archived_by FROM charter.archived_processes WHERE process_id = %s",
            (process,),
        ).fetchone()
    assert tombstone == (PATH, "closed", 2, bundle["process"]["head"], digest, archived.path,
                         "tests")  # fmt: skip
    assert tmp_path / archived.path in bundle_files(tmp_path)
    assert not list(tmp_path.rglob(".*.partial"))


def test_what_is_not_due_stays(h: Harness, tmp_path: Path) -> None:
    open_one = new_id("item")
    act(h, open_one, "open")
    recent = closed(h)
    timer = closed(h, "close_later")
    held = closed(h)
    act(h, held, "charter:hold", {"reason": "LEGAL-1"}, actor="legal")
    done = run(h, tmp_path, now=NOW + timedelta(hours=23))
    assert recent not in {a.process_id for a in done.archived}
    done = run(h, tmp_path)
    archived = {a.process_id for a in done.archived}
    for process in (open_one, timer, held):
        assert process not in archived
        assert rows(h, process)["processes"] == 1
    # Released, the hold's own event starts the count again.
    act(h, held, "charter:release", {"reason": "LEGAL-1"}, actor="legal")
    assert held in {a.process_id for a in run(h, tmp_path, now=LATER + timedelta(days=2)).archived}


def test_a_parent_follows_its_children(h: Harness, tmp_path: Path) -> None:
    parent = new_id("parent")
    act(h, parent, "start", workflow=PARENT)
    child = f"{parent}-child"
    act(h, child, "close")
    done = run(h, tmp_path)
    order = [a.process_id for a in done.archived]
    assert order.index(child) < order.index(parent)
    assert rows(h, parent)["processes"] == 0
    for name in (child, parent):
        [path] = [a.path for a in done.archived if a.process_id == name]
        assert verify_bundle(json.loads((tmp_path / path).read_text()), replay=True).ok


def test_a_process_that_moved_on_keeps_its_rows_and_loses_its_file(
    h: Harness, tmp_path: Path
) -> None:
    process = closed(h)
    with connect(h.database.url) as conn:
        row = conn.execute("SELECT seq, head_hash FROM charter.processes WHERE id = %s",
                           (process,)).fetchone()  # fmt: skip
    assert row is not None
    stale = Candidate(process, int(str(row[0])), str(row[1]))
    act(h, process, "note")
    kept = archive_one(h.database, tmp_path, stale, now=LATER, by="tests")
    assert getattr(kept, "why", "").startswith("it moved on")
    assert rows(h, process)["events"] == 3
    assert not list(tmp_path.rglob(f"{process}.json"))


def test_a_crash_after_the_file_and_before_the_removal_loses_nothing(
    h: Harness, tmp_path: Path
) -> None:
    process = closed(h)
    relative = f"{LATER:%Y}/{LATER:%m}/{process}.json"
    write_bundle(tmp_path, relative, {"format": "not even a bundle"})  # a run that died here
    done = run(h, tmp_path)
    [archived] = [a for a in done.archived if a.process_id == process]
    assert verify_bundle(json.loads((tmp_path / relative).read_text()), replay=True).ok
    assert archived.sha256 == read_bundle(tmp_path / relative)[1]


def test_rows_are_removed_only_by_archival(h: Harness) -> None:
    process = closed(h)
    with (
        h.database.connection(Role.ENGINE) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("DELETE FROM charter.events WHERE process_id = %s", (process,))
    with connect(h.database.url) as conn:
        for statement in (
            "DELETE FROM charter.events WHERE process_id = %s",
            "DELETE FROM charter.processes WHERE id = %s",
        ):
            with pytest.raises(psycopg.Error, match="never deleted"):
                conn.execute(statement, (process,))
            conn.rollback()
        # The setting alone opens nothing to a role without the privilege.
        conn.execute("SELECT set_config('charter.archiving', %s, false)", (process,))
        conn.execute("SET ROLE charter_engine")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM charter.events WHERE process_id = %s", (process,))
    assert rows(h, process)["events"] == 2
