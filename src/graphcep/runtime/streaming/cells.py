"""HyperCube cells in Spark's executors: each cell's engine stepped by a Spark task.

The driver's streaming operator (:mod:`graphcep.runtime.streaming.driver`) reorders, matches and
checkpoints in the driver. Here the matching runs in Spark's executors instead: every
micro-batch is read and routed to the cells of
:func:`~graphcep.runtime.hypercube.choose_shares`'s grid, one Spark row per task and
cell holding that cell's rows as Arrow IPC (``mapInArrow``, :func:`packed_rows`; a
source's files are read in the executors too), and each cell takes its rows together with
its state (:class:`CellState`: the engine, the cell's reorder buffer, the newest time, the
frontier and the count of files read) in a task of its own (:class:`CellRunner`). Where
that state is kept, and who hands it to the cell, is one of two:

* ``graphcep stream`` (:func:`write_cells_stream`): each micro-batch is one Spark job run
  from ``foreachBatch`` -- route, shuffle to at most a task per core
  (:func:`partition_keys`), step (:func:`step_batch`; without the shuffle where one task
  steps every cell, or a few tasks each read the whole batch: :func:`rereads`) -- and the
  cells' states are files beside the checkpoint (:class:`StateFiles`) that the driver
  names to each batch's cells and records, once the batch's parts are written, before
  Spark commits it (:meth:`StateFiles.record`). A re-run batch starts from the record of
  the batch before it. Spark's stateful operator is left out: it cost a micro-batch a
  third of its time (pandas frames in and out of every cell, the state store's commit, a
  second job for adaptive execution), with the states already in files.
* ``Query.match`` on a user's streaming DataFrame (:func:`cell_matches`): a streaming
  DataFrame of matches the user writes to any sink, so ``applyInPandasWithState`` hands
  each cell its rows and its state, a blob in Spark's state store (:class:`InlineStates`),
  which Spark checkpoints with the batch.

Either way adding executors adds cells that match at once.

Event time and numbering as the driver's operator keeps them
-------------------------------------------------------------
Besides its edges, every task of a micro-batch sends each cell one *heartbeat* row
holding the task's newest time and the files it read. So every cell sees the newest time
of the whole stream, and its frontier ``F = max_t - lateness`` is the driver operator's,
batch by batch: an edge with ``t < F`` (the frontier before its batch) is late, the
buffered edges with ``t < F`` (after it) are released in stream order ``(t, seq)``. And
every cell sees all files of the batch: it numbers them in name order after the files of
the batches before, so each edge's ``seq`` (line plus file ordinal ``<< 40``) is the
driver mode's. A source numbered by lines in stream order (Kafka records in (topic,
partition, offset) order, a streaming DataFrame's rows in ``toArrow`` order) numbers
each task's lines within chunks instead (:attr:`SourcePart.chunks`), the heartbeat
naming each chunk's order and size: every cell numbers the batch's chunks in that
order after the lines of the batches before (:func:`_in_stream_order`), as the driver
numbers the whole batch. A late edge is reported once, by the first cell it is routed to; an edge
that can play no query edge goes to cell 0 only to be checked for lateness and counted.
A cell reports only the matches whose home it is
(:func:`~graphcep.runtime.hypercube.home_filter`), so each match is reported once. Cell 0
also reports the lines read and the rejected ones.

The edge columns a cell carries are the core ones and the *attributes* the query's
predicates read (``label``, ``bytes``, ...): :func:`cell_attributes` picks them from a
sample of the stream's schema, whose types are then fixed for the query's life (Spark's
plan has one schema); an edge missing one carries a null there.

Each cell yields a few rows per micro-batch (``late``, ``reject``, ``stats``: Arrow IPC
bytes or a pickle), and its matches go where its states do
(:meth:`StateFiles.matches_out`): ``graphcep stream``'s cells write them to a file of the
batch's beside their states, chunk by chunk as the engine finds them, and their row
names the file (``spilled``), which the driver reads into the sinks a chunk at a time --
a batch whose edges complete millions of matches is held whole by no process, and the
matches do not cross into Spark's JVM and back; ``Query.match``'s cells carry them in
their rows (``match``, a row a chunk). :func:`start_cells_stream` writes them as part
``b`` of the sinks in ``foreachBatch``, overwriting on a re-run: exactly once, as Spark
re-runs a batch on the same input and the cells from the states before it.

Engines kept alive
------------------
Restoring an engine from its snapshot every micro-batch costs work in proportion to its
window. So each Python worker keeps the engines it stepped (:class:`LiveCells`, keyed by
the query's start and the cell): a state carries a random version, new with every step,
and a worker whose kept engine has the version of the state it is handed steps that
engine as it is. Spark reuses its Python workers (``spark.python.worker.reuse``, on by
default), so on one core this is every step; when another worker stepped the cell since
(with several cores Spark hands a task whichever of its idle workers comes first), or
Spark re-runs a batch from the state before it (a failed task, a restarted driver), the
versions differ and the engine is restored from the stored state, which stays the
truth. With :class:`StateFiles` that state is not
the engine: a cell whose engine is its window (SAL, windowed ν-expressions) writes only
the edges the batch released to it, and a restore warms a new engine from the batches
within the window (:mod:`~graphcep.runtime.streaming.batch_log`); other engines
(subscriptions, over the whole stream) are snapshotted whole each batch. Spark's own
per-batch work is most of a batch's time (``--profile``, ``bench/RESULTS.md``).

Profile
-------
Each cell's step times its phases (state and rows in, restoring, matching, the rest of
the step, the snapshot, state and matches out, and the time since the step before it in
the same task: Spark's work between two cells, :class:`StepEnds`) and every task's
heartbeat to cell 0 its reading and routing;
they ride in the ``stats`` rows, and
:class:`~graphcep.runtime.streaming.cells_run.CellsProfile` sums them per batch for
``--profile``, with Spark's side of each batch from the query's progress.

End of input
------------
:func:`flush_cells` reads the cells' state as the last committed micro-batch left it
(:meth:`StateFiles.recorded_before`), releases every buffered edge (the frontier moves past
the newest one) and writes the matches as the batch after the last -- not committed, as
the driver mode's flush: if the stream goes on later, that batch replaces the flush's
part and the flushed edges are matched once, when the watermark passes them.

Scope: every kind whose stream splits into cells exactly
(:meth:`~graphcep.jobs.base.ReplayJob.cell_split`, :mod:`graphcep.runtime.cell_plans`):
SAL queries without vertex features (a feature counts over the whole stream, which no
cell sees) on a HyperCube grid; ν-expressions keyed by the variable on every link, and
subscriptions by their key, on keyed cells, each cell running the kind's own engine. Late-edge records carry the columns the cells
carry, not every column of the input.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import ChunkedPushes, coalesced
from graphcep.engines.subgraph.plan import ROLES
from graphcep.events import (
    CORE_NAMES,
    empty_edges,
    empty_matches,
    normalize_edges,
    sort_stream,
)
from graphcep.io.readers import FILE_INDEX_SHIFT, READ_REJECT_SCHEMA
from graphcep.io.sinks import replace_atomically
from graphcep.jobs.base import Extent
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.cell_plans import CellPlan, cell_plan, home_filter, route, screens_roles
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
from graphcep.runtime.streaming.cell_engines import _ipc
from graphcep.runtime.streaming.checkpoint_bytes import (
    compressed,
    decompressed,
    read_checkpoint,
)
from graphcep.runtime.streaming.driver import edge_place, late_records, newest_edge
from graphcep.runtime.streaming.query import discard_unfinished_writes
from graphcep.runtime.streaming.sources import Place, SourcePart, file_key, local_name

#: the core edge columns a cell carries (attributes follow them)
EDGE_COLUMNS = ("t", "src", "dst", "dur", "seq")
#: ``_kind`` of a routed row: a copy of an edge; the copy that also reports it if late; a
#: heartbeat (``t``: the newest time of its task); an edge only checked for lateness
COPY, FIRST_COPY, HEARTBEAT, CHECK_ONLY = 0, 1, 2, 3
#: a cell's output row: its kind, the table (Arrow IPC; pickled for ``stats``; for ``spilled``
#: the path of the file that holds it) and a count
#: Spark can sum (rows of the table; for ``stats`` the stream's edges the cell counted)
OUTPUT_DDL = "kind string, rows binary, count long"
STATE_DDL = "blob binary"
_KEYS = pa.schema([("_cell", pa.int64()), ("_kind", pa.int32()), ("_file", pa.int64()),
                   ("_meta", pa.binary()), (ROLES, pa.int64())])
#: the routed rows' columns a cell drops before it buffers an edge (``_kind`` stays until
#: it is released; :data:`ROLES` goes to the engine where the plan screens roles)
_ROUTING = ["_cell", "_file", "_meta"]
#: a task's rows for one cell as Arrow IPC (:func:`packed_rows`)
PACKED = pa.schema([("_cell", pa.int64()), ("rows", pa.binary())])
#: :data:`PACKED` rows keyed by the partition of the task that steps their cell
TASKED = pa.schema([("_task", pa.int64()), *PACKED])
#: a cell's output row as :func:`step_batch` collects it: the cell, then :data:`OUTPUT_DDL`
#: (``kind`` ``state``: what keeps the cell's state after the batch)
STEPPED = pa.schema([("_cell", pa.int64()), ("kind", pa.string()), ("rows", pa.binary()),
                     ("count", pa.int64())])
_CORE = pa.schema([("t", pa.int64()), ("src", pa.string()), ("dst", pa.string()),
                   ("dur", pa.int64()), ("seq", pa.int64())])
_NEVER = int(np.iinfo(np.int64).min)
_FILE_MASK = (1 << FILE_INDEX_SHIFT) - 1


def cell_grid(job: SubgraphJob, cells: int) -> CellPlan:
    """The cells, at most ``cells``, the job's stream is split into
    (:func:`~graphcep.runtime.cell_plans.cell_plan`: a SAL query's HyperCube grid, or
    keyed cells for a ν-expression or subscriptions)."""
    return cell_plan(job, cells)


def cell_attributes(job: SubgraphJob, sample: pa.Schema) -> pa.Schema:
    """The attribute columns (beyond ``t, src, dst, dur, seq``) of ``sample`` that the
    job reads, with their types."""
    wanted = set(job.needed_columns(sample.names)) - set(CORE_NAMES) - {"pos", "_file"}
    return pa.schema([f for f in sample if f.name in wanted])


def routed_schema(attrs: pa.Schema) -> pa.Schema:
    """The rows :func:`routed_rows` makes: keys, kind, file, meta, edge columns."""
    return pa.schema([*_KEYS, *_CORE, *attrs])


def edges_part(rows: pa.Table, place: Place = (0, 0)) -> SourcePart:
    """A task's rows of a streaming DataFrame of edges (their own ``seq``), as a part."""
    return SourcePart(rows, [], rows.num_rows)


def routed_rows(part: SourcePart, job: SubgraphJob, shares: CellPlan,
                attrs: pa.Schema | None = None, read_s: float = 0.0) -> pa.Table:
    """One task's part of a micro-batch as rows keyed by cell (:func:`routed_schema`),
    heartbeats included (module docstring). Cell 0's heartbeat notes the seconds the
    task spent reading (``read_s``, given) and routing, for ``--profile``."""
    started = time.perf_counter()
    attrs = attrs if attrs is not None else pa.schema([])
    edges, files = _conformed(part.edges, attrs)
    if edges.num_rows == 0 and not part.files and not part.chunks:
        return routed_schema(attrs).empty_table()
    cells, rows, roles = route(edges, job, shares)
    kind = np.full(len(rows), COPY, dtype=np.int32)
    kind[np.unique(rows, return_index=True)[1]] = FIRST_COPY  # sorted by cell: the least
    routed = np.zeros(edges.num_rows, dtype=bool)
    routed[rows] = True
    unrouted = np.flatnonzero(~routed)  # not setdiff1d: it hashes both arrays, 10x slower
    newest = pc.max(edges.column("t")).as_py() if edges.num_rows else _NEVER
    count = shares.cells
    spent = {"read": read_s, "route": time.perf_counter() - started}
    metas = [_meta(part, spent if cell == 0 else None) for cell in range(count)]
    beats = pa.table({"t": np.full(count, newest, np.int64), "src": [""] * count,
                      "dst": [""] * count, "dur": np.zeros(count, np.int64),
                      "seq": np.zeros(count, np.int64)})
    beats = _with_nulls(beats, attrs)
    copies = _keyed(attrs, edges.take(rows), cells, kind, files[rows], roles, None)
    checks = _keyed(attrs, edges.take(unrouted), np.zeros(len(unrouted), np.int64),
                    np.full(len(unrouted), CHECK_ONLY, np.int32), files[unrouted],
                    np.zeros(len(unrouted), np.int64), None)
    beats = _keyed(attrs, beats, np.arange(count, dtype=np.int64),
                   np.full(count, HEARTBEAT, np.int32), np.zeros(count, np.int64),
                   np.zeros(count, np.int64), metas)
    # in cell order (the copies come sorted by cell), so that packing them takes slices
    # of these columns instead of a copy of every row
    bounds = np.searchsorted(cells, np.arange(count + 1))
    pieces = []
    for cell in range(count):
        pieces.append(copies.slice(bounds[cell], bounds[cell + 1] - bounds[cell]))
        if cell == 0:
            pieces.append(checks)
        pieces.append(beats.slice(cell, 1))
    return pa.concat_tables(pieces)


def packed_rows(rows: pa.Table) -> pa.RecordBatch:
    """A task's routed rows as one Spark row per cell (:data:`PACKED`): the cell's rows
    as Arrow IPC bytes. Spark then shuffles a few rows per task, not a row per copy of
    an edge, and the cell reads its rows back from Arrow without a pass through pandas."""
    cells = rows.column("_cell").to_numpy()
    if np.any(cells[1:] < cells[:-1]):  # routed_rows' come sorted
        order = np.argsort(cells, kind="stable")
        cells = cells[order]
        rows = rows.take(pa.array(order))
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]]) if len(cells) else []
    stops = np.r_[starts[1:], len(cells)] if len(cells) else []
    payloads = [_ipc(rows.slice(int(a), int(b - a))) for a, b in zip(starts, stops, strict=True)]
    return pa.RecordBatch.from_arrays(
        [pa.array(cells[starts] if len(cells) else [], pa.int64()),
         pa.array(payloads, pa.binary())], schema=PACKED)


def unpacked_rows(payloads: Iterable[bytes], attrs: pa.Schema) -> pa.Table:
    """A cell's rows of a micro-batch from the Arrow IPC payloads of :func:`packed_rows`."""
    tables = [pa.ipc.open_stream(payload).read_all() for payload in payloads]
    return pa.concat_tables(tables) if tables else routed_schema(attrs).empty_table()


def _conformed(edges: pa.Table, attrs: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    """The part's edges as the core columns and ``attrs`` (nulls where missing, cast to
    the fixed types), and the file key of each."""
    n = edges.num_rows
    names = edges.column_names
    files = (edges.column("_file").to_numpy() if "_file" in names
             else np.zeros(n, np.int64))
    if n == 0:
        return _with_nulls(_CORE.empty_table(), attrs), files
    edges = normalize_edges(edges)
    columns = [edges.column(c).cast(f.type) for c, f in zip(EDGE_COLUMNS, _CORE, strict=True)]
    for f in attrs:
        columns.append(edges.column(f.name).cast(f.type) if f.name in names
                       else pa.nulls(n, f.type))
    return pa.Table.from_arrays(columns, schema=pa.schema([*_CORE, *attrs])), files


def _with_nulls(table: pa.Table, attrs: pa.Schema) -> pa.Table:
    for f in attrs:
        table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table


def _meta(part: SourcePart, spent: dict[str, float] | None) -> bytes | None:
    """A heartbeat's note: the files read (every cell numbers them); for cell 0 also the
    lines read, the rejects and the task's seconds ``spent`` reading and routing."""
    meta: dict[str, Any] = {"files": part.files} if part.files else {}
    if part.chunks:  # every cell numbers the batch's lines (:func:`_in_stream_order`)
        meta["chunks"] = part.chunks
    if spent is not None:
        meta["lines"] = part.lines
        meta["lag_us"] = part.lag_us
        meta["seconds"] = spent
        if part.rejects is not None and part.rejects.num_rows:
            meta["rejects"] = _ipc(part.rejects)
    return pickle.dumps(meta) if meta else None


def _keyed(attrs: pa.Schema, edges: pa.Table, cells: np.ndarray, kinds: np.ndarray,
           files: np.ndarray, roles: np.ndarray, metas: list[bytes | None] | None
           ) -> pa.Table:
    n = edges.num_rows
    keys = [pa.array(cells, pa.int64()), pa.array(kinds, pa.int32()),
            pa.array(files, pa.int64()),
            pa.array(metas if metas is not None else [None] * n, pa.binary()),
            pa.array(roles, pa.int64())]
    return pa.Table.from_arrays([*keys, *edges.columns], schema=routed_schema(attrs))


@dataclass
class CellState:
    """One cell's state between micro-batches (pickled: a blob in Spark's state store, or
    a file of :class:`StateFiles`)."""

    engine: bytes | None = None
    buffer: pa.Table | None = None
    max_t: int = _NEVER
    frontier: int = _NEVER
    files: int = 0  # files read before this batch: the next file's ordinal
    lines: int = 0  # lines of chunks (:attr:`SourcePart.chunks`) before this batch
    #: random bytes new with every step: the engine kept alive with the same version is
    #: the engine this state's snapshot holds (:class:`LiveCells`)
    version: bytes = b""
    #: the batches whose released edges rebuild the engine (:class:`StateFiles`; empty
    #: where :attr:`engine` holds it)
    log: tuple[LogEntry, ...] = ()

    def blob(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass
class CellStep:
    """What one cell did with one micro-batch (``stats``: counts for the progress line)."""

    state: CellState
    matches: pa.Table
    late: pa.Table
    rejects: pa.Table | None = None
    stats: dict[str, int] = field(default_factory=dict)
    engine: Any = None  # the engine after the step, which the stored state holds
    #: the edges the step released to the engine (None: none)
    released: pa.Table | None = None
    #: the engine's window, where the engine is only that (else None: a snapshot holds it)
    window: Extent | None = None
    #: where the step's matches went (:class:`HeldMatches`: also :attr:`matches`)
    out: Any = None


#: the prefix of a phase's seconds among a step's stats (``s_match``: matching)
SECONDS = "s_"


class Clock:
    """Seconds per phase of one cell's step, for ``--profile`` (stats ``s_<phase>``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def stats(self) -> dict[str, float]:
        return {SECONDS + name: seconds for name, seconds in self.seconds.items()}

    def total(self, names: tuple[str, ...]) -> float:
        """The seconds of the phases ``names`` so far."""
        return sum(self.seconds.get(name, 0.0) for name in names)


#: the phases :func:`step_cell` times; the rest of a step is ``arrange`` (numbering,
#: lateness, the reorder buffer, the home filter, late records)
_STEP_PHASES = ("restore", "match")


class LiveCells:
    """Engines kept alive in this process between micro-batches, by run and cell.

    Spark reuses its Python workers (``spark.python.worker.reuse``, on by default), so the
    worker that stepped a cell last often steps it next: then the engine it kept is the one
    the stored state holds (same :attr:`CellState.version`) and needs no restoring. Any other
    version -- another worker stepped the cell since, or Spark re-runs a batch from the
    state before it after a failure -- restores from the stored state, which stays the
    truth. An engine is taken out while it steps: a step that fails leaves nothing behind.
    At most ``limit`` engines are kept, the least recently used dropped first.
    """

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._engines: OrderedDict[tuple[str, int], tuple[bytes, Any, CellState]] = \
            OrderedDict()

    def take(self, key: tuple[str, int], version: bytes) -> tuple[Any, CellState] | None:
        """The engine and the state of version ``version``, if this process kept them."""
        kept = self._engines.pop(key, None)
        if kept is None or not version or kept[0] != version:
            return None
        return kept[1], kept[2]

    def keep(self, key: tuple[str, int], step: CellStep) -> None:
        """Keep the engine and the state of a finished step, as its state's version (the
        state without the snapshot: the engine itself is kept)."""
        self._engines[key] = (step.state.version, step.engine, replace(step.state, engine=None))
        while len(self._engines) > self.limit:
            self._engines.popitem(last=False)


@dataclass(frozen=True)
class CellFile:
    """What names a cell's state file (:class:`StateFiles`), as the driver records it
    (:meth:`StateFiles.record`): the file's name under the directory (``cell-K/<batch>-<version>``),
    the state's version, the micro-batch that wrote it, and the first batch whose released
    edges the state reads (-1: none)."""

    name: str
    version: bytes
    batch: int
    log_from: int = -1


#: the local property that names a task's micro-batch (Spark's MicroBatchExecution)
_BATCH_ID = "streaming.sql.batchId"
#: a cell's state file: the micro-batch that wrote it, then the state's version
_STATE_NAME = re.compile(r"(\d{12})-[0-9a-f]+(\.part)?\Z")
#: a cell's released edges of one micro-batch (:func:`~graphcep.runtime.streaming.batch_log.edges_name`)
_EDGES_NAME = re.compile(r"released-(\d{12})\.arrow\Z")
#: the cells' states after one micro-batch (:meth:`StateFiles.record`)
_RECORD_NAME = re.compile(r"states-(\d{12})\.pickle\Z")
#: the matches the cells spilled in one micro-batch (:meth:`StateFiles.matches_out`)
_MATCHES_NAME = re.compile(r"matches-(\d{12})\Z")


class InlineStates:
    """The cells' states as blobs in Spark's state store: the whole state, snapshot and
    reorder buffer, goes through Spark every micro-batch (into the JVM, to its state store,
    and back to Python the batch after). ``Query.match`` on a user's streaming DataFrame
    keeps them so: Spark's checkpoint, chosen by the user's ``writeStream``, is all there
    is."""

    def open(self, stored: bytes | None, key: tuple[str, int],
             live: LiveCells) -> tuple[CellState | None, Any]:
        """The state stored, and its engine if ``live`` kept it (else None: restore)."""
        if stored is None:
            return None, None
        state = self.read(stored)
        kept = live.take(key, state.version)
        return state, None if kept is None else kept[0]

    def read(self, stored: bytes) -> CellState:
        return pickle.loads(stored)

    def restore(self, job: SubgraphJob, cell: int, state: CellState) -> Any:
        """The engine ``state`` holds (a new one for no state)."""
        return _engine(job, state)

    def matches_out(self, cell: int, batch: int, encode: Any = None) -> MatchesOut:
        """Where a step's matches go: its output rows, as Spark's result is a streaming
        DataFrame of them."""
        return HeldMatches()

    def save(self, cell: int, step: CellStep, stored: bytes | None, batch: int) -> bytes:
        """What Spark's state store keeps of ``step``'s state, the state after
        ``stored``'s, made by micro-batch ``batch``: here the engine's snapshot inside."""
        step.state.engine = step.engine.snapshot()
        return step.state.blob()


class StateFiles:
    """The cells' states as files under ``directory``, the driver recording after each
    micro-batch their names and versions (:class:`CellFile`, :meth:`record`): the executor
    mode of ``graphcep stream``, whose checkpoint holds both.

    Why: a cell's state holds its engine's whole window (about 43 bytes an edge for the
    triangle: 9.5 MB at 20,000 edges/s and W = 10 s). In Spark's state store it crosses
    from Python to the JVM, is written to the store's delta file and crosses back at the
    next micro-batch, every batch: with 10 MB, a micro-batch of a cell that does nothing
    else took 0.55 s against 0.36 s with a file (``bench/cell_state.py``). A file costs a
    compressed write from the Python worker; it is read only when the worker that steps
    the cell did not keep its engine (:class:`LiveCells`).

    Exactly once: a step writes a new file named by its micro-batch and its state's
    version and never touches the file of the state it started from, so a micro-batch
    re-run from that state finds it. A step deletes the files of its cell from that
    state's micro-batch and before, but that state's own: Spark has committed that batch
    (a batch starts once the one before it is committed), so they are the states before
    it and what failed attempts left. A file
    of a later micro-batch -- an attempt of this one running beside it (speculation) --
    is left alone. The directory must be one every executor and the driver see (the
    command's checkpoint: local on one machine, a shared mount on a cluster).
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = str(directory)

    def open(self, stored: bytes | None, key: tuple[str, int],
             live: LiveCells) -> tuple[CellState | None, Any]:
        """As :meth:`InlineStates.open`; the file is read only when the engine was not
        kept, and the files this state makes no one's are deleted (class docstring)."""
        if stored is None:
            return None, None
        ref = pickle.loads(stored)
        self._sweep(ref)
        kept = live.take(key, ref.version)
        if kept is not None:
            return kept[1], kept[0]
        return self.read(stored), None

    def read(self, stored: bytes) -> CellState:
        ref = pickle.loads(stored)
        return read_checkpoint(os.path.join(self.directory, ref.name),
                               lambda path: pickle.loads(decompressed(path.read_bytes())))

    def restore(self, job: SubgraphJob, cell: int, state: CellState) -> Any:
        """The engine of ``state``: from its snapshot, or warmed from the released edges
        of the batches its log lists, then advanced to its frontier."""
        if state.engine is not None:
            return _engine(job, state)
        return warmed(job.new_engine(threads=1),
                      (read_checkpoint(self._edges_path(cell, e.batch_id), read_edges)
                       for e in state.log),
                      None if state.frontier == _NEVER else state.frontier)

    def save(self, cell: int, step: CellStep, stored: bytes | None, batch: int) -> bytes:
        """Write ``step``'s state as a file of its own -- with the edges the batch
        released where the engine is its window, else with the engine's snapshot -- and
        return what names it (:class:`CellFile`, pickled)."""
        state = step.state
        if step.window is not None:
            log = list(state.log)
            released = step.released
            if released is not None and released.num_rows:
                log.append(entry_of(batch, released))
            state.log = tuple(window_entries(log, step.window, state.frontier))
            if state.log and state.log[-1].batch_id == batch:  # its edges in the window
                path = self._edges_path(cell, batch)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                write_edges(path, released)
            state.engine = None
        else:
            state.engine, state.log = step.engine.snapshot(), ()
        name = os.path.join(f"cell-{cell}", f"{batch:012d}-{state.version.hex()}")
        path = os.path.join(self.directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".part", "wb") as file:
            file.write(compressed(state.blob()))
        os.replace(path + ".part", path)
        log_from = state.log[0].batch_id if state.log else -1
        return pickle.dumps(CellFile(name, state.version, batch, log_from))

    def matches_out(self, cell: int, batch: int,
                    encode: Callable[[pa.Table], bytes] | None = None) -> MatchesOut:
        """Where a step's matches go: a file of the micro-batch's (:class:`SpilledMatches`,
        ``encode``: as the sink encodes them), which the driver reads into the sinks and
        then drops (:meth:`drop_matches`)."""
        return SpilledMatches(os.path.join(self._matches_dir(batch),
                                           f"cell-{cell}-{os.urandom(8).hex()}"), encode)

    def drop_matches(self, batch: int | None = None) -> None:
        """Delete the matches the cells spilled in micro-batch ``batch`` (None: in every
        batch: what an interrupted batch left, whose re-run spills its own)."""
        folders = ([self._matches_dir(batch)] if batch is not None else
                   [os.path.join(self.directory, name) for name in _listed(self.directory)
                    if _MATCHES_NAME.match(name)])
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _matches_dir(self, batch: int) -> str:
        return os.path.join(self.directory, f"matches-{batch:012d}")

    def recorded_before(self, batch_id: int) -> dict[int, bytes]:
        """The cells' states after the newest micro-batch before ``batch_id`` recorded
        (:meth:`record`): cell to what :meth:`save` returned (empty: none yet)."""
        done = [b for b in self._records() if b < batch_id]
        if not done:
            return {}
        return read_checkpoint(self._record_path(done[-1]),
                               lambda path: pickle.loads(path.read_bytes()))

    def record(self, batch_id: int, stored: dict[int, bytes]) -> None:
        """Record the cells' states after micro-batch ``batch_id`` (written whole, before
        Spark commits the batch); the records before the one before it go: a re-run
        starts from the newest record before its batch, which Spark has committed."""
        os.makedirs(self.directory, exist_ok=True)
        replace_atomically(Path(self._record_path(batch_id)), lambda path: Path(path)
                           .write_bytes(pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL)))
        for old in [b for b in self._records() if b < batch_id][:-1]:
            with suppress(FileNotFoundError):
                os.unlink(self._record_path(old))

    def recorded(self) -> bool:
        """Whether any micro-batch recorded the cells' states here."""
        return bool(self._records())

    def _records(self) -> list[int]:
        return sorted(int(m.group(1)) for n in _listed(self.directory)
                      if (m := _RECORD_NAME.match(n)))

    def _record_path(self, batch_id: int) -> str:
        return os.path.join(self.directory, f"states-{batch_id:012d}.pickle")

    def _edges_path(self, cell: int, batch: int) -> str:
        return os.path.join(self.directory, f"cell-{cell}", edges_name(batch))

    def _sweep(self, ref: CellFile) -> None:
        """Delete the cell's files of ``ref``'s micro-batch and before that ``ref``'s
        state does not read: the other states, and released edges before its log's."""
        folder, mine = os.path.split(ref.name)
        # a state of an earlier graphcep (no log_from) reads no released edges
        first_read = ref.log_from if ref.log_from >= 0 else ref.batch + 1
        with suppress(FileNotFoundError):
            for name in os.listdir(os.path.join(self.directory, folder)):
                made = _STATE_NAME.match(name)
                edges = _EDGES_NAME.match(name)
                stale = ((made and name != mine and int(made.group(1)) <= ref.batch) or
                         (edges and int(edges.group(1)) < min(first_read, ref.batch + 1)))
                if stale:
                    with suppress(FileNotFoundError):
                        os.unlink(os.path.join(self.directory, folder, name))


CellStates = InlineStates | StateFiles


def _listed(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


#: this Python worker's live engines (:class:`LiveCells`)
LIVE = LiveCells()


def live_cells() -> LiveCells:
    """This process's :data:`LIVE`. A cell's function reaches it through this function,
    which a Spark task unpickles by reference: a closure takes the globals it names by
    value, so naming :data:`LIVE` there would give every task a new, empty one."""
    return LIVE


class StepEnds:
    """When this Python worker last finished a cell's step, per Spark task attempt: the
    time from there to the task's next cell is Spark's work between two cells (the
    output to the JVM; with Spark's state store, its writes and the next group's rows and
    state to pandas), which ``--profile`` shows beside the cells' own phases."""

    def __init__(self) -> None:
        self._ends: dict[int, float] = {}

    def since(self, attempt: int) -> float | None:
        """Seconds since task ``attempt``'s last step ended here; None before its first."""
        ended = self._ends.get(attempt)
        return None if ended is None else time.perf_counter() - ended

    def mark(self, attempt: int) -> None:
        """A step of task ``attempt`` ended now (only the newest task is kept)."""
        self._ends = {attempt: time.perf_counter()}


#: this Python worker's :class:`StepEnds`
STEP_ENDS = StepEnds()


def step_ends() -> StepEnds:
    """This process's :data:`STEP_ENDS`, reached by reference (as :func:`live_cells`)."""
    return STEP_ENDS


def step_cell(job: SubgraphJob, shares: CellPlan, lateness_us: int, cell: int,
              state: CellState | None, rows: pa.Table, live: Any = None,
              clock: Clock | None = None, states: CellStates | None = None,
              out: MatchesOut | None = None) -> CellStep:
    """Cell ``cell`` takes its rows of one micro-batch (:func:`routed_rows`, any order):
    late edges out, the rest buffered, what the frontier passed released to its engine.

    ``live``: the engine that ``state`` holds, kept alive since the step that made it
    (:class:`LiveCells`); None restores it from ``states`` (default
    :class:`InlineStates`: the state's snapshot). ``clock`` times the phases (restoring,
    matching) into the step's stats. The step's state is stored by ``states.save``. The
    matches the cell reports go to ``out`` as the engine finds them (default
    :class:`HeldMatches`: kept, the step's ``matches``)."""
    started = time.perf_counter()
    state = state or CellState()
    states = states if states is not None else InlineStates()
    clock = clock or Clock()
    timed = clock.total(_STEP_PHASES)
    # else live, or a new one
    restored = int(live is None and (state.engine is not None or bool(state.log)))
    with clock.phase("restore"):
        engine = live if live is not None else states.restore(job, cell, state)
    kind = rows.column("_kind")
    metas = [pickle.loads(m) for m in rows.filter(pc.equal(kind, HEARTBEAT))
             .column("_meta").to_pylist() if m is not None]
    uris = sorted({u for m in metas for u in m.get("files", ())})
    names = {state.files + i: local_name(u) for i, u in enumerate(uris)}
    state.files += len(uris)
    edges = _in_stream_order(rows.filter(pc.not_equal(kind, HEARTBEAT)), metas, state)
    edges = job.orient(_numbered(edges, names))
    kind = edges.column("_kind")
    late_mask = pc.less(edges.column("t"), state.frontier)
    counted = pc.is_in(kind, pa.array([FIRST_COPY, CHECK_ONLY], pa.int32()))
    late = edges.filter(pc.and_(late_mask, counted))
    on_time = edges.filter(pc.and_(pc.invert(late_mask), pc.is_in(
        kind, pa.array([COPY, FIRST_COPY], pa.int32()))))
    newest = pc.max(rows.column("t")).as_py()
    if newest is not None:
        state.max_t = max(state.max_t, int(newest))
        state.frontier = max(state.frontier, state.max_t - lateness_us)
    on_time = on_time.drop_columns(_ROUTING if screens_roles(shares) else [*_ROUTING, ROLES])
    state.buffer = on_time if state.buffer is None else pa.concat_tables(
        [state.buffer, on_time])
    out = out if out is not None else HeldMatches()
    with clock.phase("match"):
        released, pushed = _release(engine, state, _home(out, shares, cell))
        out.close()
    state.engine = None  # the store writes what rebuilds the engine (``states.save``)
    state.version = os.urandom(16)
    late = late.drop_columns([*_ROUTING, "_kind", ROLES])
    stats = {"edges": pc.sum(counted).as_py() or 0, "late": late.num_rows,
             "lines": sum(m.get("lines", 0) for m in metas),
             "files": len(uris) if cell == 0 else 0,  # every cell sees them: one counts
             **_newest(edges.select(["t", "seq"]).filter(
                 pc.and_(pc.invert(late_mask), counted)), names),
             **_lag(metas)}
    step = CellStep(state, out.table(),
                    late_records(job, late, names) if late.num_rows else empty_edges(),
                    _rejects(metas), out=out)
    clock.seconds["arrange"] = (time.perf_counter() - started
                                - (clock.total(_STEP_PHASES) - timed))
    step.stats = {**stats, **_counts(step, engine, released), "restored": restored,
                  "process": os.getpid(),
                  **clock.stats(), **_routing(metas)}
    step.engine, step.released, step.window = engine, pushed, _window_of(job, engine)
    return step


def _window_of(job: SubgraphJob, engine: Any) -> Extent | None:
    """The job's extent where its engine is exactly its window (warmed up from the
    window's edges: :meth:`StateFiles.restore`), else None."""
    return job.extent() if windowed(job, engine) else None


def flush_cell(job: SubgraphJob, shares: CellPlan, cell: int, state: CellState,
               states: CellStates | None = None, out: MatchesOut | None = None) -> CellStep:
    """End of input for one cell: every buffered edge released (the frontier moves past
    the newest edge), what the engine reports at the end included (``states``: where the
    stream kept the state, which restores the engine; ``out``: as :func:`step_cell`'s)."""
    engine = (states if states is not None else InlineStates()).restore(job, cell, state)
    if state.max_t != _NEVER:
        state.frontier = max(state.frontier, state.max_t + 1)
    out = out if out is not None else HeldMatches()
    released, _ = _release(engine, state, _home(out, shares, cell), final=True)
    out.close()
    step = CellStep(state, out.table(), empty_edges(), out=out)
    step.stats = {"edges": 0, "late": 0, "lines": 0, "files": 0,
                  **_counts(step, engine, released)}
    return step


def _home(out: MatchesOut, shares: CellPlan, cell: int) -> Callable[[pa.Table], None]:
    """What takes the engine's chunks of matches: those whose home is ``cell`` to ``out``."""
    return lambda chunk: out.add(home_filter(chunk, shares, cell))


def _engine(job: SubgraphJob, state: CellState) -> Any:
    engine = job.new_engine(threads=1)
    return engine if state.engine is None else type(engine).restore(state.engine)


def _numbered(edges: pa.Table, names: dict[int, str]) -> pa.Table:
    """``seq`` plus the file ordinal ``<< 40`` of each edge's file (by its ``_file`` key)."""
    if not names or edges.num_rows == 0:
        return edges
    keys = np.array([file_key(n) for n in names.values()], np.int64)
    ordinals = np.array(list(names), np.int64)
    order = np.argsort(keys)
    where = np.searchsorted(keys[order], edges.column("_file").to_numpy())
    where = np.minimum(where, len(keys) - 1)
    found = keys[order][where] == edges.column("_file").to_numpy()
    offset = np.where(found, ordinals[order][where] << FILE_INDEX_SHIFT, 0)
    seq = edges.column("seq").to_numpy() + offset
    return edges.set_column(edges.schema.get_field_index("seq"), "seq",
                            pa.array(seq, pa.int64()))


def _in_stream_order(edges: pa.Table, metas: list[dict[str, Any]],
                     state: CellState) -> pa.Table:
    """``seq`` of edges numbered within their chunk (:attr:`SourcePart.chunks`, by the
    ``_file`` key) as the driver mode numbers the stream's lines: the batch's chunks in
    their order, after the lines of the batches before (``state.lines``, moved on)."""
    chunks = sorted(chunk for meta in metas for chunk in meta.get("chunks", ()))
    if not chunks:
        return edges
    keys = np.array([key for _, key, _ in chunks], np.int64)
    sizes = np.array([lines for _, _, lines in chunks], np.int64)
    bases = state.lines + np.concatenate([[0], np.cumsum(sizes)[:-1]])
    state.lines += int(sizes.sum())
    if edges.num_rows == 0:
        return edges
    order = np.argsort(keys)
    where = np.searchsorted(keys[order], edges.column("_file").to_numpy())
    seq = edges.column("seq").to_numpy() + bases[order][np.minimum(where, len(keys) - 1)]
    return edges.set_column(edges.schema.get_field_index("seq"), "seq",
                            pa.array(seq, pa.int64()))


def _release(engine: Any, state: CellState, report: Callable[[pa.Table], None],
             final: bool = False) -> tuple[int, pa.Table | None]:
    """Push the buffered edges the frontier passed, in stream order, their matches handed
    to ``report`` in chunks as the engine finds them (:class:`ChunkedPushes`: a batch
    whose edges complete millions of matches holds one chunk at a time); how many of
    the edges were first copies (edges of the stream, not copies), and the edges pushed
    (None: none)."""
    released, pushed = 0, None
    found: list[Iterable[pa.Table]] = []
    if state.buffer is not None and state.frontier != _NEVER:
        due = pc.less(state.buffer.column("t"), state.frontier)
        ready = sort_stream(state.buffer.filter(due))
        state.buffer = state.buffer.filter(pc.invert(due))
        released = pc.sum(pc.equal(ready.column("_kind"), FIRST_COPY)).as_py() or 0
        if ready.num_rows:
            pushed = ready.drop_columns(["_kind"])
            found.append(ChunkedPushes(engine)(pushed))
        found.append(_later(lambda: engine.advance(state.frontier)))
    if final and (end := getattr(engine, "flush", None)) is not None:
        found.append(_later(end))
    for chunk in coalesced(table for tables in found for table in tables):
        report(chunk)
    return released, pushed


def _later(make: Callable[[], pa.Table]) -> Iterator[pa.Table]:
    """``make()``'s table, made when taken (after the chunks before it)."""
    yield make()


class HeldMatches:
    """A step's matches kept in memory (a cell of ``Query.match``, whose output rows carry
    them; a test's step)."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.count = 0

    def add(self, table: pa.Table) -> None:
        if table.num_rows:
            self.tables.append(table)
            self.count += table.num_rows

    def table(self) -> pa.Table:
        return pa.concat_tables(self.tables) if self.tables else empty_matches()

    def rows(self) -> list[tuple[str, bytes, int]]:
        """The matches as output rows (:data:`OUTPUT`): Arrow IPC, one row a chunk."""
        return [("match", _ipc(table), table.num_rows) for table in self.tables]

    def close(self) -> None:
        """Nothing to finish."""


class SpilledMatches:
    """A step's matches written, chunk by chunk as found, to a file
    (:meth:`StateFiles.matches_out`) that its one output row names: neither the cell, nor
    Spark, nor the driver holds more than a chunk of a micro-batch's matches, however many
    its edges complete, and the matches do not cross into Spark's JVM and back. The file
    is an Arrow IPC stream (``spilled``), or, given the sink's ``encode`` (its
    ``encoder()``: JSON lines), the sink's own bytes (``encoded``), which the driver
    joins into the part without formatting a match itself."""

    def __init__(self, path: str, encode: Callable[[pa.Table], bytes] | None = None) -> None:
        self.path = path
        self.encode = encode
        self.count = 0
        self._writer: Any = None

    def add(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        if self._writer is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._writer = (open(self.path, "wb") if self.encode is not None  # noqa: SIM115
                            else pa.ipc.new_stream(self.path, table.schema))
        if self.encode is not None:
            self._writer.write(self.encode(table))
        else:
            self._writer.write_table(table)
        self.count += table.num_rows

    def table(self) -> pa.Table:
        return empty_matches()

    def rows(self) -> list[tuple[str, bytes, int]]:
        kind = "spilled" if self.encode is None else "encoded"
        return [(kind, self.path.encode(), self.count)] if self.count else []

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


MatchesOut = HeldMatches | SpilledMatches


def spilled_chunks(path: str) -> Iterator[pa.Table]:
    """The matches a cell spilled to ``path`` (:class:`SpilledMatches`), a chunk at a time."""
    with pa.OSFile(path) as file:
        for batch in pa.ipc.open_stream(file):
            yield pa.Table.from_batches([batch])


def _counts(step: CellStep, engine: Any, released: int) -> dict[str, int]:
    buffer = step.state.buffer
    buffered = 0 if buffer is None else (
        pc.sum(pc.equal(buffer.column("_kind"), FIRST_COPY)).as_py() or 0)
    return {"matches": step.out.count, "released": released, "buffered": buffered,
            "window": int(engine.state_size().get("edges", 0)),
            "frontier": step.state.frontier,
            "rejected": 0 if step.rejects is None else step.rejects.num_rows}


def _routing(metas: list[dict[str, Any]]) -> dict[str, float]:
    """The seconds the batch's tasks spent reading and routing (cell 0's notes), summed."""
    spent: dict[str, float] = {}
    for meta in metas:
        for name, seconds in meta.get("seconds", {}).items():
            spent[SECONDS + name] = spent.get(SECONDS + name, 0.0) + seconds
    return spent


def _newest(counted: pa.Table, names: dict[int, str]) -> dict[str, Any]:
    """The newest time of the on-time edges a cell counts (each edge is counted by one
    cell), the newest below it, and that edge's ``seq`` and place: the driver follows
    the stream's event time from them for its late-edge warnings (:class:`CellsRun`)."""
    if counted.num_rows == 0:
        return {}
    newest, below, seq = newest_edge(counted)
    newest_at = {"newest_t": newest, "below_t": below, "newest_seq": seq}
    if names:  # files: the driver names a source of records (Kafka) itself
        newest_at["newest_place"] = edge_place(seq, names)
    return newest_at


def _lag(metas: list[dict[str, Any]]) -> dict[str, int]:
    """How long the newest record of the batch had been due when a task read it, where
    the source knows (a generator's rows): the least over the tasks."""
    lags = [m["lag_us"] for m in metas if m.get("lag_us") is not None]
    return {"lag_us": min(lags)} if lags else {}


def _rejects(metas: list[dict[str, Any]]) -> pa.Table | None:
    tables = [pa.ipc.open_stream(m["rejects"]).read_all() for m in metas if "rejects" in m]
    return pa.concat_tables(tables) if tables else None


#: a cell's output rows (:data:`OUTPUT_DDL`)
OUTPUT = pa.schema([("kind", pa.string()), ("rows", pa.binary()), ("count", pa.int64())])


def _output_table(step: CellStep, clock: Clock | None = None) -> pa.Table:
    """A cell's step as the rows of :data:`OUTPUT`; ``clock``: the step's, its Arrow IPC
    of the output added to the stats."""
    started = time.perf_counter()
    tables = [(kind, table) for kind, table in (("late", step.late), ("reject", step.rejects))
              if table is not None and table.num_rows]
    out = [*step.out.rows(), *((kind, _ipc(table), table.num_rows) for kind, table in tables)]
    if clock is not None:
        step.stats = {**step.stats, **clock.stats(),
                      SECONDS + "rows out": time.perf_counter() - started}
    out.append(("stats", pickle.dumps(step.stats), int(step.stats.get("edges", 0))))
    kinds, payloads, counts = zip(*out, strict=True)
    return pa.Table.from_arrays([pa.array(kinds, pa.string()), pa.array(payloads, pa.binary()),
                                 pa.array(counts, pa.int64())], schema=OUTPUT)


@dataclass
class CellRunner:
    """How a Spark task steps one cell of a micro-batch, whichever way the stream keeps
    the cells' states (Spark's state store in :func:`cell_matches`, the driver in
    :func:`write_cells_stream`): the engine kept alive or restored from ``stored``, the
    step (:func:`step_cell`), its state saved; ``run``: the query's start, whose live
    engines are its own."""

    job: SubgraphJob
    shares: CellPlan
    lateness_us: int
    attrs: pa.Schema
    states: CellStates
    run: str = field(default_factory=lambda: os.urandom(8).hex())
    #: the match sink's encoder, where it has one (:meth:`~graphcep.io.sinks.JsonlSink.encoder`):
    #: the cells write its bytes, the driver joins them
    encode: Callable[[pa.Table], bytes] | None = None

    def step(self, cell: int, stored: bytes | None, payloads: list[bytes], batch: int,
             attempt: int) -> tuple[pa.Table, bytes]:
        """Cell ``cell`` takes its rows (Arrow IPC ``payloads`` of :func:`packed_rows`) of
        micro-batch ``batch`` in Spark task ``attempt``: its output rows (:data:`OUTPUT`)
        and what keeps its new state (``states.save``)."""
        clock = Clock()
        gap = step_ends().since(attempt)
        if gap is not None:  # Spark's work between two cells of one task
            clock.seconds["between"] = gap
        with clock.phase("state in"):
            state, live = self.states.open(stored, (self.run, cell), live_cells())
        with clock.phase("rows in"):
            rows = unpacked_rows(payloads, self.attrs)
        step = step_cell(self.job, self.shares, self.lateness_us, cell, state, rows, live,
                         clock, self.states, self.states.matches_out(cell, batch, self.encode))
        with clock.phase("state out"):
            saved = self.states.save(cell, step, stored, batch)
        live_cells().keep((self.run, cell), step)
        out = _output_table(step, clock)
        step_ends().mark(attempt)
        return out, saved


def _task_ids() -> tuple[int, int, int]:
    """This Spark task's partition, attempt id and micro-batch (-1 where unknown)."""
    from pyspark import TaskContext

    task = TaskContext.get()
    if task is None:
        return 0, -1, -1
    # the micro-batch, as Spark's streaming execution tells its tasks
    batch = int(task.getLocalProperty(_BATCH_ID) or -1)
    return task.partitionId(), task.taskAttemptId(), batch


def _router(read_part: Callable[[pa.Table, Place], SourcePart], runner: CellRunner,
            task_keys: list[int] | None = None) -> Callable[..., Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that reads a task's rows (``read_part``) and routes them
    to the cells, one row per cell (:func:`packed_rows`); with ``task_keys``, each row
    keyed for the partition of the task that steps its cell (:func:`partition_keys`)."""
    keys = None if task_keys is None else np.array(task_keys, np.int64)

    def route_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition = _task_ids()[0]
        for number, batch in enumerate(batches):
            started = time.perf_counter()
            part = read_part(pa.Table.from_batches([batch]), (partition, number))
            packed = packed_rows(routed_rows(part, runner.job, runner.shares, runner.attrs,
                                             time.perf_counter() - started))
            if keys is not None:
                cells = packed.column("_cell").to_numpy()
                packed = pa.RecordBatch.from_arrays(
                    [pa.array(keys[cells % len(keys)]), *packed.columns], schema=TASKED)
            yield packed

    return route_partition


def cell_matches(stream_df: Any, read_part: Callable[[pa.Table, Place], SourcePart],
                 job: SubgraphJob, shares: CellPlan, lateness_us: int,
                 attrs: pa.Schema) -> Any:
    """The streaming DataFrame of the cells' output (:data:`OUTPUT_DDL`) for a streaming
    DataFrame whose tasks' rows ``read_part`` reads (a source's files, Kafka records, a
    frame's rows, or edges), told where in the micro-batch they lie; the cells' states
    are blobs in Spark's state store (:class:`InlineStates`), so the result is a streaming
    DataFrame a user writes to any sink (``Query.match``)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.streaming.state import GroupStateTimeout

    runner = CellRunner(job, shares, lateness_us, attrs, InlineStates())

    def run_cell(key: tuple, frames: Iterator[Any], group: Any) -> Iterator[Any]:
        _, attempt, batch = _task_ids()
        stored = group.get[0] if group.exists else None
        payloads = [payload for frame in frames for payload in frame["rows"]]
        out, saved = runner.step(int(key[0]), stored, payloads, batch, attempt)
        group.update((saved,))
        yield out.to_pandas()

    routed = stream_df.mapInArrow(_router(read_part, runner), from_arrow_schema(PACKED))
    return routed.groupBy("_cell").applyInPandasWithState(
        run_cell, OUTPUT_DDL, STATE_DDL, "append", GroupStateTimeout.NoTimeout)


def partition_keys(spark: Any, tasks: int) -> list[int]:
    """For each of ``tasks`` partitions a key that Spark's hash partitioning
    (``repartition(tasks, key)``: Murmur3 with seed 42, modulo ``tasks``) sends there:
    the rows of cell ``c`` go to partition ``c mod tasks``, so each task steps as many
    cells as the others, where hashing the cell numbers would pile some on one task."""
    from pyspark.sql import functions as F

    found: dict[int, int] = {}
    span = 64 * tasks
    while len(found) < tasks:
        table = spark.range(span - 64 * tasks, span).select(
            "id", F.expr(f"pmod(hash(id), {tasks})").alias("p")).toArrow()
        for key, part in zip(table.column("id").to_pylist(), table.column("p").to_pylist(),
                             strict=True):
            found.setdefault(part, key)
        span += 64 * tasks
    return [found[part] for part in range(tasks)]


def _stepped_rows(cell: int, out: pa.Table, saved: bytes) -> pa.RecordBatch:
    """A cell's output rows and its saved state as rows of :data:`STEPPED`."""
    out = pa.concat_tables([out, pa.table({"kind": ["state"], "rows": [saved], "count": [0]},
                                          schema=OUTPUT)])
    out = out.add_column(0, "_cell", pa.array(np.full(out.num_rows, cell, np.int64)))
    return out.combine_chunks().to_batches()[0]


def step_batch(batch_df: Any, batch_id: int, route: Callable[..., Any], runner: CellRunner,
               stored: dict[int, bytes], tasks: int, hosts: bool = True,
               reread: bool = False) -> tuple[pa.Table, dict[int, bytes]]:
    """One micro-batch through the cells as one Spark job: the tasks' rows routed
    (``route``, :func:`_router` with :func:`partition_keys`), shuffled to ``tasks``
    tasks, each stepping its cells from the states ``stored`` names (cell to what
    ``runner.states`` saved) -- in its slot's cell host, which keeps their engines alive
    (:mod:`~graphcep.runtime.streaming.cell_hosts`), or itself without ``hosts``
    (:func:`several_slots`). The cells' output rows (:data:`OUTPUT`) and the states
    after the batch.

    Without the shuffle, one Python stage instead of two (the shuffle's write and read
    and the second stage cost a micro-batch about 0.17 s on two cores): with one task,
    the batch's partitions coalesced into the task that steps the cells; with ``reread``
    (:func:`rereads`: a few tasks, and a source whose rows name its data), the batch's
    rows collected (file names, the generator's row numbers) and every stepping task
    reading and routing the whole batch, keeping its own cells' rows."""
    from pyspark.sql.pandas.types import from_arrow_schema

    def step_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from graphcep.runtime.streaming.cell_hosts import connect

        slot, attempt, _ = _task_ids()
        rows = pa.Table.from_batches(list(batches), schema=TASKED)
        cells = rows.column("_cell").to_numpy()
        payloads = rows.column("rows")
        with connect(slot, runner) if hosts else nullcontext() as host:
            for cell in np.unique(cells):
                mine = payloads.filter(pa.array(cells == cell)).to_pylist()
                request = (int(cell), stored.get(int(cell)), mine, batch_id, attempt)
                try:
                    out, saved = (host or runner).step(*request)
                except (ConnectionError, OSError):
                    if host is None:
                        raise
                    host = None  # the host is gone: this task steps its cells itself
                    out, saved = runner.step(*request)
                yield _stepped_rows(int(cell), out, saved)

    if tasks == 1:  # one task steps every cell: it reads and routes the batch itself
        def route_and_step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return step_partition(route(batches))

        job = batch_df.coalesce(1).mapInArrow(route_and_step, from_arrow_schema(STEPPED))
    elif reread:
        whole = batch_df.toArrow()

        def reread_and_step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for _ in batches:  # the task's one row: its number, which is its partition's
                pass
            return step_partition(_own_rows(route(iter(whole.to_batches())), tasks))

        job = (batch_df.sparkSession.range(0, tasks, 1, tasks)
               .mapInArrow(reread_and_step, from_arrow_schema(STEPPED)))
    else:
        job = (batch_df.mapInArrow(route, from_arrow_schema(TASKED))
               .repartition(tasks, "_task")
               .mapInArrow(step_partition, from_arrow_schema(STEPPED)))
    stepped = job.toArrow()
    is_state = pc.equal(stepped.column("kind"), "state")
    states = stepped.filter(is_state)
    after = dict(stored)
    after.update(zip(states.column("_cell").to_pylist(), states.column("rows").to_pylist(),
                     strict=True))
    return stepped.filter(pc.invert(is_state)).drop_columns(["_cell"]), after


def _own_rows(routed: Iterator[pa.RecordBatch], tasks: int) -> Iterator[pa.RecordBatch]:
    """The routed rows of the cells this task steps (cell ``c`` with ``c mod tasks`` its
    partition, as :func:`partition_keys` shuffles them)."""
    task = _task_ids()[0]
    for batch in routed:
        cells = batch.column("_cell").to_numpy()
        yield batch.filter(pa.array(cells % tasks == task))


#: the most stepping tasks that each read the whole micro-batch instead of taking their
#: rows through a shuffle (:func:`rereads`)
REREAD_TASKS = 4


def rereads(source: Any, tasks: int) -> bool:
    """Whether each of the ``tasks`` stepping tasks reads the whole micro-batch itself
    (:func:`step_batch`): when the source's rows name its data (a file stream's file
    names, the generator's row numbers: ``rows_name_data``), so that collecting them
    moves no data, and the tasks are few, so that reading the batch ``tasks`` times costs
    less than the shuffle it saves (20,000 edges read and routed: 0.005 to 0.02 s,
    against 0.17 s). Kafka records are the data itself: they are shuffled. Every task
    then reads and routes the whole batch, and ``--profile`` counts the reading and
    routing once: the task that steps cell 0 reports its own (cell 0's heartbeat
    carries them)."""
    return 1 < tasks <= REREAD_TASKS and getattr(source, "rows_name_data", False)


@dataclass
class CellsOutput:
    """One micro-batch of the cells' output, gathered in the driver: the matches as the
    cells left them (tables, or the files they spilled them to), taken chunk by chunk
    (:meth:`match_chunks`)."""

    matches: list[pa.Table | str]
    late: pa.Table
    rejects: pa.Table
    stats: list[dict[str, int]]
    #: the driver's seconds: ``collect`` (the batch's Spark job and gathering its rows)
    #: and ``write`` (the parts before ``on_batch``), for ``--profile``
    seconds: dict[str, float] = field(default_factory=dict)
    #: the matches as files of the sink's own bytes and their rows
    #: (:attr:`CellRunner.encode`), in the order of :meth:`match_chunks`
    encoded: list[tuple[str, int]] = field(default_factory=list)

    def match_chunks(self) -> Iterator[pa.Table]:
        """The batch's matches, one chunk at a time, cell after cell in the order the
        cells' tasks and steps ran (fixed by the batch: a re-run writes the same part)."""
        for matches in self.matches:
            if isinstance(matches, str):
                yield from spilled_chunks(matches)
            else:
                yield matches


def collect_outputs(rows: pa.Table) -> CellsOutput:
    """A micro-batch of the cells' output rows (:data:`OUTPUT`, :func:`step_batch`, or
    :func:`flush_cells`')."""
    tables: dict[str, list[Any]] = {"match": [], "late": [], "reject": [], "stats": [],
                                    "encoded": []}
    for kind, payload, count in zip(rows.column("kind").to_pylist(),
                                    rows.column("rows").to_pylist(),
                                    rows.column("count").to_pylist(), strict=True):
        if kind == "spilled":
            tables["match"].append(payload.decode())
        elif kind == "encoded":
            tables["encoded"].append((payload.decode(), count))
        else:
            tables[kind].append(pickle.loads(payload) if kind == "stats"
                                else pa.ipc.open_stream(payload).read_all())
    # in line order (``seq``: the file's ordinal, then the line), as the driver mode
    # writes them, not grouped by the cell that found them late
    late = (pa.concat_tables(tables["late"]).sort_by("seq") if tables["late"]
            else empty_edges())
    rejects = (pa.concat_tables(tables["reject"]) if tables["reject"]
               else READ_REJECT_SCHEMA.empty_table())
    return CellsOutput(tables["match"], late, rejects, tables["stats"],
                       encoded=tables["encoded"])


@dataclass
class CellSinks:
    """Where the cells' output goes, part ``b`` per micro-batch ``b`` (``on_batch``:
    called after the parts are written, with the batch id and its output)."""

    matches: Any
    late: Any = None
    rejects: Any = None
    on_batch: Callable[[int, CellsOutput], None] | None = None

    def write(self, batch_id: int, output: CellsOutput) -> None:
        started = time.perf_counter()
        if output.encoded:  # the cells wrote the sink's bytes
            self.matches.write_encoded(output.encoded, batch_id)
        else:
            self.matches.write_chunks(output.match_chunks(), batch_id)
        if self.late is not None and output.late.num_rows:
            self.late.write(output.late, batch_id)
        if self.rejects is not None and output.rejects.num_rows:
            self.rejects.write(output.rejects, batch_id)
        output.seconds["write"] = time.perf_counter() - started
        if self.on_batch is not None:
            self.on_batch(batch_id, output)


def start_cells_stream(spark: Any, edges_df: Any, job: SubgraphJob, *, cells: int,
                       lateness_us: int, checkpoint: str, sink: Any, late_sink: Any = None,
                       available_now: bool = False, source: Any = None,
                       attrs: pa.Schema | None = None, reject_sink: Any = None,
                       on_batch: Callable[[int, CellsOutput], None] | None = None,
                       trigger_seconds: float | None = None,
                       states: StateFiles | None = None, gate: Any = None) -> Any:
    """Start the query: a stream -> cells -> part ``b`` of ``sink`` (matches),
    ``late_sink`` (late edges) and ``reject_sink`` per micro-batch ``b``.

    The stream is ``edges_df`` (a streaming DataFrame of edges, read as is) or, when
    ``edges_df`` is None, a ``source`` of :mod:`graphcep.runtime.streaming.sources` (its
    ``stream_df``, read in the executors by its ``read_part``). ``attrs``: the attribute
    columns the cells carry (:func:`cell_attributes`). Spark keeps its offsets under
    ``checkpoint``, the cells their states in ``states`` (default: ``cells`` under the
    checkpoint); a restart from them re-runs the unfinished micro-batch from the states
    before it and overwrites its parts. ``gate``: a
    :class:`~graphcep.runtime.streaming.query.BatchGate` a stop waits on.
    """
    shares = cell_grid(job, cells)
    sinks = CellSinks(sink, late_sink, reject_sink, on_batch)
    if edges_df is None:
        stream_df, read_part = source.stream_df(spark), source.read_part
    else:
        stream_df, read_part = edges_df, edges_part
    states = states if states is not None else StateFiles(Path(checkpoint) / "cells")
    runner = CellRunner(job, shares, lateness_us,
                        attrs if attrs is not None else pa.schema([]), states,
                        encode=encoder_of(sink))
    tasks = cell_tasks(spark, shares)
    return write_cells_stream(stream_df, read_part, runner, sinks, checkpoint=checkpoint,
                              tasks=tasks, available_now=available_now,
                              trigger_seconds=trigger_seconds, gate=gate,
                              reread=edges_df is None and rereads(source, tasks))


def write_cells_stream(stream_df: Any, read_part: Callable[[pa.Table, Place], SourcePart],
                       runner: CellRunner, sinks: CellSinks, *, checkpoint: str, tasks: int,
                       available_now: bool = False, trigger_seconds: float | None = None,
                       gate: Any = None, reread: bool = False) -> Any:
    """Start stepping the cells of ``runner`` over ``stream_df`` (its tasks' rows read by
    ``read_part``) in ``foreachBatch``: each micro-batch one Spark job on ``tasks`` tasks
    (:func:`step_batch`; ``reread``: each task reads the whole batch, :func:`rereads`),
    its output written to ``sinks`` as part ``b``, then the cells' states after it
    recorded (:meth:`StateFiles.record`) before Spark commits the batch; Spark's offsets
    under ``checkpoint`` (:func:`start_cells_stream`)."""
    states = runner.states
    if not isinstance(states, StateFiles):
        raise TypeError("a stream of cells keeps their states in StateFiles")
    refuse_state_store(checkpoint, states)
    discard_unfinished_writes(Path(checkpoint))
    states.drop_matches()  # an interrupted batch's: its re-run spills its own
    route = _router(read_part, runner, partition_keys(stream_df.sparkSession, tasks))
    hosts = several_slots(stream_df.sparkSession)

    def write_batch(batch_df: Any, batch_id: int) -> None:
        with gate.batch() if gate is not None else nullcontext():
            started = time.perf_counter()
            # the stream's own session: the shuffle's partitions are the cells' tasks by
            # construction, nothing adaptive execution would change, and it would split
            # the batch into two Spark jobs
            batch_df.sparkSession.conf.set("spark.sql.adaptive.enabled", "false")
            rows, after = step_batch(batch_df, batch_id, route, runner,
                                     states.recorded_before(batch_id), tasks, hosts,
                                     reread)
            collected = collect_outputs(rows)
            collected.seconds["collect"] = time.perf_counter() - started
            sinks.write(batch_id, collected)
            states.record(batch_id, after)
            states.drop_matches(batch_id)

    writer = (stream_df.writeStream.foreachBatch(write_batch)
              .option("checkpointLocation", str(checkpoint)))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_seconds:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()


def encoder_of(sink: Any) -> Callable[[pa.Table], bytes] | None:
    """The match sink's encoder where it has one (:meth:`~graphcep.io.sinks.JsonlSink.encoder`:
    the cells then write its bytes); None: the cells write Arrow and the sink formats it."""
    encoder = getattr(sink, "encoder", None)
    return encoder() if encoder is not None else None


def cell_tasks(spark: Any, shares: CellPlan) -> int:
    """The tasks that step a micro-batch's cells: one per cell, at most one per core of
    the master."""
    return max(1, min(shares.cells, spark.sparkContext.defaultParallelism))


def several_slots(spark: Any) -> bool:
    """Whether an executor runs several tasks at once: then Spark hands a cell's task
    whichever of its idle Python workers comes first, and the cells' engines live in
    cell hosts (:mod:`~graphcep.runtime.streaming.cell_hosts`). With one slot the worker
    that stepped a cell steps it next, and the way through a host costs more than it
    saves (one cell on ``local[1]``: 27,000 edges/s against 31,500 without)."""
    cores = spark.conf.get("spark.executor.cores", None)
    if cores:
        return int(cores) > 1
    return spark.sparkContext.defaultParallelism > 1  # local[N]: N slots in one executor


def refuse_state_store(checkpoint: str | Path, states: StateFiles) -> None:
    """Refuse a checkpoint whose cells kept their states in Spark's state store (an
    earlier graphcep's executor mode): those states cannot be read into the files the
    cells now keep, and starting over beside them would match the stream twice."""
    if (Path(checkpoint) / "state").is_dir() and not states.recorded():
        raise QueryError(f"checkpoint {checkpoint} holds executor cells whose states are in "
                         "Spark's state store, as an earlier graphcep kept them: start from a "
                         "new --checkpoint")


def last_committed(checkpoint: str | Path) -> int:
    """The id of the last micro-batch Spark committed under ``checkpoint`` (-1: none)."""
    commits = Path(checkpoint) / "commits"
    done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() \
        else []
    return max(done, default=-1)


def flush_cells(spark: Any, job: SubgraphJob, *, cells: int, checkpoint: str | Path,
                sink: Any, on_batch: Callable[[int, CellsOutput], None] | None = None,
                states: StateFiles | None = None) -> int:
    """End of input (module docstring): the cells' buffered edges released and matched,
    the matches written as part ``b + 1`` of ``sink`` after the last committed batch
    ``b``; returns that batch id. Nothing is committed. ``states``: as the stream kept
    them (:func:`start_cells_stream`)."""
    states = states if states is not None else StateFiles(Path(checkpoint) / "cells")
    refuse_state_store(checkpoint, states)
    shares = cell_grid(job, cells)
    batch_id = last_committed(checkpoint) + 1
    stored = states.recorded_before(batch_id)
    if not stored:  # no micro-batch ever finished: no state to flush
        output = CellsOutput([], empty_edges(), READ_REJECT_SCHEMA.empty_table(), [])
        CellSinks(sink, on_batch=on_batch).write(batch_id, output)
        return batch_id

    def flush_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for cell, blob in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                                  strict=True):
                step = flush_cell(job, shares, int(cell), states.read(blob), states,
                                  states.matches_out(int(cell), batch_id))
                yield from _output_table(step).to_batches()

    rows = spark.createDataFrame(sorted(stored.items()), "cell long, blob binary")
    output = collect_outputs(rows.mapInArrow(flush_partition, OUTPUT_DDL).toArrow())
    CellSinks(sink, on_batch=on_batch).write(batch_id, output)
    states.drop_matches(batch_id)
    return batch_id
