"""Timelines of a run: edges and matches per minute over the stream's time, and a
stream's progress batch by batch (edges in the window, late edges, batch latency).

Counting needs no plotting library; :func:`plot_run` and :func:`plot_stream` draw with
matplotlib. A short stream is counted per second (or per 10 s) instead of per minute, a
long one per 10 minutes, hour or day: the bin is the shortest of :data:`BIN_SECONDS` that
cuts the stream into at most :data:`MAX_BINS` bins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.events import US_PER_SECOND, format_seconds
from graphcep.io.time_text import SECONDS, Clock

#: Bin widths tried, in seconds, with their names.
BIN_SECONDS = ((1, "second"), (10, "10 s"), (60, "minute"), (600, "10 minutes"),
               (3600, "hour"), (86400, "day"))
MAX_BINS = 300


@dataclass(frozen=True)
class RunTimeline:
    """Edges and matches per bin: bin ``i`` covers ``[origin + i*width, origin +
    (i+1)*width)`` µs of stream time; a match counts in the bin of the time it was
    complete (:data:`~graphcep.pictures.records.MATCH_TIME`)."""

    origin_us: int
    width_us: int
    unit: str
    edges: np.ndarray
    matches: np.ndarray


def bin_width(span_us: int) -> tuple[int, str]:
    """The bin width in µs and its name for a stream spanning ``span_us``: beyond
    :data:`MAX_BINS` days (one wrong timestamp years away will do), 10, 100, ... days,
    so that a picture never has more than :data:`MAX_BINS` bins."""
    for seconds, unit in BIN_SECONDS:
        if span_us // (seconds * US_PER_SECOND) < MAX_BINS:
            return seconds * US_PER_SECOND, unit
    day = BIN_SECONDS[-1][0] * US_PER_SECOND
    days = 10
    while span_us // (days * day) >= MAX_BINS:
        days *= 10
    return days * day, f"{days:,} days"


def run_timeline(edge_times: np.ndarray, match_times: np.ndarray) -> RunTimeline:
    """Count edges and matches per bin (times in µs; the bins span the edges)."""
    if edge_times.size == 0:
        return RunTimeline(0, US_PER_SECOND, "second", np.zeros(0, np.int64),
                           np.zeros(0, np.int64))
    low, high = int(edge_times.min()), int(edge_times.max())
    width, unit = bin_width(high - low)
    origin = low - low % width
    size = (high - origin) // width + 1
    return RunTimeline(origin, width, unit, _counts(edge_times, origin, width, size),
                       _counts(match_times, origin, width, size))


def _counts(times: np.ndarray, origin: int, width: int, size: int) -> np.ndarray:
    bins = (np.asarray(times, dtype=np.int64) - origin) // width
    return np.bincount(np.clip(bins, 0, size - 1), minlength=size)[:size]


def edge_times(edges: Any) -> np.ndarray:
    """The edges' start times in µs, from an Arrow table or a Spark frame (one
    projected collect of the ``t`` column)."""
    if isinstance(edges, pa.Table):
        return edges.column("t").to_numpy()
    return edges.select("t").toArrow().column("t").to_numpy()


def match_times(matches: pa.Table) -> np.ndarray:
    """When each match of a run's match table was complete, in µs."""
    from graphcep.pictures.records import match_time_column

    if matches.num_rows == 0:
        return np.zeros(0, np.int64)
    return matches.column(match_time_column(matches.column_names)).to_numpy()


def plot_run(timeline: RunTimeline, path: str | Path, clock: Clock = SECONDS) -> None:
    """Edges per bin (bars, left axis) against matches per bin (line, right axis); the
    axis counts from the first bin's start, written as ``clock`` writes times (a date
    under ``--time-format iso``)."""
    from graphcep.pictures.draw import pyplot

    plt = pyplot()
    fig, left = plt.subplots(figsize=(8.0, 3.6), dpi=100)
    try:
        span_s = timeline.edges.size * timeline.width_us / US_PER_SECOND
        scale, unit_name = axis_unit(span_s)
        x = np.arange(timeline.edges.size) * timeline.width_us / US_PER_SECOND / scale
        width = timeline.width_us / US_PER_SECOND / scale
        left.bar(x, timeline.edges, width=width, align="edge", color="#9db7d5",
                 label=f"edges per {timeline.unit}")
        left.set_ylabel(f"edges per {timeline.unit}")
        left.set_xlabel(f"{unit_name} after {origin_text(timeline.origin_us, clock)}")
        plain_ticks(left)
        right = left.twinx()
        right.stairs(timeline.matches, np.append(x, x[-1] + width) if x.size else [0],
                     color="#d9480f", linewidth=1.8, label=f"matches per {timeline.unit}")
        right.set_ylabel(f"matches per {timeline.unit}", color="#d9480f")
        right.set_ylim(bottom=0)
        left.set_title(f"edges and matches per {timeline.unit}", fontsize=10)
        fig.legend(loc="lower right", fontsize=8, framealpha=0.9)
        fig.savefig(path, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)


@dataclass
class StreamProgress:
    """A stream's micro-batches as they finish: when (seconds since the start), edges
    in, late, matches, edges in the window and in the reorder buffer, and how long
    each took. Filled by :meth:`record` from the progress reports."""

    started: float
    rows: list[dict[str, float]] = field(default_factory=list)

    def record(self, report: Any, now: float) -> None:
        """Note one :class:`~graphcep.runtime.streaming.driver.BatchReport` finished at ``now``
        (``time.perf_counter()``)."""
        self.rows.append({"batch": report.batch_id, "at": now - self.started,
                          "edges_in": report.edges_in, "late": report.late,
                          "matches": report.matches, "window": report.state.get("edges", 0),
                          "buffered": report.buffered, "seconds": report.seconds})

    def column(self, name: str) -> np.ndarray:
        return np.array([row[name] for row in self.rows], dtype=float)


def plot_stream(progress: StreamProgress, path: str | Path) -> None:
    """Three panels over the run's wall-clock time: edges in the window and the reorder
    buffer, late edges per micro-batch, and each micro-batch's latency."""
    from graphcep.pictures.draw import pyplot

    plt = pyplot()
    fig, (held, late, latency) = plt.subplots(3, 1, figsize=(8.0, 7.0), dpi=100, sharex=True)
    try:
        at = progress.column("at")
        scale, unit = axis_unit(float(at.max()) if at.size else 0.0)
        at = at / scale
        held.plot(at, progress.column("window"), marker="o", label="edges in the window")
        held.plot(at, progress.column("buffered"), marker=".", label="edges in the buffer")
        held.legend(fontsize=8)
        held.set_ylabel("edges held")
        late.bar(at, progress.column("late"), width=_bar_width(at), color="#d9480f")
        late.set_ylabel("late edges")
        latency.plot(at, progress.column("seconds"), marker="o", color="#2b8a3e")
        latency.set_ylabel("batch seconds")
        latency.set_xlabel(f"{unit} since the start")
        plain_ticks(latency)
        for panel in (held, late, latency):
            panel.set_ylim(bottom=0, top=max(panel.get_ylim()[1], 1))
        held.set_title(f"{len(progress.rows):,} micro-batches", fontsize=10)
        fig.savefig(path, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)


def origin_text(origin_us: int, clock: Clock = SECONDS) -> str:
    """Where a time axis starts, in its label: a date under an ISO clock.

    >>> from graphcep.io.time_text import ISO
    >>> origin_text(1_709_287_200_000_000), origin_text(1_709_287_200_000_000, ISO)
    ('t = 1709287200 s', '2024-03-01T10:00:00Z')
    """
    return clock.text(origin_us) if clock.iso else f"t = {format_seconds(origin_us)} s"


def axis_unit(span_s: float) -> tuple[float, str]:
    """Seconds per tick unit and its name for a time axis spanning ``span_s`` seconds:
    seconds up to 2 hours, then minutes, hours (from 2 days) and days (from 60 days), so
    that tick labels stay short numbers with no hidden offset."""
    for limit, scale, name in ((7200, 1.0, "seconds"), (2 * 86400, 60.0, "minutes"),
                               (60 * 86400, 3600.0, "hours")):
        if span_s <= limit:
            return scale, name
    return 86400.0, "days"


def plain_ticks(ax: Any) -> None:
    """Tick labels as plain numbers: matplotlib's offset (``1e6``, drawn in a corner a
    legend may cover) made a 15-day stream read as 1.2 seconds."""
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)


def _bar_width(at: np.ndarray) -> float:
    """Bars 80% as wide as the closest two micro-batches are apart (half a second for
    one batch)."""
    gaps = np.diff(at)
    return float(gaps.min()) * 0.8 if gaps.size and gaps.min() > 0 else 0.5
