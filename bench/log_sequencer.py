"""The transparency log's cost: process_event with the log queue off and on (and with the
sequencer running beside it), and how fast the sequencer integrates a backlog.

Run: python bench/log_sequencer.py [--seconds 4] [--writers 4] [--backlog 20000]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server);
the benchmark creates and drops its own database and a temporary log directory.

"queue off" disables the queue trigger on events (what the commit path cost before
migration 0016); "queue on" is the shipped path (one INSERT ... SELECT per statement);
"queue on + sequencer" also runs the sequencer in a thread of the same process.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.db.database import Database, Role, connect
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.sequencer import Sequencer
from common import print_results, scratch_database
from engine import deployed_engine, envelope, run_writers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=20000)
    args = parser.parse_args()
    signer = Ed25519Signer.generate("bench.example/log")
    with scratch_database("tlog") as url, tempfile.TemporaryDirectory() as scratch:
        bench_commits(url, LogDirectory(Path(scratch)), signer, args.seconds, args.writers)
    with scratch_database("tlogb") as url, tempfile.TemporaryDirectory() as scratch:
        bench_backlog(url, LogDirectory(Path(scratch)), signer, args.backlog)


def _queue(url: str, on: bool) -> None:
    with connect(url) as conn:
        state = "ENABLE" if on else "DISABLE"
        conn.execute(f"ALTER TABLE charter.events {state} TRIGGER events_queue_for_log")
        # The queue fills only once switched on (what a sequencer's first lead does).
        conn.execute("SELECT charter.enable_log_queue_v1()")
        conn.execute("DELETE FROM charter.log_pending")
        conn.commit()


def bench_commits(
    url: str, log: LogDirectory, signer: Ed25519Signer, seconds: float, writers: int
) -> None:
    rows: list[dict[str, object]] = []
    with Database(url, max_size=writers + 4) as database:
        engine, key = deployed_engine(database)

        def in_process(env: Envelope, secret: SecretKey) -> str:
            return engine.process_event(sign(env, secret)).hash

        for label, on in (("queue off", False), ("queue on", True)):
            _queue(url, on)
            rows.append({"path": f"{label}, {writers} writer(s)",
                         **run_writers(writers, seconds, key, in_process)})  # fmt: skip

        _queue(url, True)
        sequencer = Sequencer(url, log, signer, bytes(32), batch_ms=250)
        stop = threading.Event()
        thread = threading.Thread(target=sequencer.run, args=(stop,))
        thread.start()
        rows.append({"path": f"queue on + sequencer, {writers} writer(s)",
                     **run_writers(writers, seconds, key, in_process)})  # fmt: skip
        stop.set()
        thread.join()
        print_results("process_event with the log queue off and on", rows)


def bench_backlog(url: str, log: LogDirectory, signer: Ed25519Signer, backlog: int) -> None:
    with Database(url, max_size=2) as database:
        engine, key = deployed_engine(database)
        process = "bench-backlog"
        head = engine.process_event(sign(envelope(key, process, "open", None, 0), key)).hash
        for n in range(1, backlog):
            head = engine.process_event(sign(envelope(key, process, "bump", head, n), key)).hash
    sequencer = Sequencer(url, log, signer, bytes(32))
    with connect(url, Role.SEQUENCER) as conn:
        sequencer.start(conn)
        started = time.perf_counter()
        logged = 0
        while (result := sequencer.tick(conn)).appended:
            logged += result.appended
        elapsed = time.perf_counter() - started
    sequencer.close()
    print_results(
        "sequencer: a backlog integrated (4,096 per batch, files fsynced per batch)",
        [{"events": logged, "seconds": elapsed, "events/s": logged / elapsed}],
    )


if __name__ == "__main__":
    main()
