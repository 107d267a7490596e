"""Which windows progressive window widening runs, and with which records: the batching
of the stream, the combining of batches level by level (Algorithm 2) and the sliding
windows of two batches, with nothing of the detector.

Both runtimes cut windows here: the in-process :class:`~graphcep.runtime.widening.Widening`
runs each window as :class:`WindowPlanner` hands it out; the Spark runtime
(:mod:`graphcep.runtime.spark.widening`) plans every window of a stream on the driver as
row numbers of its records (:func:`plan_cuts`) and runs them in parallel tasks, each sent
only its windows' records. A window's :attr:`Window.order` is its place in the order a
stream closes windows, which decides the window that reports an instance.

Example (two batches of 1 s at level 0, combined into level 1's first batch)
-------
>>> import pyarrow as pa
>>> planner = WindowPlanner(lambda t: t, keep=4, base_us=1_000_000)
>>> edges = pa.table({"t": [0, 1_500_000], "src": ["a", "b"], "dst": ["b", "c"]})
>>> [(w.level, w.order, w.records.num_rows) for w in planner.push(edges) + planner.flush()]
[(0, 0, 1), (0, 1, 2)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.engines.base import check_stream_order, numbered_batch
from graphcep.jobs.base import StreamNumbering
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.widening.levels import Level, LevelStats, compress, levels_for

_END = 1 << 80  # a batch index past every stream's (flush closes every batch before it)


@dataclass(frozen=True)
class Window:
    """One window to run the detector on: its level, its place in the order a stream
    closes windows (0, 1, ...) and its records, in stream order."""

    level: int
    order: int
    records: pa.Table

    @property
    def report_t(self) -> int:
        """The start time of the window's last record: when it reports its instances."""
        return int(self.records.column("t")[-1].as_py())


def window_span_us(base_us: int, level: int) -> int:
    """How far apart the start times of a level's window may lie: two batches of
    ``2**level * T0`` (the span the job is bounded by, :meth:`ReplayJob.bounded_by`)."""
    return 2 * (base_us << level)


class WindowPlanner:
    """Cuts a stream into progressive window widening's windows.

    Parameters
    ----------
    orient
        What makes a pushed batch the detector's records (:meth:`ReplayJob.orient`);
        the records are then numbered (``seq``) when they carry no numbers.
    keep
        ``L``: combined batches longer than ``2L`` records keep ``L`` at each end.
    base_us
        ``T0``: level 0's batch duration (µs); batch ``j`` is ``[j * T0, (j + 1) * T0)``.
    max_duration_us
        ``D``: fixes the number of levels (None: a level is added whenever the top one
        combines a batch).
    numbering
        What the job numbers over the whole stream (:meth:`ReplayJob.stream_numbering`):
        applied to every pushed batch after ``orient``, its state kept with the planner's.

    :meth:`push`, :meth:`advance` and :meth:`flush` return the windows they close, in
    order; :attr:`levels` holds each level's state and statistics (windows, records held,
    records dropped).
    """

    def __init__(self, orient: Callable[[pa.Table], pa.Table], keep: int, base_us: int,
                 max_duration_us: int | None = None,
                 numbering: StreamNumbering | None = None) -> None:
        if keep < 1:
            raise QueryError("--pww: L (records a pattern instance spans) must be at least 1")
        if base_us < 1:
            raise QueryError("--pww-base must be at least 1 µs")
        self.orient, self.keep, self.base_us = orient, keep, base_us
        self.numbering = numbering
        self.max_levels = levels_for(base_us, max_duration_us)
        self.levels: list[Level] = []
        self.edges = 0
        self._open: list[pa.Table] = []  # level 0's batch being filled
        self._open_index: int | None = None
        self._last: tuple[int, int] | None = None  # (t, seq) of the newest edge
        self._next_seq = 0
        self._flushing = False
        self._closed_windows: list[Window] = []
        self._order = 0
        self._level(0)

    # -- the stream ---------------------------------------------------------------------

    def push(self, batch: pa.Table) -> list[Window]:
        """Take a batch in stream order; return the windows it closes (a batch closes
        when an edge of a later batch arrives)."""
        table = self._accept(batch)
        if table is not None:
            self._cut(table)
        return self._windows()

    def _accept(self, batch: pa.Table) -> pa.Table | None:
        """A pushed batch as the windows hold it (oriented, numbered, checked to follow
        the stream so far), counted; None when it is empty."""
        table = numbered_batch(self.orient(batch), self._next_seq)
        if table is None:
            return None
        t = table.column("t").to_numpy().astype(np.int64)
        seq = table.column("seq").to_numpy().astype(np.int64)
        check_stream_order(t, seq, self._last)
        if self.numbering is not None:  # after the check: a refused batch counts nothing
            table = self.numbering.number(table)
        self._last, self._next_seq = (int(t[-1]), int(seq[-1])), int(seq[-1]) + 1
        self.edges += table.num_rows
        return table

    def _cut(self, table: pa.Table) -> None:
        """Deal accepted records (any columns beside the edge's) to level 0's batches."""
        index = table.column("t").to_numpy().astype(np.int64) // self.base_us
        cuts = np.flatnonzero(np.diff(index)) + 1
        for start, stop in zip(np.r_[0, cuts], np.r_[cuts, len(index)], strict=True):
            self._fill(int(index[start]), table.slice(int(start), int(stop - start)))

    def advance(self, watermark_us: int) -> list[Window]:
        """No edge before ``watermark_us`` will come: close the batches that end by it."""
        self._close_open_before(watermark_us // self.base_us)
        return self._windows()

    def flush(self) -> list[Window]:
        """The stream has ended: close every batch and every level's waiting half."""
        self._flushing = True
        self._close_open_before(_END)
        return self._windows()

    def stats(self) -> list[LevelStats]:
        return [level.stats for level in self.levels]

    # -- checkpoints --------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything the planner holds between calls, for a checkpoint (picklable): the
        levels (each at most one batch; above level 0 at most ``2L`` records), level 0's
        open batch, the newest edge's ``(t, seq)`` and the window count. Taken between
        calls, when no closed window is waiting to be handed out."""
        assert not self._closed_windows, "state taken while windows are being handed out"
        return {"keep": self.keep, "base_us": self.base_us, "max_levels": self.max_levels,
                "levels": self.levels, "edges": self.edges, "open": self._open,
                "open_index": self._open_index, "last": self._last,
                "next_seq": self._next_seq, "flushing": self._flushing,
                "order": self._order, "numbering": self.numbering}

    @classmethod
    def from_state(cls, orient: Callable[[pa.Table], pa.Table],
                   state: dict[str, Any]) -> WindowPlanner:
        """A planner continuing from :meth:`state` (``orient`` as the job gives it)."""
        planner = cls(orient, state["keep"], state["base_us"])
        planner.max_levels, planner.levels = state["max_levels"], state["levels"]
        planner.edges, planner._open = state["edges"], state["open"]
        planner._open_index, planner._last = state["open_index"], state["last"]
        planner._next_seq, planner._flushing = state["next_seq"], state["flushing"]
        planner._order = state["order"]
        planner.numbering = state.get("numbering")
        return planner

    def held_by_level(self) -> list[int]:
        """The records each level holds now (level 0's open batch counted at level 0)."""
        held = [level.held() for level in self.levels]
        held[0] += sum(t.num_rows for t in self._open)
        return held

    def held_tables(self) -> list[pa.Table]:
        """Every record a later window may hold: the levels' batches and the open one."""
        return [t for level in self.levels for t in level.held_tables()] + self._open

    def _windows(self) -> list[Window]:
        out, self._closed_windows = self._closed_windows, []
        return out

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

    # -- the levels -----------------------------------------------------------------------

    def _level(self, k: int) -> Level:
        while len(self.levels) <= k:
            self.levels.append(Level(len(self.levels), self.base_us << len(self.levels)))
        return self.levels[k]

    def _closed(self, k: int, j: int, batch: pa.Table) -> None:
        """Batch ``j`` of level ``k`` (not empty) is complete: close the window it ends,
        keep it, and combine it with its even partner for level ``k + 1``."""
        self._advance(k, j)
        level = self._level(k)
        level.stats.windows += 1
        self._closed_windows.append(Window(k, self._order, level.window(j, batch)))
        self._order += 1
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


def plan_windows(orient: Callable[[pa.Table], pa.Table], stream: pa.Table, *, keep: int,
                 base_us: int, max_duration_us: int | None = None,
                 numbering: StreamNumbering | None = None
                 ) -> tuple[list[Window], WindowPlanner]:
    """Every window of a whole stream (in stream order), in the order a stream closes
    them, and the planner that cut them (its levels' statistics)."""
    planner = WindowPlanner(orient, keep, base_us, max_duration_us, numbering)
    return planner.push(stream) + planner.flush(), planner


#: the private column that numbers a stream's records while :func:`plan_cuts` cuts them
_ROW = "_pww_row"
#: records cut at a time from a whole stream (:func:`plan_cuts`,
#: :func:`~graphcep.runtime.widening.run_widening`): the windows they close are run or
#: turned into row numbers before the next records are cut, so only their tables live at
#: once (a window's table costs kilobytes however few its records: a stream of 20,000
#: netflows closes 60,000 windows)
CUT_RECORDS = 1 << 10


@dataclass(frozen=True)
class WindowCut:
    """A window as the row numbers of its records in the stream's records
    (:func:`plan_cuts`): 8 bytes a record, and no table of its own. A level-0 window's
    rows are one run; a higher level's, a few runs (the ends its batches kept)."""

    level: int
    order: int
    rows: np.ndarray  #: int64, in stream order

    def window(self, records: pa.Table) -> Window:
        """The window, its records taken from ``records`` (a table of its own)."""
        return Window(self.level, self.order, records.take(pa.array(self.rows)))


def plan_cuts(orient: Callable[[pa.Table], pa.Table], stream: pa.Table, *, keep: int,
              base_us: int, max_duration_us: int | None = None,
              numbering: StreamNumbering | None = None
              ) -> tuple[pa.Table, list[WindowCut], WindowPlanner]:
    """Every window of a whole stream as :func:`plan_windows` cuts it, each as row numbers
    into the stream's records as the windows hold them (oriented, numbered), and the
    planner that cut them.

    ``WindowCut.window(records)`` gives back :func:`plan_windows`' window: the planner cuts
    the records with a private row-number column beside them, and each window's column
    says which records it holds. The windows' own tables live only while their records
    are cut (:data:`CUT_RECORDS` at a time); the cuts hold 8 bytes a window record: up
    to twice the stream's records a level, and at most ``4L`` a window above level 0.

    >>> edges = pa.table({"t": [0, 1_500_000, 1_600_000], "src": ["a", "b", "c"],
    ...                   "dst": ["b", "c", "d"]})
    >>> records, cuts, _ = plan_cuts(lambda t: t, edges, keep=4, base_us=1_000_000)
    >>> [(c.level, c.order, c.rows.tolist()) for c in cuts]
    [(0, 0, [0]), (0, 1, [0, 1, 2])]
    >>> cuts[1].window(records).records.column("seq").to_pylist()
    [0, 1, 2]
    """
    planner = WindowPlanner(orient, keep, base_us, max_duration_us, numbering)
    records = planner._accept(stream)
    if records is None:
        return stream, [], planner
    numbered = records.append_column(_ROW, pa.array(np.arange(records.num_rows,
                                                              dtype=np.int64)))
    cuts: list[WindowCut] = []
    for start in range(0, records.num_rows, CUT_RECORDS):
        planner._cut(numbered.slice(start, CUT_RECORDS))
        cuts += _as_cuts(planner._windows())
    return records, cuts + _as_cuts(planner.flush()), planner


def _as_cuts(windows: list[Window]) -> list[WindowCut]:
    return [WindowCut(w.level, w.order, w.records.column(_ROW).to_numpy().astype(np.int64))
            for w in windows]
