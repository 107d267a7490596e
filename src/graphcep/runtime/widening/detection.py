"""The detector in one window, as both runtimes run it: a fresh engine of the job bounded
by the window's span replays the window's records, and each instance found keeps its
first match row, with the window's level, report time and delay added.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.jobs import as_job
>>> from graphcep.lang.nu import parse_nu
>>> from graphcep.runtime.widening.planner import plan_windows
>>> job = as_job(parse_nu("a ~> b", "ab")).bind(0)
>>> edges = pa.table({"t": [0, 5], "src": ["a", "x"], "dst": ["b", "y"]})
>>> windows, _ = plan_windows(job.orient, edges, keep=2, base_us=1_000_000)
>>> found = detect(job, windows[0], 1_000_000)
>>> found.rows.select(["pww_level", "pww_report_t", "pww_delay_us"]).to_pylist()
[{'pww_level': 0, 'pww_report_t': 5, 'pww_delay_us': 5}]
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from graphcep.jobs.base import ReplayJob
from graphcep.runtime.local import replay
from graphcep.runtime.widening.planner import Window, window_span_us

#: The columns widening adds to the job's match records.
PWW_FIELDS = [pa.field("pww_level", pa.int32()), pa.field("pww_report_t", pa.int64()),
              pa.field("pww_delay_us", pa.int64())]


def widened_schema(schema: pa.Schema) -> pa.Schema:
    """A job's match schema with the level, report time and detection delay added."""
    return pa.schema(list(schema) + PWW_FIELDS)


@functools.lru_cache(maxsize=32)
def no_instances(schema: pa.Schema) -> pa.Table:
    """The empty widened table of a job's match ``schema``, built once: most windows find
    nothing, and building an empty table of nested types costs about 0.1 ms."""
    return widened_schema(schema).empty_table()


@dataclass(frozen=True)
class Found:
    """A window's instances, each once (its first match row in the window): the rows
    with the widening fields, each instance's identity, the start times of its first and
    last records, and the detector's seconds."""

    rows: pa.Table
    keys: list[str]
    first_t: np.ndarray
    last_t: np.ndarray
    seconds: float


def detect(job: ReplayJob, window: Window, base_us: int,
           bounded: dict[int, ReplayJob] | None = None) -> Found:
    """Replay ``window`` in a fresh engine of ``job`` (a bound job) bounded by the
    window's span -- read as the job's stream numbering says, where it has one
    (:meth:`~graphcep.jobs.base.ReplayJob.stream_numbering`); its instances, each at its
    first match row. ``bounded``, kept by the caller across windows, holds the job
    bounded by each level's span (a level's windows share it)."""
    started = time.perf_counter()
    matches = _replayed(job, window, base_us, {} if bounded is None else bounded)
    seconds = time.perf_counter() - started
    if matches is None:
        return Found(no_instances(job.output.schema), [],
                     np.empty(0, np.int64), np.empty(0, np.int64), seconds)
    instances = job.instances(matches)
    first: dict[str, int] = {}
    for i, key in enumerate(instances.keys):  # a key twice in one window is one instance
        first.setdefault(key, i)
    rows = np.fromiter(first.values(), np.int64, len(first))
    report_t = window.report_t
    delay = report_t - instances.last_t[rows]
    table = matches.take(pa.array(rows)).append_column(PWW_FIELDS[0], pa.array(
        np.full(len(rows), window.level, np.int32))).append_column(
        PWW_FIELDS[1], pa.array(np.full(len(rows), report_t, np.int64))).append_column(
        PWW_FIELDS[2], pa.array(delay.astype(np.int64)))
    return Found(table, list(first), instances.first_t[rows], instances.last_t[rows], seconds)


def _replayed(job: ReplayJob, window: Window, base_us: int,
              bounded: dict[int, ReplayJob]) -> pa.Table | None:
    """The window's match rows in the stream's terms; None when no match fits the window
    (no engine starts) or none was found."""
    if window.records.num_rows < job.min_records:
        return None
    numbering = job.stream_numbering()
    span = window_span_us(base_us, window.level)
    if numbering is None:
        records, restore = window.records, None
        runs = bounded.get(window.level)
        if runs is None:
            runs = bounded[window.level] = job.bounded_by(span)
    else:  # a job of the window's own runs
        runs, records, restore = numbering.window(job, window.records)
        runs = runs.bounded_by(span)
    parts = list(replay(runs.new_engine(), records))
    if not parts:
        return None
    matches = pa.concat_tables(parts)
    return matches if restore is None else restore(matches)
