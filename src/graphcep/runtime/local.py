"""In-process runtime: feed a whole edge table through an engine in stream order.

Used by tests, by ``graphcep run --engine local``, and inside every Spark task (a time
shard is replayed with exactly this loop), so the two runtimes cannot drift apart.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from graphcep.engines.base import MATCH_CHUNK_ROWS, ChunkedPushes, Engine
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
    chunk_rows: int | None = None,
) -> Iterator[pa.Table]:
    """Push ``edges`` (in stream order) through ``engine``, yielding match tables of at
    most ``chunk_rows`` rows (default :data:`MATCH_CHUNK_ROWS`) as they are found.

    ``warmup`` edges (all before ``edges`` in stream order) only fill the engine's state
    (``engine.warm``, :class:`~graphcep.engines.base.Engine`): a push reports exactly the
    matches its edges trigger, so matches triggered in the warm-up are the previous
    shard's, never lost or repeated. ``phases`` gets the seconds of the warm-up and of
    the matching (the pushes, match records included).
    """
    phases = phases if phases is not None else Phases()
    _warm(engine, warmup, batch_edges, phases)
    chunk = chunk_rows or MATCH_CHUNK_ROWS
    for batch, found in _pushes(engine, edges, batch_edges, chunk, phases):
        yield from _timed(_slices(found, chunk), phases)
        if on_progress is not None:
            on_progress(batch.num_rows)


def count_replay(
    engine: Engine,
    edges: pa.Table,
    *,
    warmup: pa.Table | None = None,
    batch_edges: int = DEFAULT_BATCH_EDGES,
    on_progress: Callable[[int], None] | None = None,
    phases: Phases | None = None,
) -> int:
    """How many matches :func:`replay` would yield, none of them kept: an engine that
    counts (``engine.count``: the SAL search, a composite of them) makes no match record
    at all; any other engine's are counted chunk by chunk (:meth:`ChunkedPushes.count`)."""
    phases = phases if phases is not None else Phases()
    _warm(engine, warmup, batch_edges, phases)
    pushes = ChunkedPushes(engine, MATCH_CHUNK_ROWS)
    found = 0
    for start in range(0, edges.num_rows, batch_edges):
        batch = edges.slice(start, batch_edges)
        with phases.phase(MATCHING):
            found += pushes.count(batch)
        if on_progress is not None:
            on_progress(batch.num_rows)
    return found


def _warm(engine: Engine, warmup: pa.Table | None, batch_edges: int, phases: Phases) -> None:
    if warmup is not None:
        with phases.phase(WARM_UP):
            for start in range(0, warmup.num_rows, batch_edges):
                engine.warm(warmup.slice(start, batch_edges))


def _pushes(engine: Engine, edges: pa.Table, batch_edges: int, chunk_rows: int,
            phases: Phases) -> Iterator[tuple[pa.Table, Iterable[pa.Table]]]:
    """Each batch pushed and the matches it completes, in chunks of about ``chunk_rows``
    as the engine finds them (:class:`~graphcep.engines.base.ChunkedPushes`), taken
    before the next push."""
    pushes = ChunkedPushes(engine, chunk_rows)
    for start in range(0, edges.num_rows, batch_edges):
        batch = edges.slice(start, batch_edges)
        with phases.phase(MATCHING):
            found = pushes(batch)
        yield batch, found


def _slices(tables: Iterable[pa.Table], rows: int) -> Iterator[pa.Table]:
    """The non-empty tables of ``tables``, cut into slices of at most ``rows`` rows."""
    for table in tables:
        for start in range(0, table.num_rows, rows):
            yield table.slice(start, rows)


def _timed(tables: Iterator[pa.Table], phases: Phases) -> Iterator[pa.Table]:
    """``tables``, the seconds spent making each (the search, the records) counted as
    :data:`MATCHING`; the time its consumer spends (writing) is not."""
    while True:
        with phases.phase(MATCHING):
            table = next(tables, None)
        if table is None:
            return
        yield table


def replay_job_chunks(
    job: ReplayJob,
    edges: pa.Table,
    *,
    warmup: pa.Table | None = None,
    threads: int | None = 1,
    on_progress: Callable[[int], None] | None = None,
    phases: Phases | None = None,
    chunk_rows: int | None = None,
) -> Iterator[pa.Table]:
    """The matches of a (bound) job triggered by ``edges``, after ``warmup``, in one
    engine, in tables of at most ``chunk_rows`` rows as they are found (:func:`replay`).

    Both tables may be in any order (they are oriented and sorted here). One thread by
    default: Spark tasks call this, and Spark already runs one task per core. ``phases``
    gets the seconds of each step (:data:`SORTING`, :data:`ENGINE_START`,
    :data:`WARM_UP`, :data:`MATCHING`).
    """
    phases = phases if phases is not None else Phases()
    edges, warmup, engine = _started(job, edges, warmup, threads, phases)
    yield from replay(engine, edges, warmup=warmup, on_progress=on_progress, phases=phases,
                      chunk_rows=chunk_rows)


def count_job(
    job: ReplayJob,
    edges: pa.Table,
    *,
    warmup: pa.Table | None = None,
    threads: int | None = 1,
    on_progress: Callable[[int], None] | None = None,
    phases: Phases | None = None,
    parts: Counter[str] | None = None,
) -> int:
    """How many matches :func:`replay_job_chunks` would give, counted (:func:`count_replay`).
    ``parts``: each part's count added to it, where the engine counts its parts apart
    (:func:`part_counts`)."""
    phases = phases if phases is not None else Phases()
    edges, warmup, engine = _started(job, edges, warmup, threads, phases)
    found = count_replay(engine, edges, warmup=warmup, on_progress=on_progress, phases=phases)
    if parts is not None:
        parts.update(part_counts(engine))
    return found


def part_counts(engine: Engine) -> dict[str, int]:
    """The matches the engine counted of each of its parts (a rules engine's
    ``part_counts``: each rule's; parts of none left out), or none: an engine of one
    query has no parts."""
    counting = getattr(engine, "part_counts", None)
    return dict(counting()) if counting is not None else {}


def _started(job: ReplayJob, edges: pa.Table, warmup: pa.Table | None, threads: int | None,
             phases: Phases) -> tuple[pa.Table, pa.Table | None, Engine]:
    """The edges and warm-up oriented and sorted, and a new engine of the job."""
    with phases.phase(SORTING):
        edges = sort_stream(normalize_edges(job.orient(edges)))
        if warmup is not None:
            warmup = sort_stream(normalize_edges(job.orient(warmup)))
    with phases.phase(ENGINE_START):
        engine = job.new_engine(threads=threads)
    return edges, warmup, engine


def replay_job(
    job: ReplayJob,
    edges: pa.Table,
    *,
    warmup: pa.Table | None = None,
    threads: int | None = 1,
    on_progress: Callable[[int], None] | None = None,
    phases: Phases | None = None,
) -> pa.Table:
    """All matches of :func:`replay_job_chunks` in one table (tests, small runs: a run
    that must stay within memory takes the chunks)."""
    parts = list(replay_job_chunks(job, edges, warmup=warmup, threads=threads,
                                   on_progress=on_progress, phases=phases))
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
    parts: list[pa.Table] = []
    stats = stream_job(job, edges, parts.append, on_progress=on_progress)
    matches = pa.concat_tables(parts) if parts else job.output.schema.empty_table()
    return matches, stats


class MatchLimitReached(Exception):
    """Raised by a consumer of :func:`stream_job` to stop the run: no more matches are
    wanted (``--max-matches``). ``reason`` goes to the run's statistics (``"stopped"``);
    ``rows``: how many of the chunk at hand it took before it stopped."""

    def __init__(self, reason: str, rows: int) -> None:
        super().__init__(reason)
        self.reason, self.rows = reason, rows


def stream_job(
    job: ReplayJob,
    edges: pa.Table,
    consume: Callable[[pa.Table], None],
    *,
    on_progress: Callable[[int], None] | None = None,
    count: bool = False,
    chunk_rows: int | None = None,
    parts: Counter[str] | None = None,
) -> RunStats:
    """Run ``job`` on ``edges`` in this process (as :func:`run_job`), handing each chunk of
    matches to ``consume`` as it is found: the run holds at most one chunk of matches
    (``chunk_rows``, default :data:`MATCH_CHUNK_ROWS`). ``count``: count the matches
    instead, none made (:func:`count_job`, each part's count added to ``parts``);
    ``consume`` gets nothing. A consumer raising
    :class:`MatchLimitReached` ends the run early: the statistics then hold the matches
    consumed and ``extra["stopped"]``, its reason."""
    started = time.perf_counter()
    job.check_columns(edges.column_names)
    job = job.bind(max_duration_of(edges))
    phases = Phases()
    stats = RunStats(edges=edges.num_rows)
    if count:
        stats.matches = count_job(job, edges, threads=None, on_progress=on_progress,
                                  phases=phases, parts=parts)
    else:
        try:
            for chunk in replay_job_chunks(job, edges, threads=None, on_progress=on_progress,
                                           phases=phases, chunk_rows=chunk_rows):
                consume(chunk)
                stats.matches += chunk.num_rows
        except MatchLimitReached as stop:
            stats.matches += stop.rows
            stats.extra["stopped"] = stop.reason
    stats.seconds = time.perf_counter() - started
    stats.phases = phases.seconds
    return stats


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


#: ``graphcep run --max-matches``'s default: far more than anyone reads, far fewer than
#: a query that went wrong finds (a triangle among six edges repeated 2,000 times each
#: finds billions).
DEFAULT_MAX_MATCHES = 100_000_000


class BoundedOutput:
    """Where a run's matches go, chunk by chunk as they are found: the sink, at most
    ``max_matches`` of them in all. The chunk that would pass the bound is written up to
    it and :class:`MatchLimitReached` stops the run: what is written is complete records.

    It keeps the first ``keep`` matches (``--draw`` and ``--report`` pictures) and, when
    ``times_column`` is given, that column of every match (``--timeline``: 8 bytes a
    match); ``seconds`` is the time spent writing.
    """

    def __init__(self, sink: Any, max_matches: int | None, *, keep: int = 0,
                 times_column: str | None = None) -> None:
        self.sink, self.max_matches, self.keep = sink, max_matches, keep
        self.times_column = times_column
        self.written = 0
        self.seconds = 0.0
        self._first: list[pa.Table] = []
        self._times: list[Any] = []

    @property
    def stop_reason(self) -> str:
        return f"--max-matches {self.max_matches}"

    def __call__(self, table: pa.Table) -> None:
        """Write ``table`` (a chunk of matches), or as much as the bound leaves room for."""
        room = None if self.max_matches is None else self.max_matches - self.written
        if room is not None and table.num_rows > room:
            self._take(table.slice(0, room))
            raise MatchLimitReached(self.stop_reason, room)
        self._take(table)

    def write_all(self, tables: pa.Table | Iterable[pa.Table], stats: RunStats) -> None:
        """Write a match table (a run that collected it: widening), or tables as a run
        hands them out (Spark), in chunks; ``stats`` then say how many were written and
        whether the bound stopped them."""
        try:
            for part in _slices((tables,) if isinstance(tables, pa.Table) else tables,
                                MATCH_CHUNK_ROWS):
                self(part)
        except MatchLimitReached as stop:
            stats.extra["stopped"] = stop.reason
        stats.matches = self.written

    def first(self, schema: pa.Schema) -> pa.Table:
        """The first ``keep`` matches written."""
        return pa.concat_tables(self._first) if self._first else schema.empty_table()

    def times(self) -> Any:
        """The ``times_column`` of every match written (a numpy array)."""
        import numpy as np

        return np.concatenate(self._times) if self._times else np.zeros(0, np.int64)

    def _take(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        started = time.perf_counter()
        self.sink.write(table)
        self.seconds += time.perf_counter() - started
        held = sum(part.num_rows for part in self._first)
        if held < self.keep:
            self._first.append(table.slice(0, self.keep - held))
        if self.times_column is not None:
            self._times.append(table.column(self.times_column).to_numpy())
        self.written += table.num_rows
