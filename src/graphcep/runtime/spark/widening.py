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
   longer than ``2L`` records losing their middle), each window kept as the row numbers
   of its records (:func:`~graphcep.runtime.widening.plan_cuts`), with its level and its
   place in the order a stream closes windows (:attr:`Window.order`). Cutting is cheap
   next to detecting: the windows above level 0 hold at most ``4L`` records each.
3. The windows, in that order, are dealt into runs of neighbouring windows of about
   equal records (:func:`deal_cuts`), one Spark task per run. A task is sent a
   :class:`Task`: its windows' records, each once, taken into a table of its own, and
   its windows' row numbers in it. It cuts each window from that table, runs the
   detector on it in a fresh engine (:func:`~graphcep.runtime.widening.detect`, the
   function the in-process run calls) and returns each window's instances, each at its
   first match row, tagged with the window's order and the instance's identity
   (:meth:`ReplayJob.instances`).
4. The driver keeps each instance at its earliest window -- the one the in-process run
   reports it from -- and puts the rows in that window order: the same rows, fields and
   order as :func:`~graphcep.runtime.widening.run_widening`.

**Memory.** Windows are never sent as slices of the stream: an Arrow slice pickles with
its parent's buffers, so each window would carry the whole stream (windows x stream in
all). A task's table holds its windows' records once; neighbouring windows share most of
theirs (a level-0 window half with the next, a level's windows the ends of the same
batches), so all tasks together are sent a few times the stream, and a run holds at most
:data:`TASK_RECORDS` window records (plus one window), so no task's share grows with the
stream. The combining of batches runs on the driver, not as a distributed per-level
combine: it is a walk over the sorted stream, linear in its records; the driver holds the
stream, as a batch run holds its input, and 8 bytes per window record while it cuts. The
detector, where the time goes, runs in parallel.

The summary's per-level figures are the in-process run's: windows run, records held and
records dropped come from the planner, detector seconds are summed over the tasks, and
instances counted at the level each is kept at.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.jobs.base import ReplayJob
from graphcep.runtime.widening import (
    WideningStats,
    Window,
    WindowCut,
    WindowPlanner,
    detect,
    plan_cuts,
    widened_schema,
    widening_input,
)

#: the columns a task adds to its rows: the window's order and the instance's identity
ORDER, KEY = "_pww_order", "_pww_key"


#: the most window records one task is sent (its windows' records, each once): the
#: bound on what a task and its piece of the driver's list of tasks hold
TASK_RECORDS = 1 << 18


@dataclass(frozen=True)
class Task:
    """What one Spark task is sent: the records its windows hold, each once, in a table
    of its own (taken from the stream's records, so no buffer of the stream travels with
    it), and its windows as row numbers into that table, all windows' in one array (a
    window costs three numbers, not an object of its own).

    >>> records = pa.table({"t": [10, 20, 30, 40]})
    >>> cuts = [WindowCut(0, 5, np.array([1, 2])), WindowCut(1, 6, np.array([2, 3]))]
    >>> task = Task.of(records, cuts)
    >>> task.records.column("t").to_pylist(), task.rows.tolist()
    ([20, 30, 40], [0, 1, 1, 2])
    >>> [(w.level, w.order, w.records.column("t").to_pylist()) for w in task.windows()]
    [(0, 5, [20, 30]), (1, 6, [30, 40])]
    """

    records: pa.Table
    levels: np.ndarray  #: each window's level
    orders: np.ndarray  #: each window's place in the order a stream closes windows
    ends: np.ndarray  #: where each window's rows end in :attr:`rows`
    rows: np.ndarray  #: the windows' rows in :attr:`records`, one window after another

    @classmethod
    def of(cls, records: pa.Table, cuts: list[WindowCut]) -> Task:
        """The task of ``cuts``, windows of ``records``."""
        rows = np.concatenate([cut.rows for cut in cuts])
        held = np.unique(rows)
        local = np.searchsorted(held, rows).astype(np.int32 if len(held) < 2**31 else np.int64)
        return cls(records.take(pa.array(held)), np.array([c.level for c in cuts], np.int32),
                   np.array([c.order for c in cuts], np.int64),
                   np.cumsum([len(c.rows) for c in cuts], dtype=np.int64), local)

    def windows(self) -> Iterator[Window]:
        """The task's windows, in order, each a table of its own."""
        starts = np.r_[0, self.ends[:-1]]
        for level, order, start, end in zip(self.levels, self.orders, starts, self.ends,
                                            strict=True):
            yield WindowCut(int(level), int(order), self.rows[start:end]).window(self.records)


def deal_cuts(cuts: list[WindowCut], groups: int) -> list[list[WindowCut]]:
    """The windows, in order, in runs of about equal records: ``groups`` runs, or more
    where a run would hold more than :data:`TASK_RECORDS` records, or fewer where there
    are fewer windows (or one holds more than a run's share). A run's windows are
    neighbours in time, so they share most of their records (a level-0 window shares
    half with the next), and its task is sent each record once.

    >>> cuts = [WindowCut(0, i, np.arange(n)) for i, n in enumerate([5, 1, 1, 3])]
    >>> [[c.order for c in g] for g in deal_cuts(cuts, 2)]
    [[0], [1, 2, 3]]
    """
    if not cuts:
        return []
    loads = np.cumsum([len(cut.rows) for cut in cuts])
    total = int(loads[-1])
    runs = max(1, min(len(cuts), max(groups, -(-total // TASK_RECORDS))))
    before = np.r_[0, loads[:-1]]  # the records of the windows before each
    run_of = before * runs // max(total, 1)
    starts = np.r_[0, np.flatnonzero(np.diff(run_of)) + 1]
    return [cuts[a:b] for a, b in zip(starts, np.r_[starts[1:], len(cuts)], strict=True)]


def run_windows(job: ReplayJob, base_us: int, windows: Iterable[Window]
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
    detector run in at least ``tasks`` parallel Spark tasks (default: twice the cores;
    more where a task would be sent more than :data:`TASK_RECORDS` records)."""
    started = time.perf_counter()
    table = edges if isinstance(edges, pa.Table) else edges.toArrow()
    job, stream = widening_input(job, table)
    del table  # the sorted stream replaces it (when it was out of order)
    sent, planner = plan_tasks(job, stream, keep=keep, base_us=base_us,
                               max_duration_us=max_duration_us,
                               groups=tasks or 2 * spark.sparkContext.defaultParallelism)
    levels = planner.stats()
    found: list[pa.Table] = []
    if sent:
        def run_tasks(parts: Iterator[Task]) -> Iterator[tuple[pa.Table, dict]]:
            for task in parts:
                yield run_windows(job, base_us, task.windows())

        tasks_rdd = spark.sparkContext.parallelize(sent, len(sent))
        del sent  # parallelize has written the tasks out: the driver need not hold them
        done = tasks_rdd.mapPartitions(run_tasks).collect()
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


def plan_tasks(job: ReplayJob, stream: pa.Table, *, keep: int, base_us: int,
               max_duration_us: int | None, groups: int) -> tuple[list[Task], WindowPlanner]:
    """Every window of ``stream`` (sorted, ``job`` bound to it) in tasks of at least
    ``groups`` runs of windows (:func:`deal_cuts`), each task sent its records only; and
    the planner that cut the windows (its levels' figures)."""
    records, cuts, planner = plan_cuts(job.orient, stream, keep=keep, base_us=base_us,
                                       numbering=job.stream_numbering(),
                                       max_duration_us=max_duration_us)
    return [Task.of(records, run) for run in deal_cuts(cuts, groups)], planner
