"""The sizes of the automation benchmark's measures and the table of their results:
per side the median over runs with the lowest and highest, and Charter's ratio to each
other side with the side it favours."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from automation_sides import Side

Stats = dict[str, float | None]  # one trial's figures
Results = dict[tuple[str, str], list[Stats]]  # (measure, side) -> one Stats per run
RESPONSIVENESS = "wake-up, lateness"  # the measures of one worker on one database


def backlog_key(workers: int) -> str:
    return f"backlog-{workers}"


@dataclass(frozen=True)
class Sizes:
    """The full run's sizes (the anchors the figures are quoted at); QUICK is a smoke run."""

    runs: int = 3
    samples: int = 300  # wake-up latency: automatic actions / jobs, one at a time
    spacing: float = 0.020  # seconds between their creations
    lateness: int = 200  # schedules / scheduled jobs ...
    window: float = 10.0  # ... falling due evenly over this many seconds
    backlog: int = 10_000
    workers: tuple[int, ...] = (1, 2)


QUICK = Sizes(runs=1, samples=30, lateness=20, window=2.0, backlog=200, workers=(2,))


@dataclass(frozen=True)
class Row:
    label: str
    measure: str
    stat: str
    lower_is_better: bool | None  # None: no ratio (a condition of the run, not a result)


def rows_for(sizes: Sizes) -> list[Row]:
    lower, higher = "lower is better", "higher is better"
    key = RESPONSIVENESS
    rows = [Row(f"wake-up latency p{p} (ms; {lower})", key, f"p{p}", True) for p in (50, 95, 99)]
    rows.append(Row("wake-up: actual spacing of the causing commits (ms)", key, "spacing", None))
    rows += [Row(f"lateness {s} (ms; {lower})", key, f"late {s}", True)
             for s in ("p50", "p99", "max")]  # fmt: skip
    for n in sizes.workers:
        key, head = backlog_key(n), f"backlog, {n} worker{'s' if n > 1 else ''}:"
        rows += [
            Row(f"{head} throughput (fires/s; {higher})", key, "rate", False),
            Row(f"{head} CPU per fire, workers (ms; {lower})", key, "cpu_workers", True),
            Row(f"{head} CPU per fire, backends (ms; {lower})", key, "cpu_backends", True),
            Row(f"{head} CPU per fire, total (ms; {lower})", key, "cpu_total", True),
            Row(f"{head} peak RSS of a worker (MiB; {lower})", key, "rss", True),
        ]
    return rows


def describe(sizes: Sizes) -> str:
    return (
        f"wake-up: {sizes.samples} automatic actions / jobs created one at a time"
        f" {sizes.spacing * 1000:g} ms apart, 1 worker process; lateness: {sizes.lateness}"
        f" schedules / scheduled jobs due evenly over {sizes.window:g} s, next on the same"
        " worker and database;"
        f" backlog: {sizes.backlog:,} due rows / jobs"
    )


def table(results: Results, sides: Sequence[Side], sizes: Sizes) -> list[dict[str, object]]:
    charter, others = sides[0], sides[1:]
    table_rows: list[dict[str, object]] = []
    for row in rows_for(sizes):
        medians: dict[str, float | None] = {}
        line: dict[str, object] = {"metric": row.label}
        for side in sides:
            values = [v for s in results.get((row.measure, side.name), [])
                      if (v := s.get(row.stat)) is not None]  # fmt: skip
            medians[side.name] = statistics.median(values) if values else None
            line[side.name] = _cell(values)
        for other in others:
            line[f"{charter.name}/{other.name}"] = _ratio(
                medians[charter.name],
                medians[other.name],
                row.lower_is_better,
                charter.name,
                other.name,
            )
        table_rows.append(line)
    return table_rows


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    middle = _num(statistics.median(values))
    return middle if len(values) == 1 else f"{middle} ({_num(min(values))} to {_num(max(values))})"


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _ratio(
    ours: float | None, theirs: float | None, lower_is_better: bool | None, us: str, them: str
) -> str:
    if lower_is_better is None or ours is None or not theirs:
        return "—"
    ratio = ours / theirs
    shown = f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"  # not 0.00x
    if shown == "1.00x":
        return f"{shown}, even"
    return f"{shown}, favours {us if (ratio < 1) == lower_is_better else them}"
