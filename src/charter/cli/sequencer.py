"""The sequencer beside `charter up` and `charter serve`: in a child process of theirs.

Only when a log is configured (its key file exists): otherwise nothing starts and the
commands behave as before. A process of its own, not a thread: the sequencer's Python
(Merkle hashing, tiles, the witness exchange) would otherwise take the API's interpreter
lock for tens of milliseconds a batch, which at volume costs the commit path a few per
cent of its throughput. The child is spawned (no connection crosses a fork), reports its
figures to the parent's /metrics through shared memory (`charter.tlog.metrics`), and
stops on the parent's SIGTERM, or by itself when the parent dies (its parent pid
changes), so a killed `charter up` never leaves a sequencer behind holding the lock.

Failures (the database gone, a full disk) are logged and retried inside the child; a
child that dies (killed, out of memory) is started again after RETRY_SECONDS. A halt
stops the sequencer, not the API: events keep committing (the log is off the commit
path) and the halt is in the log directory, the system log, the metric
`charter_log_halted` and `GET /v1/log/status`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, MutableSequence
from contextlib import contextmanager
from multiprocessing.context import SpawnContext

import httpx

from charter.cli.stopping import stop_on_signals
from charter.tlog.config import LogSettings
from charter.tlog.metrics import FIELDS, FIGURES
from charter.tlog.policy import Policy
from charter.tlog.sequencer import Sequencer
from charter.tlog.witnessing import WitnessPublisher, load_policy

JOIN_SECONDS = 30.0
RETRY_SECONDS = 5.0
PARENT_CHECK_SECONDS = 0.5
HALTED_EXIT = 3  # the child's exit code after a halt: not restarted
logger = logging.getLogger("charter.log")


def _supervise(sequencer: Sequencer, stop: threading.Event) -> bool:
    """Run the sequencer until stopped or halted (True); a failure (the database gone, a
    full disk) is logged and retried: each start reconciles the directory and the database."""
    while not stop.is_set():
        try:
            if sequencer.run(stop) is not None:
                return True  # halted: an operator acts, then restarts the process
        except Exception:
            logger.exception("log sequencer failed; retrying in %s s", RETRY_SECONDS)
            stop.wait(RETRY_SECONDS)
    return False


@contextmanager
def configured_sequencer(url: str, settings: LogSettings) -> Iterator[Sequencer]:
    """The sequencer the settings describe: witnessed when its policy has a quorum."""
    signer = settings.signer()
    log = settings.log_directory()
    policy = load_policy(settings.policy_path, signer.verifier())
    publisher = None
    if policy is not None:
        timeout = settings.witness_timeout
        publisher = WitnessPublisher(policy, log, timeout=timeout, routes=_local(policy, timeout))
    try:
        yield Sequencer(
            url,
            log,
            signer,
            settings.salt(),
            batch_ms=settings.batch_ms,
            gap_seconds=settings.gap_seconds,
            publish=publisher,
            witnessed=publisher is not None,
        )
    finally:
        if publisher is not None:
            publisher.close()


def _local(policy: Policy, timeout: float) -> dict[str, tuple[httpx.AsyncClient, str]]:
    """The policy's local witnesses (`file:` URLs), each reached through its own app in
    this process: the sequencer's process is where the log meets its witnesses."""
    from charter.witness.local import LOCAL_BASE_URL, is_local, local_witness_client

    return {
        w.name: (local_witness_client(w.url, timeout), LOCAL_BASE_URL)
        for w in policy.witnesses.values()
        if w.url and is_local(w.url)
    }


@contextmanager
def background_sequencer(
    url: str,
    settings: LogSettings | None = None,
    telemetry: Callable[[], None] | None = None,
) -> Iterator[str | None]:
    """Run the sequencer in a child process beside the caller (which calls `telemetry`,
    picklable, first to set up its logs); yields the log origin, or None when no log.
    A missing key or salt, or a bad policy, fails here, before anything starts."""
    settings = settings or LogSettings.from_env()
    if not settings.configured:
        yield None
        return
    signer = settings.signer()
    settings.salt()
    load_policy(settings.policy_path, signer.verifier())
    context = multiprocessing.get_context("spawn")
    figures: MutableSequence[float] = context.RawArray("d", FIELDS)
    FIGURES.share(figures)
    stop = threading.Event()
    keeper = threading.Thread(
        target=_keep_running,
        args=(context, url, settings, figures, stop, telemetry),
        name="charter-log-keeper",
        daemon=True,
    )
    keeper.start()
    try:
        yield signer.name
    finally:
        stop.set()
        keeper.join(JOIN_SECONDS + 5)


def _keep_running(
    context: SpawnContext,
    url: str,
    settings: LogSettings,
    figures: MutableSequence[float],
    stop: threading.Event,
    telemetry: Callable[[], None] | None,
) -> None:
    """Start the child and start it again if it dies, until `stop` or a halt. The child
    is stopped with SIGTERM: nothing shared with it can be left locked by its death (a
    multiprocessing.Event would be, by a child killed inside `wait`)."""
    while not stop.is_set():
        child = context.Process(
            target=_child,
            args=(url, settings, figures, os.getpid(), telemetry),
            name="charter-log-sequencer",
            daemon=False,  # it stops on SIGTERM, or on its own when this process dies
        )
        child.start()
        while child.is_alive() and not stop.wait(0.2):
            pass
        if stop.is_set():
            child.terminate()
        child.join(JOIN_SECONDS)
        if child.is_alive():
            logger.error("log sequencer did not stop in %s s; killing it", JOIN_SECONDS)
            child.kill()
            child.join()
            return
        if stop.is_set() or child.exitcode == HALTED_EXIT:
            return
        logger.error(
            "log sequencer process exited with code %s; starting it again in %s s",
            child.exitcode,
            RETRY_SECONDS,
            extra={"action": "log.restart"},
        )
        stop.wait(RETRY_SECONDS)


def _child(
    url: str,
    settings: LogSettings,
    figures: MutableSequence[float],
    parent: int,
    telemetry: Callable[[], None] | None,
) -> None:
    """The sequencer process: until SIGTERM, the parent's death, or a halt."""
    # A Ctrl-C reaches the whole process group: the parent stops us with SIGTERM, after
    # the batch in hand.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    stop_on_signals(stop, (signal.SIGTERM,))
    if telemetry is not None:
        telemetry()  # a spawned process starts with the default logging: set ours up
    FIGURES.share(figures)
    watcher = threading.Thread(
        target=_watch_parent, args=(parent, stop), name="charter-log-parent", daemon=True
    )
    watcher.start()
    with configured_sequencer(url, settings) as sequencer:
        halted = _supervise(sequencer, stop)
    sys.exit(HALTED_EXIT if halted else 0)


def _watch_parent(parent: int, stop: threading.Event) -> None:
    while not stop.wait(PARENT_CHECK_SECONDS):
        if os.getppid() != parent:
            logger.warning("the process that started the log sequencer is gone; stopping")
            stop.set()
