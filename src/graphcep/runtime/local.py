"""In-process runtime: feed a whole edge table through an engine in stream order.

Used by tests, by ``graphcep run --engine local``, and inside every Spark task (a time
shard is replayed with exactly this loop), so the two runtimes cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from graphcep.engines.base import Engine
from graphcep.events import (
    empty_matches,
    max_duration_of,
    normalize_edges,
    sort_stream,
)
from graphcep.timing import Phases

if TYPE_CHECKING:
    from graphcep.engines.subgraph.engine import VertexFeatures
    from graphcep.jobs.base import ReplayJob
    from graphcep.patterns.subgraph import SubgraphQuery

#: The phases of a replay (:func:`replay_job`), as ``graphcep run --profile`` names them.
SORTING = "sorting the stream"
ENGINE_START = "engine start (query plan)"
WARM_UP = "warm-up (edges before the shard)"
MATCHING = "matching (engine, match records)"

#: Edges per push. Each push regroups the window, so batches much smaller than the
#: window cost more; much larger ones only cost memory.
DEFAULT_BATCH_EDGES = 1_000_000


@dataclass
class RunStats:
    edges: int = 0
    matches: int = 0
    seconds: float = 0.0
    extra: dict[str, int] = field(default_factory=dict)
    #: seconds per phase of the run (``graphcep run --profile``)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def edges_per_second(self) -> float:
        return self.edges / self.seconds if self.seconds > 0 else float("inf")


def replay(
    engine: Engine,
    edges: pa.Table,
    *,
    warmup: pa.Table | None = None,
    batch_edges: int = DEFAULT_BATCH_EDGES,
    on_progress: Callable[[int], None] | None = None,
    phases: Phases | None = None,
) -> Iterator[pa.Table]:
    """Push ``edges`` (in stream order) through ``engine``, yielding match tables.

    ``warmup`` edges (all before ``edges`` in stream order) only fill the engine's state
    (``engine.warm``, :class:`~graphcep.engines.base.Engine`): a push reports exactly the
    matches its edges trigger, so matches triggered in the warm-up are the previous
    shard's, never lost or repeated. ``phases`` gets the seconds of the warm-up and of
    the matching (the pushes, match records included).
    """
    phases = phases if phases is not None else Phases()
    if warmup is not None:
        with phases.phase(WARM_UP):
            for start in range(0, warmup.num_rows, batch_edges):
                engine.warm(warmup.slice(start, batch_edges))
    for start in range(0, edges.num_rows, batch_edges):
        batch = edges.slice(start, batch_edges)
        with phases.phase(MATCHING):
            matches = engine.push(batch)
        if on_progress is not None:
            on_progress(batch.num_rows)
        if matches.num_rows:
            yield matches


def replay_job(
    job: ReplayJob,
    edges: pa.Table,
    *,
    warmup: pa.Table | None = None,
    threads: int | None = 1,
    on_progress: Callable[[int], None] | None = None,
    phases: Phases | None = None,
) -> pa.Table:
    """All matches of a (bound) job triggered by ``edges``, after ``warmup``, in one engine.

    Both tables may be in any order (they are oriented and sorted here). One thread by
    default: Spark tasks call this, and Spark already runs one task per core. ``phases``
    gets the seconds of each step (:data:`SORTING`, :data:`ENGINE_START`,
    :data:`WARM_UP`, :data:`MATCHING`).
    """
    phases = phases if phases is not None else Phases()
    with phases.phase(SORTING):
        edges = sort_stream(normalize_edges(job.orient(edges)))
        if warmup is not None:
            warmup = sort_stream(normalize_edges(job.orient(warmup)))
    with phases.phase(ENGINE_START):
        engine = job.new_engine(threads=threads)
    parts = list(replay(engine, edges, warmup=warmup, on_progress=on_progress, phases=phases))
    return pa.concat_tables(parts) if parts else job.output.schema.empty_table()


def run_job(
    job: ReplayJob,
    edges: pa.Table,
    *,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[pa.Table, RunStats]:
    """All matches of ``job`` in ``edges`` in this process, with every core the engine can
    use; bounds the job leaves open default to the data's (:meth:`ReplayJob.bind`). The
    statistics' ``phases`` say where the time went (:func:`replay_job`)."""
    started = time.perf_counter()
    job.check_columns(edges.column_names)
    job = job.bind(max_duration_of(edges))
    phases = Phases()
    matches = replay_job(job, edges, threads=None, on_progress=on_progress, phases=phases)
    stats = RunStats(edges=edges.num_rows, matches=matches.num_rows,
                     seconds=time.perf_counter() - started, phases=phases.seconds)
    return matches, stats


def run_local(
    query: SubgraphQuery,
    edges: pa.Table,
    *,
    homomorphic: bool = False,
    max_duration_us: int | None = None,
    features: VertexFeatures | None = None,
    field_aliases: dict[str, str] | None = None,
    batch_edges: int = DEFAULT_BATCH_EDGES,
    on_progress: Callable[[int], None] | None = None,
    max_window_edges: int | None = None,
) -> tuple[pa.Table, RunStats]:
    """All matches of a SAL ``query`` in ``edges`` (any order; sorted here), with run
    statistics: the engine driven directly, with the options given (:func:`run_job` runs
    any job)."""
    from graphcep.jobs.subgraph import make_engine  # the SAL engine's options, in one place

    started = time.perf_counter()
    edges = sort_stream(normalize_edges(edges))
    engine = make_engine(
        query,
        edges,
        homomorphic=homomorphic,
        max_duration_us=max_duration_us,
        features=features,
        field_aliases=field_aliases,
        max_window_edges=max_window_edges,
    )
    tables = list(replay(engine, edges, batch_edges=batch_edges, on_progress=on_progress))
    matches = pa.concat_tables(tables) if tables else empty_matches()
    stats = RunStats(
        edges=edges.num_rows,
        matches=matches.num_rows,
        seconds=time.perf_counter() - started,
    )
    return matches, stats
