"""`charter archive run`: move each process whose retention has run out from the hot
tables into a bundle file, leaving a tombstone (docs/lifecycle.md, "Archival").

For each workflow whose current definition has a `retention` block, the database names
the processes that rested long enough in one of its states with nothing holding them
(no child, no live timer or automatic action, no legal hold, every event logged). For
each, in this order, so that a crash at any point loses nothing:

1. the process is exported as a `charter-export` bundle, with the log proof of its
   head when the deployment has a transparency log (and not archived until it has one);
2. the bundle is written (fsynced, renamed into place) and read back: the bytes must
   hash as written and the bundle must verify, replay included;
3. one transaction (`charter.archive_process`) checks again, under the process's lock,
   that nothing changed or holds it, removes its rows and writes the tombstone.

A crash before 3 leaves the process where it was (the next run writes the file again);
a process that moved on meanwhile keeps its rows, and its file is removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from charter.archive.files import bundle_path, read_bundle, write_bundle
from charter.audit.verify_stored import export_bundle, verify_bundle
from charter.core import ijson
from charter.core.errors import CharterError
from charter.db.database import Database, Role
from charter.db.queries import query
from charter.engine.registry import Registry, list_deployments
from charter.engine.store import Store
from charter.tlog.logdir import LogDirectory

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 1000


@dataclass(frozen=True)
class Archived:
    process_id: str
    path: str  # relative to the archive directory
    sha256: str


@dataclass(frozen=True)
class Kept:
    """A candidate that stayed, and why."""

    process_id: str
    why: str


@dataclass
class ArchiveRun:
    """What one run did."""

    archived: list[Archived] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "archived": [{"process": a.process_id, "path": a.path, "sha256": a.sha256}
                         for a in self.archived],
            "kept": [{"process": k.process_id, "why": k.why} for k in self.kept],
        }  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    process_id: str
    seq: int
    head: str


def archive_due(
    database: Database,
    directory: Path,
    *,
    now: datetime,
    by: str,
    limit: int = DEFAULT_LIMIT,
    log_directory: LogDirectory | None = None,
    on_done: Callable[[Archived | Kept], None] | None = None,
) -> ArchiveRun:
    """Archive up to `limit` processes whose retention ran out by `now`, into `directory`."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    run = ArchiveRun()
    seen: set[str] = set()
    # A parent becomes a candidate once its children are gone: look again until a pass
    # archives nothing or the limit is reached.
    while len(run.archived) < limit:
        fresh = [
            c
            for c in candidates(database, now, limit - len(run.archived))
            if c.process_id not in seen
        ]
        if not fresh:
            break
        for candidate in fresh:
            seen.add(candidate.process_id)
            outcome = archive_one(database, directory, candidate, now=now, by=by,
                                  log_directory=log_directory)  # fmt: skip
            (run.archived if isinstance(outcome, Archived) else run.kept).append(outcome)  # type: ignore[arg-type]
            if on_done is not None:
                on_done(outcome)
    return run


def candidates(database: Database, now: datetime, limit: int) -> list[Candidate]:
    """The processes due to leave, oldest first, across every workflow with retention."""
    registry = Registry()
    found: list[Candidate] = []
    with database.connection(Role.READER) as conn:
        store = Store(conn)
        for deployment in list_deployments(conn):
            retention = registry.workflow(store, deployment.version).retention
            if retention is None or len(found) >= limit:
                continue
            rows = conn.execute(
                query("archive_candidates"),
                {"path": deployment.path, "states": list(retention.states),
                 "before": now - retention.after, "limit": limit - len(found)},
            ).fetchall()  # fmt: skip
            found.extend(Candidate(str(r[0]), int(str(r[1])), str(r[2])) for r in rows)
    return found


def archive_one(
    database: Database,
    directory: Path,
    candidate: Candidate,
    *,
    now: datetime,
    by: str,
    log_directory: LogDirectory | None = None,
) -> Archived | Kept:
    """Export, write, check and remove one process (see the module's steps)."""
    process_id = candidate.process_id
    try:
        bundle = export_bundle(database, process_id, log_directory)
    except CharterError as exc:
        return Kept(process_id, f"it cannot be exported: {exc.message}")
    shown = bundle["process"]
    assert isinstance(shown, dict)
    if shown.get("head") != candidate.head:
        return Kept(process_id, "it moved on while it was being exported")
    logged = bundle.get("log")
    if isinstance(logged, dict) and logged.get("unlogged"):
        return Kept(process_id, "its head is not covered by a log checkpoint yet")
    relative = bundle_path(process_id, now)
    target = directory / relative
    sha256 = write_bundle(directory, relative, bundle)
    problem = _check_written(target, sha256)
    if problem is not None:
        target.unlink(missing_ok=True)
        log.error("not archiving %s: %s", process_id, problem)
        return Kept(process_id, problem)
    with database.connection(Role.ENGINE) as conn, conn.transaction():
        row = conn.execute(
            query("archive_process"),
            {"id": process_id, "head": candidate.head, "seq": candidate.seq,
             "sha256": sha256, "path": relative, "by": by},
        ).fetchone()  # fmt: skip
    blocker = row[0] if row else "the database did not answer"
    if blocker is not None:
        target.unlink(missing_ok=True)  # the process stays, and its file would mislead
        return Kept(process_id, str(blocker))
    return Archived(process_id, relative, sha256)


def _check_written(path: Path, sha256: str) -> str | None:
    """Why the file just written is not a sound archive of the process, or None."""
    data, digest = read_bundle(path)
    if digest != sha256:
        return f"the file {path} does not read back as written"
    report = verify_bundle(ijson.loads(data), replay=True)
    if not report.ok:
        first = report.problems[0]
        return f"its bundle does not verify ({first.code}: {first.message})"
    return None
