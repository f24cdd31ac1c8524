"""Where the sequencer's CPU goes: `Sequencer.tick` at a fixed batch size, by step.

Run: python bench/log_tick.py [--batch 200] [--events 8000] [--runs 3]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server);
it creates and drops its own database, a temporary log directory and a witness, and
starts one `charter witness serve` process on 127.0.0.1.

It queues `--events` events of 4 processes (as bench/log.py's 4 writers make them), then
integrates them `--batch` at a time with the witness publishing each checkpoint, and
prints the sequencer thread's CPU time (time.thread_time: its Python, its system calls,
not the database's or the witness's work) per event, in all and for each step. The steps
are timed by wrapping the functions the tick calls, which adds a few microseconds a
call: the breakdown shows where the time goes; the total is the figure to compare. A
tick's cost is a fixed part (files, fsyncs, round trips, the witness exchange) plus a
part per event: run two batch sizes to separate them.
"""

from __future__ import annotations

import argparse
import collections
import functools
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from charter.core.envelope import sign
from charter.db.database import Database, Role, connect
from charter.tlog import sequencer as sequencing
from charter.tlog import store
from charter.tlog.heads import HeadIndex
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.policy import parse_policy
from charter.tlog.sequencer import Sequencer
from charter.tlog.witnessing import WitnessPublisher
from common import print_results, scratch_database
from engine import deployed_engine, envelope
from log import ORIGIN, policy_text, witness

PROCESSES = 4

# (owner, attribute, label): what one tick calls, in order.
STEPS: list[tuple[Any, str, str]] = [
    (store, "pending_batch", "read the queue"),
    (Sequencer, "_check", "check the batch"),
    (sequencing, "append_tiles", "build tiles"),
    (LogDirectory, "write_tiles", "write tiles (fsync)"),
    (sequencing, "tree_root", "tree root"),
    (sequencing, "sign_checkpoint", "sign checkpoint"),
    (sequencing, "write_atomically", "keep unpublished (fsync)"),
    (WitnessPublisher, "__call__", "witness exchange"),
    (LogDirectory, "write_checkpoint", "write checkpoint (fsync)"),
    (HeadIndex, "record", "head index"),
    (store, "record_batch", "record in database"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--events", type=int, default=8000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spent: dict[str, list[float]] = collections.defaultdict(list)
    totals: list[float] = []
    with _timed_steps() as steps:
        for _ in range(args.runs):
            steps.clear()
            logged, cpu = _run(args.batch, args.events)
            totals.append(cpu / logged * 1e6)
            for label, seconds in steps.items():
                spent[label].append(seconds / logged * 1e6)
    rows: list[dict[str, object]] = [
        {"step": label, "µs/event median": statistics.median(v), "min": min(v), "max": max(v)}
        for label, v in ((label, spent[label]) for _, _, label in STEPS)
        if v
    ]
    rows.append(
        {"step": "whole tick", "µs/event median": statistics.median(totals),
         "min": min(totals), "max": max(totals)}
    )  # fmt: skip
    print_results(
        f"Sequencer.tick CPU, {args.batch} events a tick, one witness ({args.runs} runs)", rows
    )


def _run(batch: int, events: int) -> tuple[int, float]:
    """Queue `events`, integrate them `batch` at a time: (events logged, thread CPU s)."""
    signer = Ed25519Signer.generate(ORIGIN)
    with scratch_database("tlogt") as url, tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        _queue_events(url, events)
        log = LogDirectory(root / "log")
        with witness(root / "witness", signer.verifier().vkey) as (vkey, witness_url):
            policy = parse_policy(policy_text(signer, vkey, witness_url))
            publisher = WitnessPublisher(policy, log, timeout=5.0)
            sequencing.BATCH_LIMIT = batch
            sequencer = Sequencer(url, log, signer, bytes(32), publish=publisher, witnessed=True)
            try:
                with connect(url, Role.SEQUENCER) as conn:
                    sequencer.start(conn)
                    sequencer.tick(conn)  # the first: imports and connections warm up
                    logged, started = 0, time.thread_time()
                    while (result := sequencer.tick(conn)).appended:
                        logged += result.appended
                    return logged, time.thread_time() - started
            finally:
                sequencer.close()
                publisher.close()


def _queue_events(url: str, events: int) -> None:
    with connect(url) as conn:
        conn.execute("SELECT charter.enable_log_queue_v1()")  # as a first leader does
        conn.commit()
    with Database(url, max_size=2) as database:
        engine, key = deployed_engine(database)
        heads: dict[str, str] = {}
        for n in range(events):
            process = f"bench-{n % PROCESSES}"
            prev = heads.get(process)
            action = "open" if prev is None else "bump"
            env = envelope(key, process, action, prev, n // PROCESSES)
            heads[process] = engine.process_event(sign(env, key)).hash


@contextmanager
def _timed_steps() -> Iterator[dict[str, float]]:
    """Wrap each step to add its thread CPU time to a counter; unwrapped on exit."""
    spent: dict[str, float] = collections.defaultdict(float)
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in STEPS]
    for (owner, name, label), (_, _, original) in zip(STEPS, originals, strict=True):
        setattr(owner, name, _timer(original, label, spent))
    try:
        yield spent
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def _timer(function: Callable[..., Any], label: str, spent: dict[str, float]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started

    return timed


if __name__ == "__main__":
    main()
