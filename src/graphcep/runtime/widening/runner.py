"""Progressive window widening around a job, in-process: :class:`Widening` is fed
micro-batches (``push``), ``advance`` closes batches by a watermark and ``flush`` ends
the stream; :func:`run_widening` runs a whole edge table. The algorithm, the identity of
instances and the report time are stated in :mod:`graphcep.runtime.widening`.

Example (a two-hop path whose hops are 30 s apart: level 0's windows of 2 s miss it,
level 4's, of 32 s, hold it)
-------
>>> import pyarrow as pa
>>> from graphcep.jobs import as_job
>>> from graphcep.patterns.subgraph import QueryBuilder
>>> path = QueryBuilder("path").edge("a", "e1", "b").edge("b", "e2", "c")
>>> job = as_job(path.before("e1", "e2").build())   # no time bound: the windows give it
>>> edges = pa.table({"t": [0, 30_000_000, 31_000_000], "src": ["x", "y", "q"],
...                   "dst": ["y", "z", "r"]})
>>> matches, stats = run_widening(job, edges, keep=4, base_us=1_000_000)
>>> matches.select(["pww_level", "pww_report_t", "pww_delay_us"]).to_pylist()
[{'pww_level': 4, 'pww_report_t': 31000000, 'pww_delay_us': 1000000}]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.engines.base import check_stream_order, numbered_batch
from graphcep.events import max_duration_of, normalize_edges, sort_stream
from graphcep.jobs.base import ReplayJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.local import replay
from graphcep.runtime.widening.levels import Level, LevelStats, compress, levels_for

#: The columns widening adds to the job's match records.
PWW_FIELDS = [pa.field("pww_level", pa.int32()), pa.field("pww_report_t", pa.int64()),
              pa.field("pww_delay_us", pa.int64())]
_END = 1 << 80  # a batch index past every stream's (flush closes every batch before it)


def widened_schema(schema: pa.Schema) -> pa.Schema:
    """A job's match schema with the level, report time and detection delay added."""
    return pa.schema(list(schema) + PWW_FIELDS)


@dataclass
class WideningStats:
    """A run's numbers: edges read, instances reported, and per level what it did."""

    edges: int = 0
    matches: int = 0
    seconds: float = 0.0
    levels: list[LevelStats] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"pww_levels": [s.as_dict() for s in self.levels]}


class Widening:
    """Progressive window widening of ``job`` (a bound job) over a stream.

    Parameters
    ----------
    job
        The detector, used as a black box over each window's records: every window is
        replayed in a fresh engine from ``job.bounded_by(window span).new_engine()``.
    keep
        ``L``: the most records a pattern instance spans; combined batches keep ``L``
        records at each end.
    base_us
        ``T0``: level 0's batch duration (µs); batch ``j`` is ``[j * T0, (j + 1) * T0)``.
    max_duration_us
        ``D``: a bound on an instance's duration (its first to last record), fixing the
        number of levels (None: a level is added whenever the top one combines a batch).
    """

    def __init__(self, job: ReplayJob, keep: int, base_us: int,
                 max_duration_us: int | None = None) -> None:
        if keep < 1:
            raise QueryError("--pww: L (records a pattern instance spans) must be at least 1")
        if base_us < 1:
            raise QueryError("--pww-base must be at least 1 µs")
        self.job, self.keep, self.base_us = job, keep, base_us
        self.max_levels = levels_for(base_us, max_duration_us)
        self.levels: list[Level] = []
        self._jobs: list[ReplayJob] = []
        self._open: list[pa.Table] = []  # level 0's batch being filled
        self._open_index: int | None = None
        self._last: tuple[int, int] | None = None  # (t, seq) of the newest edge
        self._next_seq = 0
        self._seen: dict[str, tuple[int, int]] = {}  # identity -> (first_t, last_t)
        self._gc_at = 4096
        self._out: list[pa.Table] = []
        self._flushing = False
        self.edges = 0
        self._level(0)

    # -- the stream ---------------------------------------------------------------------

    def push(self, batch: pa.Table) -> pa.Table:
        """Take a batch in stream order; return the instances reported by the windows it
        closes (a batch closes when an edge of a later batch arrives)."""
        table = numbered_batch(self.job.orient(batch), self._next_seq)
        if table is None:
            return self._reports()
        t = table.column("t").to_numpy().astype(np.int64)
        seq = table.column("seq").to_numpy().astype(np.int64)
        check_stream_order(t, seq, self._last)
        self._last, self._next_seq = (int(t[-1]), int(seq[-1])), int(seq[-1]) + 1
        self.edges += table.num_rows
        index = t // self.base_us
        cuts = np.flatnonzero(np.diff(index)) + 1
        for start, stop in zip(np.r_[0, cuts], np.r_[cuts, len(t)], strict=True):
            self._fill(int(index[start]), table.slice(int(start), int(stop - start)))
        return self._reports()

    def advance(self, watermark_us: int) -> pa.Table:
        """No edge before ``watermark_us`` will come: close the batches that end by it."""
        self._close_open_before(watermark_us // self.base_us)
        return self._reports()

    def flush(self) -> pa.Table:
        """The stream has ended: close every batch and every level's waiting half."""
        self._flushing = True
        self._close_open_before(_END)
        return self._reports()

    def stats(self) -> list[LevelStats]:
        return [level.stats for level in self.levels]

    # -- level 0 --------------------------------------------------------------------------

    def _fill(self, index: int, part: pa.Table) -> None:
        if self._open_index is not None and index != self._open_index:
            self._close_open_before(index)
        self._open_index = index
        self._open.append(part)
        level = self.levels[0]
        opened = sum(p.num_rows for p in self._open)
        level.stats.records_held = max(level.stats.records_held, level.held() + opened)

    def _close_open_before(self, index: int) -> None:
        """Close level 0's open batch if it is before ``index``; every level-0 batch
        before ``index`` is then closed."""
        if self._open_index is not None and self._open_index < index:
            batch, j = pa.concat_tables(self._open), self._open_index
            self._open, self._open_index = [], None
            self._closed(0, j, batch)
        self._advance(0, index)
        self._collect_garbage()

    # -- the levels -----------------------------------------------------------------------

    def _level(self, k: int) -> Level:
        while len(self.levels) <= k:
            n = len(self.levels)
            batch_us = self.base_us << n
            self.levels.append(Level(n, batch_us))
            self._jobs.append(self.job.bounded_by(2 * batch_us))  # a window's start times
        return self.levels[k]

    def _closed(self, k: int, j: int, batch: pa.Table) -> None:
        """Batch ``j`` of level ``k`` (not empty) is complete: run the window it closes,
        keep it, and combine it with its even partner for level ``k + 1``."""
        self._advance(k, j)
        level = self._level(k)
        self._run(level, level.window(j, batch))
        level.last = (j, batch)
        level.first = j if level.first is None else level.first
        level.newest = j
        if j % 2 == 0:
            level.half = (j, batch)
        else:
            partner = level.half[1] if level.half and level.half[0] == j - 1 else None
            level.half = None
            self._up(level, j // 2, batch if partner is None
                     else pa.concat_tables([partner, batch]))
        level.stats.records_held = max(level.stats.records_held, level.held())

    def _advance(self, k: int, index: int) -> None:
        """Every batch of level ``k`` before ``index`` is closed: a waiting even batch
        whose partner was empty goes up alone; a kept batch no later one is adjacent to
        is dropped; the level above is advanced to match."""
        level = self.levels[k]
        if level.half is not None and level.half[0] + 1 < index:
            (m, batch), level.half = level.half, None
            self._up(level, m // 2, batch)
        if level.last is not None and level.last[0] < index - 1:
            level.last = None
        if k + 1 < len(self.levels):
            self._advance(k + 1, index // 2)

    def _up(self, level: Level, i: int, combined: pa.Table) -> None:
        """Hand a combined batch to the level above (Algorithm 2), unless there is none:
        the top of a bounded run, or, at the stream's end, a level whose records all lie
        in one window it ran (every level above would hold a subset)."""
        k = level.k
        if (self.max_levels is not None and k + 1 >= self.max_levels) or \
                (self._flushing and level.one_window()):
            return
        kept = compress(combined, self.keep)
        level.stats.dropped += combined.num_rows - kept.num_rows
        self._level(k + 1)
        self._closed(k + 1, i, kept)

    # -- the detector -------------------------------------------------------------------

    def _run(self, level: Level, window: pa.Table) -> None:
        """Replay ``window`` in a fresh engine; keep the instances not reported before."""
        started = time.perf_counter()
        engine = self._jobs[level.k].new_engine()
        parts = list(replay(engine, window))
        level.stats.detector_seconds += time.perf_counter() - started
        level.stats.windows += 1
        if not parts:
            return
        matches = pa.concat_tables(parts)
        found = self.job.instances(matches)
        fresh = []
        for i, key in enumerate(found.keys):  # a key twice in one window is one instance
            if key not in self._seen:
                self._seen[key] = (int(found.first_t[i]), int(found.last_t[i]))
                fresh.append(i)
        if not fresh:
            return
        report_t = int(window.column("t")[-1].as_py())
        rows = matches.take(pa.array(fresh, pa.int64()))
        delay = report_t - found.last_t[np.array(fresh)]
        level.stats.instances += len(fresh)
        self._out.append(rows.append_column(PWW_FIELDS[0], pa.array(
            np.full(len(fresh), level.k, np.int32))).append_column(
            PWW_FIELDS[1], pa.array(np.full(len(fresh), report_t, np.int64))).append_column(
            PWW_FIELDS[2], pa.array(delay.astype(np.int64))))

    def _reports(self) -> pa.Table:
        out, self._out = self._out, []
        schema = widened_schema(self.job.output.schema)
        return pa.concat_tables(out) if out else schema.empty_table()

    def _collect_garbage(self) -> None:
        """Forget identities no later window can see again: every record a later window
        may hold is held now (by some level, or in the open batch), and a window seeing an
        instance holds records at its first and last times."""
        if len(self._seen) < self._gc_at:
            return
        held = [t for level in self.levels for t in level.held_tables()] + self._open
        times = set(np.concatenate([t.column("t").to_numpy() for t in held]).tolist()) \
            if held else set()
        self._seen = {key: span for key, span in self._seen.items()
                      if span[0] in times and span[1] in times}
        self._gc_at = max(4096, 2 * len(self._seen))


def run_widening(job: ReplayJob, edges: pa.Table, *, keep: int, base_us: int,
                 max_duration_us: int | None = None) -> tuple[pa.Table, WideningStats]:
    """Every instance progressive window widening reports over ``edges`` (any order;
    sorted here), once each, with its level, report time and delay; bounds the job
    leaves open default to the data's (:meth:`ReplayJob.bind`)."""
    started = time.perf_counter()
    job.check_columns(edges.column_names)
    job = job.bind(max_duration_of(edges))
    widening = Widening(job, keep, base_us, max_duration_us)
    stream = sort_stream(normalize_edges(edges))
    matches = pa.concat_tables([widening.push(stream), widening.flush()])
    stats = WideningStats(stream.num_rows, matches.num_rows,
                          time.perf_counter() - started, widening.stats())
    return matches, stats
