"""Progressive window widening as a job of its own: what ``graphcep stream --pww`` runs.

:class:`WidenedJob` wraps any job; its engine is a
:class:`~graphcep.runtime.widening.runner.Widening` of the job, so the streaming operator
(:class:`~graphcep.runtime.streaming.driver.StreamOperator`) feeds micro-batches to level 0,
closes batches and windows by its watermark and checkpoints the widening's snapshot --
the levels' batches (at most ``2L`` records each above level 0), level 0's open batch
and the identities of instances already reported -- like any engine's. Everything else
(the columns read, the orientation, labels, the match identity) is the wrapped job's.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.jobs import as_job
>>> from graphcep.lang.nu import parse_nu
>>> job = WidenedJob(as_job(parse_nu("a ~> b . b ~> c", "slow")), keep=3, base_us=1_000_000)
>>> engine = job.new_engine()
>>> engine.push(pa.table({"t": [0, 5], "src": ["a", "x"], "dst": ["b", "y"]})).num_rows
0
>>> blob = engine.snapshot()          # a checkpoint between micro-batches
>>> engine = type(engine).restore(blob, **engine.restore_context())
>>> found = engine.push(pa.table({"t": [9_000_000_000], "src": ["b"], "dst": ["c"]}))
>>> found = pa.concat_tables([found, engine.flush()])
>>> found.select(["first_t", "last_t", "pww_level"]).to_pylist()
[{'first_t': 0, 'last_t': 9000000000, 'pww_level': 13}]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphcep.io.sinks import MatchFormat
from graphcep.jobs.base import Extent, ReplayJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.widening.levels import levels_for
from graphcep.runtime.widening.planner import window_span_us
from graphcep.runtime.widening.report import explain_lines, widened_format
from graphcep.runtime.widening.runner import Widening

#: the extent of a widening without a duration bound: none (no jump of event time is
#: further than its windows may reach)
_UNBOUNDED_US = 1 << 62


def refuse_short_keep(job: ReplayJob, keep: int) -> None:
    """Refuse ``--pww L`` below the fewest records an instance of ``job`` holds (its
    ``min_records``): no window of ``L`` records could hold one, so the run would
    promise nothing.

    Raises
    ------
    QueryError
        Naming the least ``L`` that can hold an instance.
    """
    least = job.min_records
    if keep < least:
        raise QueryError(f"--pww {keep}: an instance of {job.name!r} holds at least {least} "
                         f"records, so no instance fits in {keep}; give --pww {least} or more")


@dataclass(frozen=True)
class WidenedJob:
    """``job`` run in progressive window widening's windows (``L = keep``, ``T0 =
    base_us``, ``D = max_duration_us``); what it does not define is ``job``'s."""

    job: ReplayJob
    keep: int
    base_us: int
    max_duration_us: int | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "job":  # pickling looks for these first
            raise AttributeError(name)
        return getattr(self.job, name)

    @property
    def output(self) -> MatchFormat:
        """The job's match records with each one's level, report time and delay."""
        return widened_format(self.job.output)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def whole_stream(self) -> bool:
        """One widening sees the whole stream (its levels span it); its state is more
        than a window of edges, so a stream checkpoints its snapshot."""
        return True

    def bind(self, longest_duration_us: int) -> WidenedJob:
        return WidenedJob(self.job.bind(longest_duration_us), self.keep, self.base_us,
                          self.max_duration_us)

    def extent(self) -> Extent:
        """The widest window's span under a duration bound; without one, none."""
        levels = levels_for(self.base_us, self.max_duration_us)
        if levels is None:
            return Extent(_UNBOUNDED_US)
        return Extent(window_span_us(self.base_us, levels - 1))

    def new_engine(self, threads: int | None = 1) -> Widening:
        """A widening of the job (each window is detected in a fresh engine of its own)."""
        return Widening(self.job, self.keep, self.base_us, self.max_duration_us)

    def describe(self) -> list[str]:
        """The job as level 0's windows run it, then the level table."""
        return explain_lines(self.job, (self.keep, self.base_us, self.max_duration_us))

    def summary_fields(self) -> dict[str, Any]:
        return {**self.job.summary_fields(), "pww": {
            "L": self.keep, "base_us": self.base_us, "max_duration_us": self.max_duration_us}}

    def cell_query(self) -> Any:
        raise QueryError("window widening runs each window in one engine of its own")

    def cell_split(self) -> Any:
        return self.cell_query()  # refused: not the job's own split

    def playable(self, edges: Any) -> None:
        return None  # not filtered: each window replays its edges in an engine of its own

    def playable_key(self) -> None:
        return None

    def partition_key(self) -> str | None:
        return None

    def watch(self, path: str) -> None:
        """None: the query is fixed when the stream starts. Each window runs a fresh
        engine of the job, and a window closes long after its first records arrived, so
        a subscription added or removed at a stream position has no window to start
        from; the checkpoint records the query's text, and a restart with it edited is
        refused."""
        return None

    def bounded_by(self, span_us: int) -> WidenedJob:
        return self
