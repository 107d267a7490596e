"""Continuous matching: event-time reordering, an engine, exactly-once checkpoints.

:class:`StreamOperator` is the stateful heart of ``graphcep stream``. It knows nothing of
Spark: Structured Streaming hands it one micro-batch at a time (``foreachBatch``, see
:func:`start_stream`), tests and the benchmark call it directly.

Event time
----------
Edges are matched by their own timestamps, not by arrival order. The operator keeps the
largest ``t`` seen so far and a *frontier* ``F = max_t - lateness``; after every batch it
releases the buffered edges with ``t < F`` to the engine in stream order ``(t, seq)`` and
keeps the rest. An edge that arrives with ``t < F`` is *late*: the engine has already moved
past it, so it is not matched but written to the late-edges output and counted -- never
dropped silently. An edge exactly ``lateness`` behind the newest one is still on time.
Edges up to ``lateness`` late are therefore matched exactly as if the stream had arrived
sorted by ``(t, seq)``; a match is reported as soon as an edge more than ``lateness``
newer than its last edge has arrived (or when the input ends, :meth:`StreamOperator.flush`). ``seq`` of streamed files is the line
number plus the file's arrival ordinal ``<< 40``, so ties in ``t`` keep arrival order.

Exactly-once
------------
After batch ``b`` the operator writes, in this order: the matches (sink part ``b``), the
late edges and rejected lines (their parts ``b``), calls its ``commit`` hook (a
transactional sink's commit, :mod:`graphcep.runtime.streaming.kafka_sink`), then writes its own state
(``<checkpoint>/state/state-<b>.bin``, atomically renamed into place). Spark's file source
re-delivers exactly the same input for a batch it re-runs after a crash, so whichever step
a crash interrupts, the rerun starts from the state of batch ``b - 1``, recomputes the same
matches with the same deterministic ids and overwrites the same parts: nothing is lost and
nothing is duplicated. The state holds the engine's window (edges within the query's
extent), the reorder buffer (edges within ``lateness``), features, and counters.

Watched queries
---------------
A job may give a watch on its query file (:meth:`~graphcep.jobs.base.ReplayJob.watch`:
subscriptions). Before the edges of each batch (and the final flush) are pushed, the
operator asks it to apply what changed to the engine; the engine's state -- its
subscriptions with it -- is snapshotted into every checkpoint (such jobs read the whole
stream), so a restart, or a re-run batch, starts from the subscriptions in force after
the batch before and applies the file's current content before its edges.

Why ``foreachBatch`` on the driver, not Spark's per-key state
--------------------------------------------------------------
Measured on this runtime (PySpark 4.3, ``local[2]``): handing each micro-batch to the
driver as Arrow moves 0.5-1.0M rows/s; ``applyInPandasWithState`` with the window as one
blob per key 130-240k rows/s; ``transformWithStateInPandas`` with list state 8-40k rows/s,
where reading state back dominates. A temporal query's state is a window of edges that every
new edge is joined against, so it wants to live, indexed, next to the engine -- where the
engine's batch search and its threads work at full speed.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import ChunkedPushes, StateBoundError, coalesced
from graphcep.engines.difference_bounds import UnboundedQueryError
from graphcep.events import counted_noun, empty_edges, format_seconds, normalize_edges, sort_stream
from graphcep.io.json_lines import record_lines
from graphcep.io.readers import FILE_INDEX_SHIFT, READ_REJECT_SCHEMA
from graphcep.io.sinks import Sink, replace_atomically
from graphcep.jobs.base import Extent, QueryWatch, ReplayJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming.batch_log import (
    LogEntry,
    edges_name,
    entry_of,
    read_edges,
    warmed,
    window_entries,
    windowed,
    write_edges,
)
from graphcep.runtime.streaming.checkpoint_bytes import (
    compressed,
    decompressed,
    read_checkpoint,
)

_STATE_FILE = re.compile(r"state-(\d+)\.bin\Z")
#: seconds between snapshots of an engine replayed from its log (``--snapshot-interval``)
SNAPSHOT_INTERVAL_S = 30.0
#: a time before every edge (no edge yet)
NEVER = np.iinfo(np.int64).min

MatchCallback = Callable[[pa.Table, int], None]


@dataclass
class BatchReport:
    """What one micro-batch did (one progress line)."""

    batch_id: int
    edges_in: int
    late: int
    rejected: int
    released: int
    matches: int
    buffered: int
    state: dict[str, int]
    frontier_us: int
    seconds: float
    #: one line each: what in this batch looks wrong about the stream (see
    #: :meth:`StreamOperator.process`)
    warnings: list[str] = field(default_factory=list)
    #: whether any edge has been released to the engine so far
    started: bool = True
    #: one line each: changes of the query applied before this batch, or refused (a
    #: watched subscriptions file, see :class:`StreamOperator`'s ``watch``)
    notes: list[str] = field(default_factory=list)
    #: whether this is the end-of-input flush, which releases every edge still held
    final: bool = False
    #: the stream's pace after this batch (matched rate, and where the source knows them
    #: the offered rate and the lag), from :class:`Pace`; empty: not measured
    pace: str = ""
    #: what the engine adds to the line (several rules: the batch's matches by rule)
    detail: str = ""
    #: ``TOPIC/PARTITION`` -> records not read yet after this batch (a Kafka source)
    partition_lag: dict[str, int] | None = None

    def line(self) -> str:
        """The progress line; the watermark reads ``-`` until it has released an edge (a
        frontier before the first edge says nothing about the stream), and ``end of
        input`` after the flush (whose frontier is one microsecond past the newest edge,
        a time no edge has)."""
        held = self.state.get("edges", 0)
        frontier = ("end of input" if self.final
                    else f"{format_seconds(self.frontier_us)}s"
                    if self.started and self.frontier_us != NEVER else "-")
        return (
            f"batch {self.batch_id}: {counted_noun(self.edges_in, 'edge')} in, "
            f"{self.late:,} late, {self.rejected:,} rejected, "
            f"{counted_noun(self.matches, 'match', 'matches')} | "
            f"state {counted_noun(held, 'edge')} in window, {self.buffered:,} buffered | watermark {frontier} | "
            f"took {self.seconds:.2f} s" + (f" | {self.pace}" if self.pace else "")
            + (f" | {self.detail}" if self.detail else "")
            + (f" | lag {lag_text(self.partition_lag)}" if self.partition_lag else "")
        )


def lag_text(lag: dict[str, int]) -> str:
    """``TOPIC/PARTITION`` -> records not read yet, in a line's words.

    >>> lag_text({"flows/0": 1200, "flows/1": 0})
    'flows/0 1,200, flows/1 0'
    """
    return ", ".join(f"{place} {count:,}" for place, count in lag.items())


@dataclass
class StreamTotals:
    """Counters over the whole stream (kept in the checkpoint, so they survive restarts)."""

    batches: int = 0
    edges: int = 0
    late: int = 0
    rejected: int = 0
    matches: int = 0
    files: int = 0
    lines: int = 0
    released: int = 0  # edges handed to the engine
    lost: int = 0  # socket lines a crash or interrupt took from the matching or the state

    def as_dict(self) -> dict[str, int]:
        # by field, not __dict__: a state pickled before a field existed lacks it
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: the name checkpoints written before :mod:`~graphcep.runtime.streaming.batch_log` pickled
_LogEntry = LogEntry


@dataclass
class Jump:
    """An edge that moved event time further ahead than the window and the lateness
    together (``previous``: the newest time before it): every edge behind it by more than
    the lateness is late, so if later edges turn up late the user is told where it is."""

    t: int
    previous: int
    place: str
    warned: bool = False


#: the name checkpoints pickled before :class:`Jump` was shared with the executor mode
_Jump = Jump


@dataclass
class _State:
    """Everything a restart needs, pickled into one small file per batch.

    The engine is *not* pickled each batch (at 250k edges/s a 10 s window is 2.5M edges;
    twenty rules' engines 63 MB): each batch writes its released edges to a file of its
    own (``released-<b>.arrow``) and lists it in :attr:`log`
    (:mod:`~graphcep.runtime.streaming.batch_log`). An engine whose whole state is its
    window (SAL, DDST, windowed ν-expressions) is warmed up from the entries within the
    query's extent. Any other (several rules, subscriptions, vertex features, anchored or
    unbounded ν-expressions, a widening) is snapshotted into
    ``engine-<s>.bin`` every ``snapshot_interval`` seconds and whenever a watched query
    changed it; :attr:`log` then lists the batches since batch :attr:`engine_batch`,
    replayed through the restored engine on a restart.
    """

    engine: bytes | None = None
    features: Any = None  # a feature query's feature set, pickled with its engine
    buffer: pa.Table | None = None
    max_t: int = NEVER
    frontier: int = NEVER
    last_batch: int = -1
    totals: StreamTotals = field(default_factory=StreamTotals)
    log: list[_LogEntry] = field(default_factory=list)
    newest_place: str = ""  # where the edge at max_t came from
    jump: Jump | None = None
    #: the batch after which ``engine-<b>.bin`` snapshots the engine (-1: none; a state
    #: pickled before the field holds its snapshot in :attr:`engine`)
    engine_batch: int = -1


class EventTime(Protocol):
    """What the late-edge warnings follow of a stream (the driver's :class:`_State`,
    the executor mode's :class:`~graphcep.runtime.streaming.cells_run.CellsRun` watch):
    the newest time and where its edge came from, the watermark, the last far jump,
    and the totals before the batch."""

    max_t: int
    frontier: int
    newest_place: str
    jump: Jump | None
    totals: StreamTotals


def jump_limit(extent: Extent, lateness_us: int) -> int:
    """How far event time may move past the newest edge before it is a jump worth naming:
    the query's ``extent`` (in time) and the lateness."""
    return (extent.size if extent.unit == "us" else 0) + lateness_us


def newest_edge(edges: pa.Table) -> tuple[int, int, int]:
    """The newest ``t`` of ``edges`` (not empty), the newest below it (``NEVER``: none)
    and the ``seq`` of the first edge at the newest. The time below counts for a jump:
    the first batch, or one file, can bring the jump together with what it jumps over."""
    times = edges.column("t")
    newest = int(pc.max(times).as_py())
    seq = int(edges.column("seq")[pc.index(times, newest).as_py()].as_py())
    below = pc.max(pc.filter(times, pc.less(times, newest))).as_py()
    return newest, NEVER if below is None else int(below), seq


def note_newest(st: EventTime, newest: int, below: int, place: str, limit: int) -> None:
    """Event time moved on to ``newest`` (the edge at ``place``; ``below``: the newest time
    of the batch before it, ``NEVER`` if none): a jump past the newest time before it by
    more than ``limit`` is remembered, to explain the late edges behind it."""
    if newest <= st.max_t:
        return
    before = max(st.max_t, below)
    if before != NEVER and newest - before > limit:
        st.jump = Jump(newest, before, place)
    st.max_t, st.newest_place = newest, place


def late_warnings(st: EventTime, batch_id: int, late_times: pa.Array | pa.ChunkedArray,
                  edges_in: int, lateness_us: int) -> list[str]:
    """One line for late edges a far jump of event time explains (once per jump), else
    one when at least half of the batch's ``edges_in`` are late where less than a tenth
    of the stream's were before (``st``: as before the batch; ``late_times``: the late
    edges' ``t``)."""
    if len(late_times) == 0:
        return []
    jump = st.jump
    if jump is not None and not jump.warned:
        # late only because of the jump: within the lateness of the time before it
        trailing = pc.sum(pc.greater_equal(late_times, jump.previous - lateness_us)).as_py()
        if trailing:
            jump.warned = True
            edges = "edge" if trailing == 1 else "edges"
            return [f"{trailing:,} {edges} late behind the edge at {jump.place} "
                    f"(t = {format_seconds(jump.t)} s), which moved event time "
                    f"{format_seconds(jump.t - jump.previous)} s past the newest edge "
                    f"before it: a wrong timestamp there makes the edges after it late"]
    totals = st.totals
    if 2 * len(late_times) >= edges_in and 10 * totals.late < totals.edges:
        return [f"batch {batch_id}: {len(late_times):,} of {edges_in:,} edges late "
                f"(watermark {format_seconds(st.frontier)} s, set by the edge at "
                f"{st.newest_place or 'an earlier batch'}, "
                f"t = {format_seconds(st.max_t)} s)"]
    return []


class StreamOperator:
    """Event-time reordering, an engine, and checkpoints under the stream's batch ids.

    Parameters
    ----------
    job : ReplayJob
        The query and how it reads the stream (any :class:`~graphcep.jobs.base.ReplayJob`).
    lateness_us : int
        How far behind the newest edge (in event time) an edge may arrive and still be
        matched exactly.
    checkpoint : path or None
        Directory for the operator's state (one file per batch, the last two kept).
        ``None`` keeps state in memory only (no recovery).
    sink : Sink or None
        Where matches go, written with the batch id chunk by chunk as the engine hands
        them out (``Sink.write_chunks``; directory sinks write part ``b`` under a
        temporary name and rename it over the part once whole, which makes re-runs
        idempotent).
    late_sink, reject_sink : Sink-like or None
        Receive late edges and rejected lines per batch (see :class:`PartWriter`).
    on_matches : callable or None
        Called with ``(matches, batch_id)`` after the sink, once a batch with matches,
        or once per chunk of a batch holding more than a chunk (65,536).
    commit : callable or None
        Called with ``(batch_id, final, settled)`` after every write of a batch and
        before its state is checkpointed (``final``: the end-of-input flush, not
        checkpointed; ``settled``: :meth:`settled_before`).
    threads : int or None
        Engine search threads.
    cells : int or None
        Partition the matching over a HyperCube grid of at most this many cells, each an
        engine in a worker process (:class:`~graphcep.runtime.streaming.cell_engines.CellEngines`;
        SAL queries without vertex features). ``None``: one engine in this process.
    processes : int or None
        Worker processes for ``cells`` (default: one per cell, at most the CPU count).
    max_matches : int or None
        The most matches over the whole stream (its totals are in the checkpoint): the
        micro-batch whose matches would pass it raises :class:`StateBoundError` before
        its part is in place, its state and checkpoint not changed (``--max-matches``).
    watch : QueryWatch or None
        The query file, re-read before each batch, its changes applied to the engine
        (module docstring); the lines it gives go into :attr:`BatchReport.notes`.
    snapshot_interval : float
        Seconds between snapshots of an engine that cannot be warmed up from its window
        (:class:`_State`): a restart replays at most about this long a stretch of the
        stream's batches through it, and snapshots at its first batch. 0: a snapshot
        every batch.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from graphcep.lang.sal import parse_program
    >>> from graphcep.jobs.subgraph import SubgraphJob
    >>> job = SubgraphJob.create(parse_program(
    ...     "{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);"
    ...     " starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }"))
    >>> op = StreamOperator(job, lateness_us=5_000_000)
    >>> def edges(rows):
    ...     return pa.table({"t": [r[0] * 1_000_000 for r in rows],
    ...                      "src": [r[1] for r in rows], "dst": [r[2] for r in rows],
    ...                      "seq": [r[3] for r in rows]})
    >>> op.process(0, edges([(1, "x", "y", 1), (3, "z", "x", 2)])).matches
    0
    >>> report = op.process(1, edges([(2, "y", "z", 3), (9, "q", "r", 4)]))
    >>> report.matches            # y->z came 1 s behind z->x: within the lateness, matched
    1
    >>> op.process(2, edges([(3, "x", "w", 5)])).late    # 6 s behind the newest edge (9 s)
    1
    """

    def __init__(
        self,
        job: ReplayJob,
        *,
        lateness_us: int = 0,
        checkpoint: str | os.PathLike | None = None,
        sink: Sink | None = None,
        late_sink: PartWriter | None = None,
        reject_sink: PartWriter | None = None,
        on_matches: MatchCallback | None = None,
        threads: int | None = None,
        cells: int | None = None,
        processes: int | None = None,
        watch: QueryWatch | None = None,
        commit: Callable[..., None] | None = None,
        max_matches: int | None = None,
        snapshot_interval: float = SNAPSHOT_INTERVAL_S,
    ) -> None:
        if lateness_us < 0:
            raise ValueError("lateness must be >= 0")
        try:
            self.extent = job.extent()
        except UnboundedQueryError as err:
            raise UnboundedQueryError(f"{err} (a stream has no longest edge to derive it "
                                      "from: --max-duration SECONDS)") from None
        self.job = job
        self.lateness_us = int(lateness_us)
        self.state_dir = Path(checkpoint) / "state" if checkpoint is not None else None
        self.sink = sink
        self.late_sink = late_sink
        self.reject_sink = reject_sink
        self.on_matches = on_matches
        self.threads = threads
        self.cells = cells
        self.processes = processes
        self.watch = watch
        self.commit = commit
        self.max_matches = max_matches
        self.snapshot_interval = snapshot_interval
        self._snapshot_at = time.monotonic()
        self._state = _State()
        #: why a micro-batch was refused (a stream lacking fields the query reads); kept
        #: because Spark hands a foreachBatch error back as its own text
        self.refusal: QueryError | None = None
        #: the error a micro-batch raised under Spark (see ``query.start_stream``)
        self.failure: Exception | None = None
        #: what lets the Spark query driving it stop between micro-batches
        #: (``query.BatchGate``), set when one starts
        self.gate: Any = None
        #: ``TOPIC/PARTITION`` -> records not read yet, after the last batch of a Kafka
        #: source (for the summary)
        self.partition_lag: dict[str, int] | None = None
        #: ``TOPIC/PARTITION`` -> offsets ``A-B`` of records deleted before they were read,
        #: since this start (Kafka's ``--on-data-loss report``; for the summary)
        self.records_lost: dict[str, list[str]] = {}
        #: how the stream keeps up since this start (:class:`Pace`), where its driver
        #: measures it; the summary shows it
        self.pace: Pace | None = None
        #: label column -> the query's labels seen there since this start (DDST jobs;
        #: held in memory only, at most the query's own labels)
        self.labels_seen: dict[str, set[str]] = {}
        self._engine = self._new_engine()
        # warm-up from the log rebuilds exactly the window: only for engines whose whole
        # state is the window (a watched query's changes are state too)
        self._logged = windowed(job, self._engine) and watch is None
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)

    # -- public -----------------------------------------------------------------------

    @property
    def totals(self) -> StreamTotals:
        return self._state.totals

    @property
    def engine(self) -> Any:
        """The engine matching the released edges (for the summary's own figures)."""
        return self._engine

    @property
    def newest_t(self) -> int:
        """The largest ``t`` seen so far, in microseconds (0 before the first edge)."""
        return 0 if self._state.max_t == NEVER else self._state.max_t

    @property
    def next_file_index(self) -> int:
        """Arrival ordinal for the next file (its ``seq`` offset), restart-stable."""
        return self._state.totals.files

    def process(
        self, batch_id: int, edges: pa.Table | None, rejects: pa.Table | None = None,
        *, files: int = 0, lines: int = 0, names: dict[int, str] | None = None,
        places: pa.Table | None = None,
    ) -> BatchReport:
        """Take micro-batch ``batch_id``: buffer, release what the watermark passed, match.

        ``files`` and ``lines`` count what the batch read (files advance the ordinal used
        in ``seq``); ``rejects`` are its unparseable lines; ``names`` maps the file
        ordinals of the batch's edges (``seq >> 40``) to the names of their files, for the
        late-edge records and warnings (``file:line``; without a name: ``seq N``);
        ``places``, from a source of records, where its lines came from
        (:func:`record_places`), for the late edges' records.

        The report warns (:attr:`BatchReport.warnings`) when edges turn up late behind an
        edge that had moved event time more than the window and the lateness beyond the
        newest edge before it -- typically one wrong timestamp -- naming that edge once;
        and when at least half of a batch is late where less than a tenth was before.
        Not at the jump itself: sparse streams are often quiet for longer than a window.
        """
        started = time.perf_counter()
        self.recover(batch_id)
        st = self._state
        edges = self._oriented(edges)
        if edges.num_rows:
            self._check_columns(edges.column_names)
            self._note_labels(edges)
        late, on_time = self._split_late(edges)
        warnings = self._late_warnings(batch_id, late, edges.num_rows)
        if on_time.num_rows:
            self._note_newest(on_time, names)
            st.frontier = max(st.frontier, st.max_t - self.lateness_us)
            on_time = on_time.select(self.job.needed_columns(on_time.column_names))
            st.buffer = on_time if st.buffer is None else pa.concat_tables(
                [st.buffer, on_time], promote_options="permissive")
        report = self._advance(batch_id, started, edges.num_rows, late, rejects, files, lines,
                               names=names, places=places)
        report.warnings = [*skipped_file_warnings(rejects), *warnings]
        return report

    def flush(self) -> BatchReport:
        """End of input: release every buffered edge (a finite stream has no later edge
        to move the watermark past them).

        Written as the batch after the last one and *not* checkpointed: if the stream
        goes on later, that batch restarts from the state before the flush, and its
        output replaces the flush's -- the flushed edges are then matched when the
        watermark passes them, once. A repeated flush rewrites the same output.
        """
        started = time.perf_counter()
        batch_id = self.resume() + 1
        if self._state.max_t != NEVER:
            self._state.frontier = max(self._state.frontier, self._state.max_t + 1)
        return self._advance(batch_id, started, 0, None, None, 0, 0, checkpoint=False,
                             final=True)

    def resume(self) -> int:
        """Load the newest checkpointed state unless this operator already has one; return
        the id of the last batch done (-1: none)."""
        if self._state.last_batch == -1 and (saved := self._saved_batches()):
            self._load(saved[-1])
        return self._state.last_batch

    def pass_over(self, batch_id: int, lines: int) -> None:
        """Go on after micro-batch ``batch_id``, which a transactional sink delivered but
        whose state was never saved (the process died between the two) and whose input
        cannot be read again (a socket's): the stream has read ``lines`` lines through it,
        so the lines that follow get numbers -- and match ids -- of their own, and the
        next batch an id the sink has not delivered. Checkpointed at once, the counters
        with it."""
        self.resume()
        self._state.totals.lines = max(self._state.totals.lines, lines)
        self._state.last_batch = batch_id
        self._checkpoint(batch_id)

    def settled_before(self, final: bool = False) -> int | None:
        """An event time before which every match of the stream so far has been reported
        (None: none known): at the end-of-input flush (``final``) the frontier, past every
        edge; else the frontier less the query's extent -- a match's edges are released
        once the frontier passes them, and it is decided within the extent of its first.
        A query over the whole stream, or with an extent counted in edges, has none."""
        frontier = self._state.frontier
        if frontier == NEVER:
            return None
        if final:
            return int(frontier)
        if self.job.whole_stream or self.extent.unit != "us":
            return None
        return int(frontier - self.extent.size)

    def state_size(self) -> dict[str, int]:
        buffered = 0 if self._state.buffer is None else self._state.buffer.num_rows
        return {**self._engine.state_size(), "buffered": buffered}

    # -- steps ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the cell workers, if any (an operator without cells holds no resources)."""
        close = getattr(self._engine, "close", None)
        if close is not None:
            close()

    def _new_engine(self):
        if self.cells is None:
            return self.job.new_engine(self.threads)
        from graphcep.runtime.hypercube import choose_shares
        from graphcep.runtime.streaming.cell_engines import CellEngines  # only where cells are used

        if choose_shares(self.job.query, self.cells, roles=True).cells == 1:
            # copies would cost more than cells save: one engine, here, is the same grid
            return self.job.new_engine(self.threads)
        engine = getattr(self, "_engine", None)
        if isinstance(engine, CellEngines):
            engine.reset()  # keep the workers, drop their cells' state
            return engine
        return CellEngines(self.job, self.cells, self.processes)

    def _advance(self, batch_id: int, started: float, edges_in: int, late: pa.Table | None,
                 rejects: pa.Table | None, files: int, lines: int,
                 checkpoint: bool = True, names: dict[int, str] | None = None,
                 final: bool = False, places: pa.Table | None = None) -> BatchReport:
        """Release what the frontier passed, match it (with what the engine reports as
        the frontier passes; at the end of input, ``final``, what its ``flush`` reports
        where it has one), write the batch, checkpoint."""
        st = self._state
        notes = self.watch.changes(self._engine) if self.watch is not None else []
        if checkpoint and not notes and self._first_snapshot_due():
            self._snapshot(batch_id)  # the engine the stream starts with, before its edges
        found: list[Iterable[pa.Table]] = []  # the batch's matches, made as they are written
        released, ready, advanced_to = 0, None, None
        if st.buffer is not None and st.frontier != NEVER:
            # strictly before: an edge at F may still arrive, and with any seq
            due = pc.less(st.buffer.column("t"), st.frontier)
            ready = sort_stream(st.buffer.filter(due))
            st.buffer = st.buffer.filter(pc.invert(due))
            released = ready.num_rows
            if released:
                found.append(self._chunked_pushes()(ready))
            found.append(_later(self._engine.advance, st.frontier))
            advanced_to = st.frontier
        if final and (end := getattr(self._engine, "flush", None)) is not None:
            found.append(_later(end))  # an engine that reports at the stream's end
        late = late if late is not None else empty_edges()
        rejects = rejects if rejects is not None else READ_REJECT_SCHEMA.empty_table()
        matches = self._emit(batch_id, chain.from_iterable(found), late, rejects, names,
                             places)
        if self.commit is not None:  # the batch's writes made visible, before its state
            self.commit(batch_id, final, self.settled_before(final),
                        lines=st.totals.lines + lines)
        totals = st.totals
        totals.batches += 1
        totals.edges += edges_in
        totals.late += late.num_rows
        totals.rejected += rejects.num_rows
        totals.matches += matches
        totals.files += files
        totals.lines += lines
        totals.released += released
        st.last_batch = batch_id
        if checkpoint:
            pushed = ready if released else None
            self._log_batch(batch_id, pushed, advanced_to)
            self._checkpoint(batch_id, changed=bool(notes), released=pushed)
        buffered = 0 if st.buffer is None else st.buffer.num_rows
        progress = getattr(self._engine, "progress", None)  # several rules: by rule
        return BatchReport(batch_id, edges_in, late.num_rows, rejects.num_rows, released,
                           matches, buffered, self._engine.state_size(), st.frontier,
                           time.perf_counter() - started, started=totals.released > 0,
                           notes=notes, final=final,
                           detail=progress() if progress is not None else "")

    def _note_newest(self, on_time: pa.Table, names: dict[int, str] | None) -> None:
        """Move the stream's newest time (and where that edge came from) on, noting
        whether it jumped further ahead than the window and the lateness."""
        newest, below, seq = newest_edge(on_time)
        note_newest(self._state, newest, below, edge_place(seq, names),
                    jump_limit(self.extent, self.lateness_us))

    def _late_warnings(self, batch_id: int, late: pa.Table, edges_in: int) -> list[str]:
        """The batch's warnings on its late edges (:func:`late_warnings`)."""
        return late_warnings(self._state, batch_id, late.column("t"), edges_in,
                             self.lateness_us)

    def _check_columns(self, columns: list[str]) -> None:
        """The job's refusal of a stream without fields the query reads (before any state
        changes, so a corrected source resumes from the same checkpoint)."""
        try:
            self.job.check_columns(columns)
        except QueryError as err:
            self.refusal = err
            raise

    def _note_labels(self, edges: pa.Table) -> None:
        """Remember which of the query's labels the stream carries (a query label that
        never occurs is why such a stream reports nothing; the command warns at its end)."""
        for column, labels in self.job.labels_present(edges).items():
            self.labels_seen.setdefault(column, set()).update(labels)

    def _oriented(self, edges: pa.Table | None) -> pa.Table:
        if edges is None or edges.num_rows == 0:
            return empty_edges()
        return normalize_edges(self.job.orient(edges))

    def _split_late(self, edges: pa.Table) -> tuple[pa.Table, pa.Table]:
        if self._state.frontier == NEVER or edges.num_rows == 0:
            return edges.slice(0, 0), edges
        is_late = pc.less(edges.column("t"), self._state.frontier)
        return edges.filter(is_late), edges.filter(pc.invert(is_late))

    def _chunked_pushes(self) -> ChunkedPushes:
        """The engine's pushes in chunks (one :class:`ChunkedPushes` per engine: it
        remembers how finely to slice a batch)."""
        if getattr(self, "_pushes", None) is None or self._pushes.engine is not self._engine:
            self._pushes = ChunkedPushes(self._engine)
        return self._pushes

    def _check_match_bound(self, batch_id: int, batch_matches: int) -> None:
        """Refuse a batch whose matches would bring the stream's past ``max_matches``."""
        before = self._state.totals.matches
        if self.max_matches is not None and before + batch_matches > self.max_matches:
            raise StateBoundError(
                f"more than {self.max_matches:,} matches over the stream: micro-batch "
                f"{batch_id} would pass --max-matches {self.max_matches} ({before:,} "
                "written before it); raise --max-matches")

    def _emit(self, batch_id: int, matches: Iterator[pa.Table], late: pa.Table,
              rejects: pa.Table, names: dict[int, str] | None = None,
              places: pa.Table | None = None) -> int:
        """Write the batch's matches chunk by chunk as the engine hands them out, joined
        into chunks of up to 65,536 (one part of a directory, renamed into place once
        whole), ``on_matches`` getting each chunk after the sink; then its late edges and
        rejects. How many matches."""
        written = 0

        def taken() -> Iterator[pa.Table]:
            nonlocal written
            for table in coalesced(matches):
                self._check_match_bound(batch_id, written + table.num_rows)
                written += table.num_rows
                yield table
                if self.on_matches is not None:
                    self.on_matches(table, batch_id)

        chunks = taken()
        if self.sink is not None:
            self.sink.write_chunks(chunks, batch_id)
        for _ in chunks:  # a sink that skipped the batch: the engine still reads it
            pass
        if self.late_sink is not None and late.num_rows:
            self.late_sink.write(late_records(self.job, late, names, places), batch_id)
        if self.reject_sink is not None and rejects.num_rows:
            self.reject_sink.write(rejects, batch_id)
        return written

    # -- checkpoints ------------------------------------------------------------------

    def _log_batch(self, batch_id: int, released: pa.Table | None,
                   advanced_to: int | None) -> None:
        """List the batch in the state's log (a windowed engine's log: batches that
        released edges only); :meth:`_checkpoint` writes its edges if the log keeps it."""
        if self.state_dir is None or (released is None and (self._logged or
                                                             advanced_to is None)):
            return
        self._state.log.append(entry_of(batch_id, released, advanced_to))

    def _checkpoint(self, batch_id: int, changed: bool = False,
                    released: pa.Table | None = None) -> None:
        """Save the state after batch ``batch_id``, with the edges it ``released`` where
        the log still lists it (not where the window has already dropped them, nor after
        a snapshot of this batch). ``changed``: a watched query changed the engine before
        its edges, which a replay would not redo: snapshot it."""
        if self.state_dir is None:
            return
        st = self._state
        # files older than what the previous state still reads are no one's any more
        floor = st.log[0].batch_id if st.log else batch_id
        engine_floor = st.engine_batch
        if self._logged:
            st.log = window_entries(st.log, self.extent, st.frontier)
        elif changed or self._snapshot_due():
            self._snapshot(batch_id)
        if released is not None and st.log and st.log[-1].batch_id == batch_id:
            write_edges(self.state_dir / edges_name(batch_id), released)
        blob = compressed(pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL))
        replace_atomically(self.state_dir / f"state-{batch_id:012d}.bin",
                          lambda path: Path(path).write_bytes(blob))
        for old in self._saved_batches()[:-2]:
            (self.state_dir / f"state-{old:012d}.bin").unlink(missing_ok=True)
        for path in self.state_dir.glob("released-*.arrow"):
            if int(path.stem.split("-")[1]) < floor:
                path.unlink(missing_ok=True)
        for path in self.state_dir.glob("engine-*.bin"):
            if int(path.stem.split("-")[1]) < engine_floor:
                path.unlink(missing_ok=True)

    def _first_snapshot_due(self) -> bool:
        """Whether the stream's first engine snapshot is due: a replay must start from
        the engine this stream started with, not one built from the query files of a
        later start. Taken before the first batch's edges (the engine is then empty: a
        rule set's snapshot is kilobytes, not the window's megabytes, and the first
        micro-batch is not the slowest); that batch is the log's first entry, replayed
        after it. (A first batch that changed the query snapshots after it, as every
        such batch does.)"""
        return (self.state_dir is not None and not self._logged
                and self._state.engine_batch < 0)

    def _snapshot_due(self) -> bool:
        """Whether ``snapshot_interval`` seconds have passed since the last snapshot."""
        return time.monotonic() - self._snapshot_at >= self.snapshot_interval

    def _snapshot(self, batch_id: int) -> None:
        """Write the engine (and its feature set) as ``engine-<batch_id>.bin``; the log
        starts again after it (the stream's first snapshot is taken before batch
        ``batch_id``'s edges, which the log then lists: see :meth:`_first_snapshot_due`)."""
        engine = (self._engine.snapshot(), getattr(self._engine, "features", None))
        blob = compressed(pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL))
        replace_atomically(self.state_dir / f"engine-{batch_id:012d}.bin",
                          lambda path: Path(path).write_bytes(blob))
        self._state.engine_batch, self._state.log = batch_id, []
        self._snapshot_at = time.monotonic()

    def _saved_batches(self) -> list[int]:
        if self.state_dir is None or not self.state_dir.exists():
            return []
        return sorted(int(m.group(1)) for p in self.state_dir.iterdir()
                      if (m := _STATE_FILE.match(p.name)))

    def recover(self, batch_id: int) -> None:
        """Continue from the state of the newest batch before ``batch_id``.

        In a running process that is the state in memory; after a restart (or when Spark
        re-runs a batch) it is read back from the checkpoint. :meth:`process` calls it;
        call it first when reading the batch needs the state (file ordinals, line counts).
        """
        if self._state.last_batch == batch_id - 1 or self.state_dir is None:
            return
        earlier = [b for b in self._saved_batches() if b < batch_id]
        if earlier:
            self._load(earlier[-1])
        elif self._state.last_batch != -1:
            self._state = _State()
            self._engine = self._new_engine()


    def _load(self, batch_id: int) -> None:
        """The state after batch ``batch_id``, its engine restored (or rebuilt from the
        batches logged)."""
        self._state = read_checkpoint(self.state_dir / f"state-{batch_id:012d}.bin",
                                       _unpickled)
        st = self._state
        if st.engine is not None:  # a state written with its engine inside
            self._engine = self._restored(st.engine, st.features)
            st.engine = st.features = None
            return
        if self._logged:
            self._engine = warmed(self._new_engine(), map(self._logged_edges, st.log),
                                  None if st.frontier == NEVER else st.frontier)
            return
        if st.engine_batch >= 0:
            snapshot, features = read_checkpoint(
                self.state_dir / f"engine-{st.engine_batch:012d}.bin", _unpickled)
            self._engine = self._restored(snapshot, features)
        else:
            self._engine = self._new_engine()
        self._replay(st.log)
        if st.log:  # snapshot at the next batch: a log must not span restarts (a stream
            self._snapshot_at = -math.inf  # run --once again and again would replay all)

    def _logged_edges(self, entry: LogEntry) -> pa.Table:
        return read_checkpoint(self.state_dir / edges_name(entry.batch_id), read_edges)

    def _restored(self, snapshot: bytes, features: Any) -> Any:
        """The engine of ``snapshot`` (and ``features``, a feature query's set)."""
        context = {"features": features} if features is not None else {}
        # what the snapshot does not hold, from the engine of this job (a widening's
        # detector)
        context.update(getattr(self._engine, "restore_context", dict)())
        return type(self._engine).restore(snapshot, **context)

    def _replay(self, log: list[LogEntry]) -> None:
        """Push the logged batches through the engine as they were pushed, their matches
        (written when the batches ran) dropped."""
        for entry in log:
            if entry.rows:
                for _ in self._chunked_pushes()(self._logged_edges(entry)):
                    pass
            if entry.frontier is not None:
                self._engine.advance(entry.frontier)


def _unpickled(path: Path) -> Any:
    return pickle.loads(decompressed(path.read_bytes()))


def late_records(job: ReplayJob, late: pa.Table, names: dict[int, str] | None,
                 places: pa.Table | None = None) -> pa.Table:
    """Late edges as the input gave them (endpoints as read), with the file and line they
    came from first (``file`` null where the source has no files; ``names``: file ordinal
    -> name, as :meth:`StreamOperator.process` takes it); from a source of records
    (``places``, :func:`record_places`), each edge's record last: ``topic``, ``partition``,
    ``offset``."""
    seq = late.column("seq").to_numpy()
    index = seq >> FILE_INDEX_SHIFT
    files = [names.get(int(i)) if names else None for i in index]
    lines = seq & ((1 << FILE_INDEX_SHIFT) - 1) if names else seq
    edges = job.orient(late)  # swapping back: the query's orientation is its own
    table = pa.Table.from_arrays([pa.array(files, pa.string()), pa.array(lines, pa.int64()),
                                  *edges.columns], names=["file", "line", *edges.column_names])
    if places is None or places.num_rows == 0:
        return table
    record = np.searchsorted(places.column("first_seq").to_numpy(), seq, side="right") - 1
    taken = pa.array(record)
    for name in ("topic", "partition", "offset"):
        table = table.append_column(name, places.column(name).take(taken))
    return table


def record_places(first_seq: np.ndarray, topic: pa.Array, partition: pa.Array,
                  offset: pa.Array) -> pa.Table:
    """Where the lines of a batch from a source of records (Kafka) came from: the ``seq``
    of each record's first line (ascending), and the record's topic, partition, offset
    (:func:`late_records` finds a line's record by its ``seq``)."""
    return pa.table({"first_seq": pa.array(first_seq, pa.int64()),
                     "topic": topic.cast(pa.string()), "partition": partition.cast(pa.int32()),
                     "offset": offset.cast(pa.int64())})


def _later(method: Callable[..., pa.Table], *args: Any) -> Iterator[pa.Table]:
    """``method(*args)``'s table, called when it is taken (after the chunks before it)."""
    yield method(*args)


def edge_place(seq: int, names: dict[int, str] | None) -> str:
    """``file:line`` of an edge whose file is named in ``names`` (by the ordinal in its
    ``seq``), else ``seq N``."""
    name = names.get(seq >> FILE_INDEX_SHIFT) if names else None
    if name is None:
        return f"seq {seq}"
    return f"{name}:{seq & ((1 << FILE_INDEX_SHIFT) - 1)}"


#: Columns of late-edge records holding times: JSONL writes them in seconds, as the
#: match sinks do (Parquet keeps int64 microseconds)
class PartWriter:
    """Arrow rows (late edges, rejected lines) as one JSONL or Parquet file per batch.

    ``write(table, batch_id)`` replaces ``part-<batch_id>`` atomically, so re-runs of a
    batch overwrite rather than duplicate. JSONL writes ``t`` and ``dur`` as exact
    decimal seconds, as the match sinks do; Parquet keeps int64 microseconds.
    """

    def __init__(self, directory: str | os.PathLike, fmt: str = "jsonl") -> None:
        if fmt not in ("jsonl", "parquet"):
            raise ValueError("fmt must be jsonl or parquet")
        self.directory = Path(directory)
        self.fmt = fmt
        self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, table: pa.Table, batch_id: int) -> Path:
        target = self.directory / f"part-{batch_id:08d}.{self.fmt}"
        replace_atomically(target, lambda path: self._write_part(table, path))
        return target

    def _write_part(self, table: pa.Table, path: str) -> None:
        if self.fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, path)
            return
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in record_lines(table))


#: Micro-batches in a row whose lag grew before the stream is said to fall behind.
GROWING_BATCHES = 3


class Pace:
    """How a stream keeps up: the records its micro-batches took against the wall-clock
    time they took (the matched rate), the rate its source offers, and the lag the source
    reports after each batch (how long the newest record taken was due; the records due
    since are the backlog).

    Parameters
    ----------
    offered_rate : float or None
        Records a second the source offers (the generator's ``--rate``); None: unknown.
    cap : int or None
        The most records a micro-batch takes (``--max-records-per-batch``), named in the
        warning.

    Examples
    --------
    >>> pace = Pace(offered_rate=1_000, cap=100)
    >>> [pace.observe(100, 1.0, lag_us, now=1.0 + i) for i, lag_us in
    ...  enumerate((1_000_000, 2_000_000, 3_000_000))]
    [[], [], []]
    >>> pace.line()
    'matched 100/s, offered 1,000/s, lag 3.0 s (3,000 records behind)'
    >>> pace.observe(100, 1.0, 4_000_000, now=4.0)[0][:60]
    'falling behind: the lag grew 3 micro-batches in a row, to 4.'
    """

    def __init__(self, offered_rate: float | None = None, cap: int | None = None) -> None:
        self.offered_rate = offered_rate
        self.cap = cap
        self.records = 0
        self.batch_rate = 0.0
        self.lag_us: int | None = None
        self.max_lag_us: int | None = None
        self._first: float | None = None
        self._last: float | None = None
        self._growing = 0  # batches in a row whose lag grew
        self._warned = False

    def observe(self, records: int, seconds: float, lag_us: int | None,
                now: float) -> list[str]:
        """Note a micro-batch that took ``records`` in ``seconds`` and ended at ``now``
        (``time.perf_counter()``) with the source ``lag_us`` behind (None: unknown);
        return the warning to print, if the lag has grown :data:`GROWING_BATCHES`
        batches in a row (once for each such run)."""
        start = self._last if self._last is not None else now - seconds
        if self._first is None:
            self._first = start
        self.records += records
        self.batch_rate = records / max(now - start, 1e-6)
        self._last = now
        return [] if lag_us is None else self._watch_lag(lag_us)

    def _watch_lag(self, lag_us: int) -> list[str]:
        grew = self.lag_us is not None and lag_us > self.lag_us
        self.lag_us = lag_us
        self.max_lag_us = max(self.max_lag_us or 0, lag_us)
        self._growing = self._growing + 1 if grew else 0
        if not grew:
            self._warned = False
        if self._growing < GROWING_BATCHES or self._warned:
            return []
        self._warned = True
        capped = (f", and a micro-batch takes at most {self.cap:,} records "
                  "(--max-records-per-batch)" if self.cap else "")
        return [f"falling behind: the lag grew {GROWING_BATCHES} micro-batches in a row, "
                f"to {lag_us / 1e6:.1f} s ({self._rates()}); the records due meanwhile "
                f"wait at the source{capped}"]

    def _rates(self) -> str:
        offered = f", offered {self.offered_rate:,.0f}/s" if self.offered_rate else ""
        return f"matched {self.batch_rate:,.0f}/s{offered}"

    def backlog(self) -> int | None:
        """Records due and not yet taken (the lag at the offered rate), if both are known."""
        if self.lag_us is None or not self.offered_rate:
            return None
        return round(self.lag_us * self.offered_rate / 1e6)

    def line(self) -> str:
        """The progress line's part: the last batch's matched rate, the offered rate and
        the lag, where known."""
        if self.lag_us is None:
            return self._rates()
        behind = self.backlog()
        return (f"{self._rates()}, lag {self.lag_us / 1e6:.1f} s"
                + (f" ({behind:,} records behind)" if behind is not None else ""))

    def as_dict(self) -> dict[str, Any]:
        """The summary's figures: records a second over the whole run, offered and
        matched, and the last and largest lag (seconds) and backlog, where known."""
        span = (self._last or 0.0) - (self._first or 0.0)
        figures: dict[str, Any] = {
            "matched_rate": round(self.records / span, 1) if span > 0 else None}
        if self.offered_rate:
            figures["offered_rate"] = self.offered_rate
        if self.lag_us is not None:
            figures.update(lag_s=round(self.lag_us / 1e6, 3),
                           max_lag_s=round((self.max_lag_us or 0) / 1e6, 3),
                           backlog=self.backlog())
        return figures


#: the reason a stream's reject gives for a file it skipped whole (a file it could not
#: read at all: :meth:`~graphcep.runtime.streaming.sources.FileSource` quarantines it)
SKIPPED_FILE = "unreadable file, skipped: "


#: the reason a stream's reject gives for where a damaged file broke off, its edges
#: before the damage read (a truncated gzip, a read error)
DAMAGED_FILE = "damaged file, read up to the damage: "


def skipped_file_warnings(rejects: pa.Table | None) -> list[str]:
    """A warning line for each file of ``rejects`` the stream skipped whole or read only
    up to a damage: one reject among the malformed lines would be easy to miss, and the
    file's edges (all, or those after the damage) were not matched (times in
    milliseconds read as seconds, a file of another format, a damaged Parquet file, a
    truncated gzip)."""
    if rejects is None or rejects.num_rows == 0:
        return []
    reasons = rejects.column("reason")
    marked = pc.or_(pc.starts_with(reasons, SKIPPED_FILE), pc.starts_with(reasons, DAMAGED_FILE))
    lines = []
    for row in rejects.filter(marked).to_pylist():
        skipped = row["reason"].startswith(SKIPPED_FILE)
        why = row["reason"].removeprefix(SKIPPED_FILE).removeprefix(DAMAGED_FILE)
        why = re.sub(r"^\w+(Error|Exception): ", "", why).removeprefix(f"{row['file']}: ")
        if skipped:
            lines.append(f"skipped {row['file']}, none of its edges read (the stream goes on "
                         f"without it; a fixed copy under a new name is read): {why}")
        else:
            lines.append(f"{row['file']} is damaged at line {row['line']:,}: its edges "
                         f"before it were read, none after (the stream goes on; a fixed "
                         f"copy under a new name is read whole): {why}")
    return lines


def print_report(report: BatchReport) -> None:
    """The batch's warnings, then its progress line, on stderr."""
    print_warnings(report)
    print(report.line(), file=sys.stderr, flush=True)


def print_warnings(report: BatchReport) -> None:
    """The batch's notes and warnings only (``graphcep stream --quiet``)."""
    for note in report.notes:
        print(f"graphcep: {note}", file=sys.stderr, flush=True)
    for warning in report.warnings:
        print(f"graphcep: warning: {warning}", file=sys.stderr, flush=True)
