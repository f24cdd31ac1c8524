"""The sequencer in a background thread of `charter up` and `charter serve`.

Only when a log is configured (its key file exists): otherwise nothing starts and the
commands behave as before. Failures (the database gone, a full disk) are logged and
retried. A halt stops the sequencer, not the API: events keep committing (the log is
off the commit path) and the halt is in the log directory, the system log, the metric
`charter_log_halted` and `GET /v1/log/status`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.sequencer import Sequencer
from charter.tlog.witnessing import WitnessPublisher, load_policy

JOIN_SECONDS = 30.0
RETRY_SECONDS = 5.0
logger = logging.getLogger("charter.log")


def _supervise(sequencer: Sequencer, stop: threading.Event) -> None:
    """Run the sequencer until stopped or halted; a failure (the database gone, a full
    disk) is logged and retried: each start reconciles the directory and the database."""
    while not stop.is_set():
        try:
            if sequencer.run(stop) is not None:
                return  # halted: an operator acts, then restarts the process
        except Exception:
            logger.exception("log sequencer failed; retrying in %s s", RETRY_SECONDS)
            stop.wait(RETRY_SECONDS)


@contextmanager
def configured_sequencer(url: str, settings: LogSettings) -> Iterator[Sequencer]:
    """The sequencer the settings describe: witnessed when its policy has a quorum."""
    signer = settings.signer()
    log = LogDirectory(settings.directory)
    policy = load_policy(settings.policy_path, signer.verifier())
    publisher = (
        None if policy is None else WitnessPublisher(policy, log, timeout=settings.witness_timeout)
    )
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


@contextmanager
def background_sequencer(url: str, settings: LogSettings | None = None) -> Iterator[str | None]:
    """Run the sequencer beside the caller; yields the log origin, or None when no log."""
    settings = settings or LogSettings.from_env()
    if not settings.configured:
        yield None
        return
    with configured_sequencer(url, settings) as sequencer:
        stop = threading.Event()
        thread = threading.Thread(
            target=_supervise, args=(sequencer, stop), name="charter-log-sequencer", daemon=True
        )
        thread.start()
        try:
            yield sequencer.origin
        finally:
            stop.set()
            thread.join(JOIN_SECONDS)
