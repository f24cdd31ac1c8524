"""Prometheus metrics of the sequencer, in the engine's registry (served at /metrics).

`charter up` and `charter serve` run the sequencer in a child process of their own (so
its CPU does not share the API's interpreter lock), while /metrics is served by the
parent (and, with `serve --workers N`, by each API process). The figures therefore live
in `FIGURES`: a few doubles that the sequencer writes and a collector reads at scrape
time, in a plain list when both sides share a process, or in shared memory
(`multiprocessing.RawArray`) that `share` hands to every process involved. One process
writes them (the sequencer), so no lock is needed: an aligned 8-byte store is atomic.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from charter.core.errors.log import (
    DbBehindLog,
    LogBehindDb,
    LogBehindWitness,
    LogGap,
    LogQueueForged,
)
from charter.core.metrics import REGISTRY

# The `reason` label of charter_log_halted: a halt is stored as 1 + its index here.
HALT_CODES = tuple(
    c.code for c in (DbBehindLog, LogBehindDb, LogGap, LogBehindWitness, LogQueueForged)
)
OTHER_HALT = "log_halted"  # a halt of a kind this list does not name yet

_SIZE, _INTEGRATED, _PENDING_OLDEST, _HALTED = range(4)
FIELDS = 4


class SequencerFigures:
    """What the sequencer reports: checkpoint size, entries integrated, the oldest queued
    event's age, and why it halted."""

    def __init__(self) -> None:
        self.values: MutableSequence[float] = [0.0] * FIELDS
        self.shared: MutableSequence[float] | None = None

    def share(self, values: MutableSequence[float]) -> None:
        """Read and write `values` (shared memory of FIELDS doubles) from now on."""
        self.values = self.shared = values

    def set_size(self, size: int) -> None:
        self.values[_SIZE] = float(size)

    def add_integrated(self, count: int) -> None:
        self.values[_INTEGRATED] += count

    def set_pending_oldest(self, seconds: float) -> None:
        self.values[_PENDING_OLDEST] = seconds

    def halt(self, code: str) -> None:
        known = HALT_CODES.index(code) if code in HALT_CODES else len(HALT_CODES)
        self.values[_HALTED] = float(known + 1)

    def clear_halt(self) -> None:
        """A restart is the operator's acknowledgement."""
        self.values[_HALTED] = 0.0

    @property
    def halted(self) -> str | None:
        stored = int(self.values[_HALTED])
        if stored == 0:
            return None
        return HALT_CODES[stored - 1] if stored <= len(HALT_CODES) else OTHER_HALT


FIGURES = SequencerFigures()


class _FiguresCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        values = FIGURES.values
        halted = GaugeMetricFamily(
            "charter_log_halted",
            "1 while the sequencer is halted, by reason (db_behind_log, ...).",
            labels=["reason"],
        )
        reason = FIGURES.halted
        if reason is not None:
            halted.add_metric([reason], 1.0)
        yield halted
        yield CounterMetricFamily(
            "charter_log_entries_integrated",
            "Events the sequencer appended to the transparency log since it started.",
            value=values[_INTEGRATED],
        )
        yield GaugeMetricFamily(
            "charter_log_size",
            "The size of the latest checkpoint the sequencer wrote.",
            value=values[_SIZE],
        )
        yield GaugeMetricFamily(
            "charter_log_pending_oldest_seconds",
            "Age of the oldest queued event the sequencer last read (0: none): the"
            " pre-integration window, in which an unlogged event can still be erased.",
            value=values[_PENDING_OLDEST],
        )


REGISTRY.register(_FiguresCollector())
