"""Progressive window widening in batch on Spark: the driver cuts the windows, Spark tasks
run the detector on them in parallel, the driver keeps each instance once.

**Design.** Every window of progressive window widening is independent of the others
once it is cut (:mod:`graphcep.runtime.widening`), and what a window holds depends only
on the stream, never on what the detector found. So:

1. The driver collects the edges (read by Spark, as every Spark run reads them), binds
   the job to the data and sorts the stream, exactly as the in-process run does
   (:func:`~graphcep.runtime.widening.widening_input`).
2. The driver cuts every window, at every level, with the in-process runtime's own
   :class:`~graphcep.runtime.widening.WindowPlanner` (level-0 batches of ``T0``, level
   ``k`` windows of two batches of ``2**k * T0`` with half overlap, combined batches
   longer than ``2L`` records losing their middle). Each window carries its level and
   its place in the order a stream closes windows (:attr:`Window.order`). Cutting is
   cheap next to detecting: the windows above level 0 hold at most ``4L`` records each.
3. The windows are dealt into groups of about equal records, one Spark task per group;
   a task runs the detector on each of its windows in a fresh engine
   (:func:`~graphcep.runtime.widening.detect`, the function the in-process run calls)
   and returns each window's instances, each at its first match row, tagged with the
   window's order and the instance's identity (:meth:`ReplayJob.instances`).
4. The driver keeps each instance at its earliest window -- the one the in-process run
   reports it from -- and puts the rows in that window order: the same rows, fields and
   order as :func:`~graphcep.runtime.widening.run_widening`.

The combining of batches runs on the driver, not as a distributed per-level combine: it
is a walk over the sorted stream, linear in its records; the detector, where the time
goes, runs in parallel. The driver holds the stream and its windows (about twice the
stream's records, level 0's windows overlapping by half), as a batch run holds its
input.

The summary's per-level figures are the in-process run's: windows run, records held and
records dropped come from the planner, detector seconds are summed over the tasks, and
instances counted at the level each is kept at.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.jobs.base import ReplayJob
from graphcep.runtime.widening import (
    WideningStats,
    Window,
    detect,
    plan_windows,
    widened_schema,
    widening_input,
)

#: the columns a task adds to its rows: the window's order and the instance's identity
ORDER, KEY = "_pww_order", "_pww_key"


def deal_windows(windows: list[Window], groups: int) -> list[list[Window]]:
    """The windows in at most ``groups`` groups of about equal records (the largest
    window first to the lightest group), each group in window order.

    >>> ws = [Window(0, i, pa.table({"t": [0] * n})) for i, n in enumerate([5, 1, 1, 3])]
    >>> [[w.order for w in g] for g in deal_windows(ws, 2)]
    [[0], [1, 2, 3]]
    """
    loads = [0] * max(1, min(groups, len(windows)))
    dealt: list[list[Window]] = [[] for _ in loads]
    for window in sorted(windows, key=lambda w: (-w.records.num_rows, w.order)):
        lightest = loads.index(min(loads))
        loads[lightest] += window.records.num_rows
        dealt[lightest].append(window)
    return [sorted(group, key=lambda w: w.order) for group in dealt if group]


def run_windows(job: ReplayJob, base_us: int, windows: list[Window]
                ) -> tuple[pa.Table, dict[int, float]]:
    """What one task runs: the detector on each window; each window's instances (its
    first row of each) tagged with the window's order and the instance's identity, and
    the detector's seconds per level."""
    tables, seconds, bounded = [], {}, {}
    for window in windows:
        found = detect(job, window, base_us, bounded)
        seconds[window.level] = seconds.get(window.level, 0.0) + found.seconds
        n = found.rows.num_rows
        if n:
            tables.append(found.rows.append_column(
                ORDER, pa.array(np.full(n, window.order, np.int64))).append_column(
                KEY, pa.array(found.keys, pa.string())))
    return pa.concat_tables(tables) if tables else tagged_schema(job).empty_table(), seconds


def tagged_schema(job: ReplayJob) -> pa.Schema:
    return widened_schema(job.output.schema).append(pa.field(ORDER, pa.int64())).append(
        pa.field(KEY, pa.string()))


def first_reports(job: ReplayJob, found: list[pa.Table]) -> pa.Table:
    """Each instance once, from the earliest window that found it, in window order (and
    in a window, in its rows' order): what the in-process run reports.

    >>> t = pa.table({"x": [1, 2, 3], ORDER: [4, 2, 2], KEY: ["a", "a", "b"]})
    >>> first_reports(None, [t]).to_pylist()
    [{'x': 2}, {'x': 3}]
    """
    tagged = pa.concat_tables(found) if found else tagged_schema(job).empty_table()
    ordered = tagged.take(pa.array(np.argsort(tagged.column(ORDER).to_numpy(), kind="stable")))
    first: dict[str, int] = {}
    for i, key in enumerate(ordered.column(KEY).to_pylist()):
        first.setdefault(key, i)
    rows = np.fromiter(first.values(), np.int64, len(first))
    return ordered.take(pa.array(rows)).drop_columns([ORDER, KEY])


def run_widening_spark(spark, job: ReplayJob, edges: Any, *, keep: int, base_us: int,
                       max_duration_us: int | None = None, tasks: int | None = None
                       ) -> tuple[pa.Table, WideningStats]:
    """Every instance progressive window widening reports over ``edges`` (a Spark
    DataFrame or an Arrow table, any order), once each, with its level, report time and
    delay: row for row what :func:`~graphcep.runtime.widening.run_widening` returns, the
    detector run in ``tasks`` parallel Spark tasks (default: twice the cores)."""
    started = time.perf_counter()
    table = edges if isinstance(edges, pa.Table) else edges.toArrow()
    job, stream = widening_input(job, table)
    windows, planner = plan_windows(job.orient, stream, keep=keep, base_us=base_us,
                                    numbering=job.stream_numbering(),
                                    max_duration_us=max_duration_us)
    groups = deal_windows(windows, tasks or 2 * spark.sparkContext.defaultParallelism)
    levels = planner.stats()
    found: list[pa.Table] = []
    if windows:
        def run_group(parts: Iterator[list[Window]]) -> Iterator[tuple[pa.Table, dict]]:
            for group in parts:
                yield run_windows(job, base_us, group)

        done = spark.sparkContext.parallelize(groups, len(groups)).mapPartitions(
            run_group).collect()
        for rows, seconds in done:
            found.append(rows)
            for k, s in seconds.items():
                levels[k].detector_seconds += s
    matches = first_reports(job, found)
    for k, count in zip(*np.unique(matches.column("pww_level").to_numpy(), return_counts=True),
                        strict=True):
        levels[int(k)].instances = int(count)
    stats = WideningStats(stream.num_rows, matches.num_rows, time.perf_counter() - started,
                          levels)
    return matches, stats
