"""Progressive window widening around a job, in-process: :class:`Widening` is fed
micro-batches (``push``), ``advance`` closes batches by a watermark and ``flush`` ends
the stream; :func:`run_widening` runs a whole edge table. The windows are cut by
:class:`~graphcep.runtime.widening.planner.WindowPlanner` and run one after another as
they close (:func:`~graphcep.runtime.widening.detection.detect`). The algorithm, the
identity of instances and the report time are stated in :mod:`graphcep.runtime.widening`.

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

from graphcep.engines.base import EngineBase
from graphcep.events import max_duration_of, normalize_edges, sort_stream
from graphcep.jobs.base import ReplayJob
from graphcep.runtime.widening.detection import detect, no_instances
from graphcep.runtime.widening.levels import LevelStats
from graphcep.runtime.widening.planner import CUT_RECORDS, Window, WindowPlanner


@dataclass
class WideningStats:
    """A run's numbers: edges read, instances reported, and per level what it did."""

    edges: int = 0
    matches: int = 0
    seconds: float = 0.0
    levels: list[LevelStats] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"pww_levels": [s.as_dict() for s in self.levels]}


class Widening(EngineBase):
    """Progressive window widening of ``job`` (a bound job) over a stream, as an engine
    of the protocol (:mod:`graphcep.engines.base`): ``graphcep stream --pww`` runs it
    like any other, and its snapshot holds the planner's levels, level 0's open batch
    and the identities of reported instances that a later window may still see.

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
        super().__init__()
        self.job, self.base_us = job, base_us
        self.planner = WindowPlanner(job.orient, keep, base_us, max_duration_us,
                                     job.stream_numbering())
        self._seen: dict[str, tuple[int, int]] = {}  # identity -> (first_t, last_t)
        self._bounded: dict[int, ReplayJob] = {}  # the job bounded by each level's span
        self._gc_at = 4096

    @property
    def edges(self) -> int:
        return self.planner.edges

    def push(self, batch: pa.Table) -> pa.Table:
        """Take a batch in stream order; return the instances reported by the windows it
        closes (a batch closes when an edge of a later batch arrives)."""
        windows = self.planner.push(batch)
        self.edges_seen = self.planner.edges
        return self._run(windows)

    def advance(self, watermark_us: int) -> pa.Table:
        """No edge before ``watermark_us`` will come: close the batches that end by it."""
        return self._run(self.planner.advance(watermark_us))

    def warm(self, batch: pa.Table) -> None:
        """Widening reports on arrival of later edges, so it cannot be warmed up from
        edges alone: a stream restores it from its snapshot."""
        raise NotImplementedError("window widening restores from a snapshot")

    def flush(self) -> pa.Table:
        """The stream has ended: close every batch and every level's waiting half."""
        return self._run(self.planner.flush())

    def stats(self) -> list[LevelStats]:
        return self.planner.stats()

    def state_size(self) -> dict[str, int]:
        """Records held (all levels and the open batch), the most any level above 0
        holds (at most ``2L``: Algorithm 2), levels, and identities remembered."""
        held = self.planner.held_by_level()
        return {"edges": sum(held), "levels": len(held),
                "most_held_above_level_0": max(held[1:], default=0),
                "identities": len(self._seen)}

    def describe(self) -> str:
        return (f"progressive window widening (L = {self.planner.keep}, T0 = "
                f"{self.base_us} µs) of: {self.job.name}")

    # -- checkpoints ----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The planner's state and the identities a later window may still see (those no
        window can see again are forgotten first)."""
        self._collect_garbage(force=True)
        return {"planner": self.planner.state(), "seen": self._seen, "gc_at": self._gc_at}

    @classmethod
    def from_state(cls, state: dict[str, Any], **context: Any) -> Widening:
        """A widening continuing from :meth:`state`; ``context`` gives the ``job`` (a
        snapshot holds no detector: :meth:`restore_context`)."""
        job = context.get("job")
        if job is None:
            raise TypeError("Widening.restore needs job= (the detector it widens)")
        planner = WindowPlanner.from_state(job.orient, state["planner"])
        widening = cls(job, planner.keep, planner.base_us)
        widening.planner, widening._seen = planner, state["seen"]
        widening._gc_at = state["gc_at"]
        return widening

    def restore_context(self) -> dict[str, Any]:
        """What :meth:`restore` needs that a snapshot does not hold: the detector."""
        return {"job": self.job}

    def _run(self, windows: list[Window]) -> pa.Table:
        """Run the windows in order; the instances not reported before."""
        out = []
        for window in windows:
            found = detect(self.job, window, self.base_us, self._bounded)
            level = self.planner.levels[window.level].stats
            level.detector_seconds += found.seconds
            fresh = []
            for i, key in enumerate(found.keys):
                if key not in self._seen:
                    self._seen[key] = (int(found.first_t[i]), int(found.last_t[i]))
                    fresh.append(i)
            if fresh:
                level.instances += len(fresh)
                self.matches_found += len(fresh)
                out.append(found.rows.take(pa.array(fresh, pa.int64())))
        self._collect_garbage()
        return pa.concat_tables(out) if out else no_instances(self.job.output.schema)

    def _collect_garbage(self, force: bool = False) -> None:
        """Forget identities no later window can see again: every record a later window
        may hold is held now (by some level, or in the open batch), and a window seeing an
        instance holds records at its first and last times."""
        if not self._seen or (len(self._seen) < self._gc_at and not force):
            return
        held = self.planner.held_tables()
        times = set(np.concatenate([t.column("t").to_numpy() for t in held]).tolist()) \
            if held else set()
        self._seen = {key: span for key, span in self._seen.items()
                      if span[0] in times and span[1] in times}
        self._gc_at = max(4096, 2 * len(self._seen))


def widening_input(job: ReplayJob, edges: pa.Table) -> tuple[ReplayJob, pa.Table]:
    """A whole edge table as widening reads it: the job bound to the data (bounds it
    leaves open default to the data's, :meth:`ReplayJob.bind`) and the stream sorted."""
    job.check_columns(edges.column_names)
    return job.bind(max_duration_of(edges)), sort_stream(normalize_edges(edges))


def run_widening(job: ReplayJob, edges: pa.Table, *, keep: int, base_us: int,
                 max_duration_us: int | None = None) -> tuple[pa.Table, WideningStats]:
    """Every instance progressive window widening reports over ``edges`` (any order;
    sorted here), once each, with its level, report time and delay."""
    started = time.perf_counter()
    job, stream = widening_input(job, edges)
    widening = Widening(job, keep, base_us, max_duration_us)
    found = [widening.push(stream.slice(start, CUT_RECORDS))
             for start in range(0, stream.num_rows, CUT_RECORDS)]
    matches = pa.concat_tables([*found, widening.flush()])
    stats = WideningStats(stream.num_rows, matches.num_rows,
                          time.perf_counter() - started, widening.stats())
    return matches, stats
