"""HyperCube cells as Spark keys: each cell's engine state in Spark's state store.

The driver's streaming operator (:mod:`graphcep.runtime.streaming`) reorders, matches and
checkpoints in the driver. Here the matching runs in Spark's executors instead: every
micro-batch's edges are routed to the cells of
:func:`~graphcep.runtime.hypercube.choose_shares`'s grid as Spark rows keyed by cell
(``mapInArrow``), and ``applyInPandasWithState`` hands each cell its rows together with
its state -- one compact blob: the engine's :meth:`snapshot`, the cell's reorder buffer,
the newest time and the frontier. Spark checkpoints and recovers that state with the
micro-batch, so a re-run batch starts from the state of the batch before it, and adding
executors adds cells that match at once.

Event time as the driver's operator keeps it
---------------------------------------------
Besides its edges, every partition of a micro-batch sends each cell one *heartbeat* row
holding the partition's newest time. So every cell sees the newest time of the whole
stream, and its frontier ``F = max_t - lateness`` is the driver operator's, batch by
batch: an edge with ``t < F`` (the frontier before its batch) is late, the buffered edges
with ``t < F`` (after it) are released in stream order ``(t, seq)``. A late edge is
reported once, by the first cell it is routed to; an edge that can play no query edge goes
to cell 0 only to be checked for lateness. A cell reports only the matches whose home it
is (:func:`~graphcep.runtime.hypercube.home_filter`), so each match is reported once.

Each cell yields at most one row per micro-batch and kind (``match`` or ``late``), its
tables as Arrow IPC bytes; :func:`start_cells_stream` writes them as part ``b`` of the sinks in
``foreachBatch``, overwriting on a re-run: exactly once, as Spark re-runs a batch from the
state before it on the same input.

Scope: SAL queries on the core edge columns (``t``, ``src``, ``dst``, ``dur``, ``seq``)
without vertex features; the buffer is released as later edges move the frontier (there
is no end-of-input flush).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import MATCH_SCHEMA, empty_edges, normalize_edges, sort_stream
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.runtime.cell_engines import _ipc
from graphcep.runtime.hypercube import Shares, choose_shares, home_filter, route

#: the edge columns a cell carries
EDGE_COLUMNS = ("t", "src", "dst", "dur", "seq")
#: ``_kind`` of a routed row: a copy of an edge; the copy that also reports it if late; a
#: heartbeat (``t``: the newest time of its partition); an edge only checked for lateness
COPY, FIRST_COPY, HEARTBEAT, CHECK_ONLY = 0, 1, 2, 3
ROUTED_DDL = "_cell long, _kind int, t long, src string, dst string, dur long, seq long"
OUTPUT_DDL = "kind string, rows binary"
STATE_DDL = "blob binary"
_NEVER = np.iinfo(np.int64).min


def cell_grid(job: SubgraphJob, cells: int) -> Shares:
    """The grid of at most ``cells`` cells the job's query is partitioned over."""
    return choose_shares(job.cell_query(), cells)


def routed_rows(edges: pa.Table, job: SubgraphJob, shares: Shares) -> pa.Table:
    """One partition's edges as rows keyed by cell (:data:`ROUTED_DDL`), heartbeats
    included (module docstring)."""
    edges = normalize_edges(edges).select(list(EDGE_COLUMNS))
    if edges.num_rows == 0:
        return pa.Table.from_pylist([], schema=_routed_schema())
    cells, rows = route(edges, job, shares)
    kind = np.full(len(rows), COPY, dtype=np.int32)
    first = np.unique(rows, return_index=True)[1]  # rows come sorted by cell: the least
    kind[first] = FIRST_COPY
    unrouted = np.setdiff1d(np.arange(edges.num_rows), rows)
    count = shares.cells
    newest = pc.max(edges.column("t")).as_py()
    heartbeat = pa.table({"t": np.full(count, newest, np.int64), "src": [""] * count,
                          "dst": [""] * count, "dur": np.zeros(count, np.int64),
                          "seq": np.zeros(count, np.int64)})
    parts = [(edges.take(rows), cells, kind),
             (edges.take(unrouted), np.zeros(len(unrouted), np.int64),
              np.full(len(unrouted), CHECK_ONLY, np.int32)),
             (heartbeat.cast(edges.schema), np.arange(count, dtype=np.int64),
              np.full(count, HEARTBEAT, np.int32))]
    return pa.concat_tables([_keyed(table, c, k) for table, c, k in parts])


def _routed_schema() -> pa.Schema:
    return pa.schema([("_cell", pa.int64()), ("_kind", pa.int32()), ("t", pa.int64()),
                      ("src", pa.string()), ("dst", pa.string()), ("dur", pa.int64()),
                      ("seq", pa.int64())])


def _keyed(edges: pa.Table, cells: np.ndarray, kinds: np.ndarray) -> pa.Table:
    table = pa.Table.from_arrays([pa.array(cells, pa.int64()), pa.array(kinds, pa.int32()),
                                  *edges.columns], names=["_cell", "_kind", *EDGE_COLUMNS])
    return table.cast(_routed_schema())


@dataclass
class CellState:
    """One cell's state between micro-batches (pickled into Spark's state store)."""

    engine: bytes | None = None
    buffer: pa.Table | None = None
    max_t: int = _NEVER
    frontier: int = _NEVER

    def blob(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass
class CellStep:
    """What one cell did with one micro-batch."""

    state: CellState
    matches: pa.Table
    late: pa.Table


def step_cell(job: SubgraphJob, shares: Shares, lateness_us: int, cell: int,
              state: CellState | None, rows: pa.Table) -> CellStep:
    """Cell ``cell`` takes its rows of one micro-batch (:func:`routed_rows`, any order):
    late edges out, the rest buffered, what the frontier passed released to its engine."""
    state = state or CellState()
    engine = job.new_engine(threads=1)
    if state.engine is not None:
        engine = type(engine).restore(state.engine)
    kind = rows.column("_kind")
    edges = job.orient(rows.filter(pc.not_equal(kind, HEARTBEAT)))
    late_mask = pc.less(edges.column("t"), state.frontier)
    late = edges.filter(pc.and_(late_mask, pc.is_in(edges.column("_kind"),
                                                    pa.array([FIRST_COPY, CHECK_ONLY],
                                                             pa.int32()))))
    on_time = edges.filter(pc.and_(pc.invert(late_mask),
                                   pc.is_in(edges.column("_kind"),
                                            pa.array([COPY, FIRST_COPY], pa.int32()))))
    newest = pc.max(rows.column("t")).as_py()
    if newest is not None:
        state.max_t = max(state.max_t, int(newest))
        state.frontier = max(state.frontier, state.max_t - lateness_us)
    on_time = on_time.select(list(EDGE_COLUMNS))
    buffer = on_time if state.buffer is None else pa.concat_tables([state.buffer, on_time])
    due = pc.less(buffer.column("t"), state.frontier)
    ready = sort_stream(buffer.filter(due))
    state.buffer = buffer.filter(pc.invert(due))
    found = [engine.push(ready)] if ready.num_rows else []
    if state.frontier != _NEVER:
        found.append(engine.advance(state.frontier))
    found = [m for m in found if m.num_rows]
    matches = pa.concat_tables(found) if found else MATCH_SCHEMA.empty_table()
    state.engine = engine.snapshot()
    late = job.orient(late.select(list(EDGE_COLUMNS))) if late.num_rows else empty_edges()
    return CellStep(state, home_filter(matches, shares, cell), late)


def cell_matches(edges_df: Any, job: SubgraphJob, shares: Shares, lateness_us: int) -> Any:
    """The streaming DataFrame of the cells' output (:data:`OUTPUT_DDL`) for a streaming
    DataFrame of edges (the columns of :data:`EDGE_COLUMNS`)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    def route_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from routed_rows(pa.Table.from_batches([batch]), job, shares).to_batches()

    def run_cell(key: tuple, frames: Iterator[Any], group: Any) -> Iterator[Any]:
        import pandas as pd

        state = pickle.loads(group.get[0]) if group.exists else None
        rows = pa.concat_tables([pa.Table.from_pandas(f, schema=_routed_schema(),
                                                      preserve_index=False) for f in frames])
        step = step_cell(job, shares, lateness_us, int(key[0]), state, rows)
        group.update((step.state.blob(),))
        out = [(kind, _ipc(table)) for kind, table in (("match", step.matches),
                                                       ("late", step.late)) if table.num_rows]
        yield pd.DataFrame({"kind": [k for k, _ in out], "rows": [r for _, r in out]},
                           columns=["kind", "rows"])

    routed = edges_df.select(*EDGE_COLUMNS).mapInArrow(route_partition, ROUTED_DDL)
    return routed.groupBy("_cell").applyInPandasWithState(
        run_cell, OUTPUT_DDL, STATE_DDL, "append", GroupStateTimeout.NoTimeout)


def collect_outputs(batch_df: Any) -> tuple[pa.Table, pa.Table]:
    """A micro-batch of :func:`cell_matches`' output as (matches, late edges)."""
    rows = batch_df.toArrow()
    tables: dict[str, list[pa.Table]] = {"match": [], "late": []}
    for kind, payload in zip(rows.column("kind").to_pylist(), rows.column("rows").to_pylist(),
                             strict=True):
        tables[kind].append(pa.ipc.open_stream(payload).read_all())
    matches = (pa.concat_tables(tables["match"]) if tables["match"]
               else MATCH_SCHEMA.empty_table())
    late = pa.concat_tables(tables["late"]) if tables["late"] else empty_edges()
    return sort_matches(matches), late


def sort_matches(matches: pa.Table) -> pa.Table:
    """Matches in a fixed order (by last time, then id): a re-run writes the same part."""
    if matches.num_rows == 0:
        return matches
    return matches.sort_by([("last_t", "ascending"), ("match_id", "ascending")])



def start_cells_stream(spark: Any, edges_df: Any, job: SubgraphJob, *, cells: int,
                       lateness_us: int, checkpoint: str, sink: Any, late_sink: Any = None,
                       available_now: bool = False) -> Any:
    """Start the query: ``edges_df`` (a streaming DataFrame of edges) -> cells -> part
    ``b`` of ``sink`` (matches) and ``late_sink`` (late edges) per micro-batch ``b``.

    Spark keeps its offsets and the cells' state under ``checkpoint``; a restart from it
    re-runs the unfinished micro-batch from the state before it and overwrites its parts.
    """
    shares = cell_grid(job, cells)

    def write_outputs(batch_df: Any, batch_id: int) -> None:
        matches, late = collect_outputs(batch_df)
        sink.write(matches, batch_id)
        if late_sink is not None and late.num_rows:
            late_sink.write(late, batch_id)

    writer = (cell_matches(edges_df, job, shares, lateness_us).writeStream
              .foreachBatch(write_outputs).option("checkpointLocation", str(checkpoint)))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()
