"""Verify many processes at once, in worker processes (`charter verify --all --jobs N`).

Verification is CPU-bound Python and OpenSSL work, so threads would share one core
(the GIL); worker processes use every core. Each worker opens its own small pool to the
database and verifies whole processes, each in its own snapshot, exactly as
`verify_process` does in one process. Results come back in the order of the ids given,
so the caller's output does not depend on the number of workers.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat

from charter.audit.evidence import VerificationReport
from charter.audit.verify_stored import verify_process
from charter.db.database import Database

# Small enough that results (and a progress bar) keep flowing, large enough that the
# round trip to a worker is a small share of a chunk.
_CHUNKS_PER_WORKER = 8

_database: Database | None = None  # a worker process's own pool


def default_jobs() -> int:
    """One worker per CPU."""
    return os.cpu_count() or 1


def verify_processes(
    database: Database, process_ids: Sequence[str], *, replay: bool = False, jobs: int = 1
) -> Iterator[VerificationReport]:
    """The report of each process in `process_ids`, in that order.

    With `jobs` > 1 (and more than one process), `jobs` worker processes share the work,
    each connected to `database.url`; otherwise it runs here, one process after another.
    """
    workers = min(jobs, len(process_ids))
    if workers <= 1:
        for process_id in process_ids:
            yield verify_process(database, process_id, replay=replay)
        return
    chunk = max(1, len(process_ids) // (workers * _CHUNKS_PER_WORKER))
    # spawn, not fork: the parent holds connection pools whose threads a fork would copy
    # in the middle of whatever they were doing.
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_open,
        initargs=(database.url,),
    ) as executor:
        yield from executor.map(_verify, process_ids, repeat(replay), chunksize=chunk)


def _open(url: str) -> None:
    global _database
    _database = Database(url, max_size=1, application_name="charter-verify")
    atexit.register(_database.close)


def _verify(process_id: str, replay: bool) -> VerificationReport:
    assert _database is not None, "the worker's initializer opens the database"
    return verify_process(_database, process_id, replay=replay)
