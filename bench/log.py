"""The witnessed log's cost: process_event with the log off and on, the integration lag
through one local witness, and the bytes the log directory takes per event.

Run: python bench/log.py [--seconds 3] [--writers 4] [--runs 3] [--batch-ms 250]
Needs a PostgreSQL superuser URL (CHARTER_BENCH_ADMIN_URL, default the local server);
it creates and drops its own database, a temporary log directory and witness directory,
and starts one `charter witness serve` process on 127.0.0.1.

"log off": the queue trigger on events disabled and no sequencer (the commit path before
migration 0016). "log on": the queue trigger, and the sequencer publishing each
checkpoint only once the witness cosigned it, running in a process of its own
(`--sequencer process`, the default: how `charter up`, `charter serve` and `charter log
sequence` run it) or, for comparison, in a thread of the writers' process
(`--sequencer thread`, where it shares their interpreter lock). The two alternate,
`--runs` times each; events/s is given as min and max over the runs.
Integration lag: from process_event's return (the commit) to the moment the checkpoint
holding the event was written (after the witness's cosignature), p50 and p99.
Machine CPU per event: the whole machine's busy CPU time over the run (with the log on,
until the sequencer has integrated what the run queued) divided by the events committed,
with each run's difference, on - off: what the log adds to an event.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import multiprocessing.process
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty
from typing import Any, Protocol, cast

import httpx

from charter.core.ed25519 import SecretKey
from charter.core.envelope import Envelope, sign
from charter.db.database import Database, connect
from charter.tlog.checkpoint import Checkpoint
from charter.tlog.logdir import LogDirectory
from charter.tlog.note import Ed25519Signer
from charter.tlog.policy import parse_policy
from charter.tlog.sequencer import Sequencer
from charter.tlog.witnessing import WitnessPublisher
from common import percentiles, print_results, scratch_database
from engine import deployed_engine, run_writers

ORIGIN = "bench.example/log"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--batch-ms", type=int, default=250, help="the sequencer's tick (CHARTER_LOG_BATCH_MS)"
    )
    parser.add_argument(
        "--sequencer",
        choices=("thread", "process"),
        default="process",
        help="where the sequencer runs: its own process, or a thread of the writers' one",
    )
    args = parser.parse_args()
    signer = Ed25519Signer.generate(ORIGIN)
    with (
        scratch_database("tlogw") as url,
        tempfile.TemporaryDirectory() as scratch,
        witness(Path(scratch) / "witness", signer.verifier().vkey) as (vkey, witness_url),
    ):
        log = LogDirectory(Path(scratch) / "log")
        bench(url, log, signer, policy_text(signer, vkey, witness_url), args)


def policy_text(signer: Ed25519Signer, witness_vkey: str, witness_url: str) -> str:
    return f"log {signer.verifier().vkey}\nwitness w1 {witness_vkey} {witness_url}\nquorum w1\n"


@contextmanager
def witness(state: Path, log_vkey: str) -> Iterator[tuple[str, str]]:
    """A real `charter witness serve` that knows the log: (its vkey, its URL)."""
    charter = [sys.executable, "-m", "charter", "witness"]
    done = subprocess.run(
        [*charter, "init", "--name", "bench.local/w1", "--state", str(state), "--log", log_vkey],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [*charter, "serve", "--state", str(state), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.get(f"{url}/{'0' * 64}/checkpoint", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield done.stdout.strip(), url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _queue(url: str, on: bool) -> None:
    with connect(url) as conn:
        state = "ENABLE" if on else "DISABLE"
        conn.execute(f"ALTER TABLE charter.events {state} TRIGGER events_queue_for_log")
        conn.commit()


class Timed:
    """The witness publisher, noting (with `record`) when each checkpoint was published."""

    def __init__(self, publisher: WitnessPublisher, record: Callable[[float, int], None]):
        self._publisher = publisher
        self._record = record

    def __call__(self, note: bytes, checkpoint: Checkpoint, old_size: int) -> bytes:
        cosigned = self._publisher(note, checkpoint, old_size)
        # The checkpoint file is written right after this returns.
        self._record(time.time(), checkpoint.size)
        return cosigned


class Stop(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...


def run_sequencer(
    url: str,
    log_root: str,
    skey: str,
    policy: str,
    batch_ms: int,
    stop: Stop,
    record: Callable[[float, int], None],
    ready: Callable[[], None],
) -> None:
    """The witnessed sequencer until `stop` (in a thread, or a spawned process)."""
    log = LogDirectory(Path(log_root))
    publisher = WitnessPublisher(parse_policy(policy), log, timeout=5.0)
    sequencer = Sequencer(
        url,
        log,
        Ed25519Signer.from_skey(skey),
        bytes(32),
        batch_ms=batch_ms,
        publish=Timed(publisher, record),
        witnessed=True,
    )
    try:
        ready()
        sequencer.run(stop)  # type: ignore[arg-type]  # a multiprocessing Event will do
    finally:
        publisher.close()


def _in_process(
    url: str, log_root: str, skey: str, policy: str, batch_ms: int, stop: Stop, queue: Any
) -> None:
    run_sequencer(
        url, log_root, skey, policy, batch_ms, stop,
        record=lambda at, size: queue.put((at, size)),
        ready=lambda: queue.put((0.0, -1)),
    )  # fmt: skip


@contextmanager
def sequencing(
    args: argparse.Namespace, url: str, log: LogDirectory, signer: Ed25519Signer, policy: str,
    published: list[tuple[float, int]],
) -> Iterator[None]:  # fmt: skip
    """The sequencer running beside the writers, as `--sequencer` says, until exit."""
    if args.sequencer == "thread":
        stop: Stop = threading.Event()
        started = threading.Event()
        runner: threading.Thread | multiprocessing.process.BaseProcess = threading.Thread(
            target=run_sequencer,
            args=(url, str(log.root), signer.skey, policy, args.batch_ms, stop,
                  lambda at, size: published.append((at, size)), started.set),
        )  # fmt: skip
        runner.start()
        started.wait()
        queue = None
    else:
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        queue = context.Queue()
        runner = context.Process(
            target=_in_process,
            args=(url, str(log.root), signer.skey, policy, args.batch_ms, stop, queue),
        )
        runner.start()
        assert queue.get(timeout=60) == (0.0, -1)  # built: the writers may start
    try:
        yield
    finally:
        stop.set()
        if queue is not None:
            while runner.is_alive() or not queue.empty():
                with contextlib.suppress(Empty):
                    published.append(queue.get(timeout=0.1))
        runner.join()


def bench(
    url: str,
    log: LogDirectory,
    signer: Ed25519Signer,
    policy: str,
    args: argparse.Namespace,
) -> None:
    published: list[tuple[float, int]] = []
    committed: dict[str, float] = {}
    throughput: dict[str, list[float]] = {"log off": [], "log on (1 witness)": []}
    with Database(url, max_size=args.writers + 4) as database:
        engine, key = deployed_engine(database)
        recording = [False]

        def submit(env: Envelope, secret: SecretKey) -> str:
            digest = engine.process_event(sign(env, secret)).hash
            if recording[0]:
                committed[digest] = time.time()
            return digest

        cpu: dict[str, list[float]] = {"log off": [], "log on (1 witness)": []}
        for _ in range(args.runs):
            _queue(url, False)
            busy = machine_busy_seconds()
            result = run_writers(args.writers, args.seconds, key, submit)
            cpu["log off"].append((machine_busy_seconds() - busy) / int(str(result["events"])))
            throughput["log off"].append(float(str(result["events/s"])))

            _queue(url, True)
            with sequencing(args, url, log, signer, policy, published):
                busy = machine_busy_seconds()
                recording[0] = True
                result = run_writers(args.writers, args.seconds, key, submit)
                recording[0] = False
                throughput["log on (1 witness)"].append(float(str(result["events/s"])))
                _drain(url)  # what the run queued, integrated: its cost counts too
                spent = machine_busy_seconds() - busy
                cpu["log on (1 witness)"].append(spent / int(str(result["events"])))
    rows: list[dict[str, object]] = [
        {"path": f"{label}, {args.writers} writer(s)", "runs": len(v),
         "events/s median": round(statistics.median(v), 1),
         "events/s min": min(v), "events/s max": max(v)}
        for label, v in throughput.items()
    ]  # fmt: skip
    # Each run's "on" against the "off" measured just before it: below 1 the log costs.
    paired = [
        on / off
        for off, on in zip(throughput["log off"], throughput["log on (1 witness)"], strict=True)
    ]
    rows.append(
        {"path": "on ÷ off, paired by run", "runs": len(paired),
         "events/s median": round(statistics.median(paired), 3),
         "events/s min": round(min(paired), 3), "events/s max": round(max(paired), 3)}
    )  # fmt: skip
    print_results(
        f"process_event with the log off and on (interleaved; the sequencer in a {args.sequencer})",
        rows,
    )
    # Each run's "on" CPU against the "off" measured just before it: what the log adds.
    added = [
        (on - off) * 1e6 for off, on in zip(cpu["log off"], cpu["log on (1 witness)"], strict=True)
    ]
    cpu_rows: list[dict[str, object]] = [
        {"path": label, "runs": len(v), "µs/event median": statistics.median(v) * 1e6,
         "min": min(v) * 1e6, "max": max(v) * 1e6}
        for label, v in cpu.items()
    ]  # fmt: skip
    cpu_rows.append(
        {"path": "on - off, paired by run", "runs": len(added),
         "µs/event median": statistics.median(added), "min": min(added), "max": max(added)}
    )  # fmt: skip
    print_results("machine CPU per event (every process; /proc/stat busy time)", cpu_rows)
    lags = _lags(url, committed, published)
    points = percentiles(lags, (50, 99))
    size = log.size()
    files = [p for p in (log.root / "tile").rglob("*") if p.is_file()]
    files.append(log.root / "checkpoint")
    total = sum(p.stat().st_size for p in files)
    print_results(
        "integration lag (commit → in a checkpoint the witness cosigned) and storage",
        [{"events": len(lags), "lag p50 ms": points[50] * 1000, "lag p99 ms": points[99] * 1000,
          "log size": size, "bytes/event": total / size if size else 0.0}],
    )  # fmt: skip


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent busy so far (/proc/stat: user, nice, system, irq,
    softirq), the same instrument for both sides: every process counts, the writers',
    PostgreSQL's, the sequencer's and the witness's."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _drain(url: str) -> None:
    """Until the sequencer has logged everything queued (the last batch published)."""
    with connect(url) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM charter.log_pending").fetchone()
            conn.commit()
            if row is None or row[0] == 0:
                return
            time.sleep(0.05)


def _lags(url: str, committed: dict[str, float], published: list[tuple[float, int]]) -> list[float]:
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT event_hash, idx FROM charter.log_entries WHERE event_hash = ANY(%s)",
            (list(committed),),
        ).fetchall()
    lags: list[float] = []
    for digest, idx in rows:
        when = next(t for t, size in published if size > cast(int, idx))
        lags.append(when - committed[str(digest)])
    return lags


if __name__ == "__main__":
    main()
