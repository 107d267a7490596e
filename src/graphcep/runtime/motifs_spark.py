"""δ-temporal motif counts on Spark: the counters' groups spread over tasks.

Every instance belongs to exactly one group of one counter -- a two-node instance to its
vertex pair, a star to its centre vertex, a triangle to the one static edge SNAP's rule
gives it (:mod:`graphcep.engines.motifs.triangles`) -- and each group is counted whole by
one task, so every instance is counted once and the sum of the tasks' counts is the
in-process count, tie rule included. The driver builds the groups (sorting the stream
once, listing the static triangles) and broadcasts them; Spark spreads the group ids over
``partitions`` tasks (``mapInArrow``), each runs the compiled counters on its groups, and
the driver adds up their partial counts.

Per-vertex (local) counts take the same route, with one group per triangle (as
in-process, so that a group's counts go to its three vertices): each task also returns
the 40 counts per δ of the vertices its groups touch, as Arrow rows ``(vertex, counts)``
-- the vertex's dense id, its non-zero counts only -- and the driver adds them up per
vertex (a vertex's pairs, star and triangles may be counted by different tasks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from graphcep.engines.motifs.count import (
    StreamCounts,
    TriangleGroups,
    count_triangle_groups,
    local_counts,
    triangle_groups,
)
from graphcep.engines.motifs.layout import matrices
from graphcep.engines.motifs.order import MotifStream, Pairs, directed_keys, pairs, stars
from graphcep.engines.motifs.pairs import count_pairs
from graphcep.engines.motifs.stars import count_stars

PAIR, STAR, TRIANGLE = 0, 1, 2
#: The vertex of a task's row of partial totals (pairs, stars, triangles; 40 per δ).
TOTALS = -1
_OUT = "vertex bigint, counts array<bigint>"
_CELLS = 40  # per δ: 8 pair + 24 star + 8 triangle totals; Raphtory's 40 local counts


class Partial(NamedTuple):
    """One task's counts: ``totals`` ``(deltas * 40,)`` (pairs, stars, triangles);
    ``vertices`` (dense ids) and their ``local`` ``(vertices, deltas * 40)`` counts,
    non-zero rows only (none unless counting per vertex)."""

    totals: np.ndarray
    vertices: np.ndarray
    local: np.ndarray


def subset(off: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The groups ``ids`` of a CSR layout: their new offsets and the rows to take."""
    lengths = off[ids + 1] - off[ids]
    new_off = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_off[1:])
    rows = np.repeat(off[ids] - new_off[:-1], lengths) + np.arange(new_off[-1])
    return new_off, rows


def count_groups(state: dict[str, Any], kind: np.ndarray, ids: np.ndarray) -> Partial:
    """One task: the partial counts of the groups ``ids`` (of counter ``kind``)."""
    deltas, local = state["deltas"], state["local"]
    grouped, tri = state["pairs"], state["triangles"]
    nd = len(deltas)
    pair_ids, centres, mine = ids[kind == PAIR], ids[kind == STAR], ids[kind == TRIANGLE]
    tri_off, tri_rows = subset(tri.off, mine)
    vertices = _touched(grouped, tri, pair_ids, centres, mine, tri_rows) if local else None
    per_pair = np.zeros((len(pair_ids) if local else 0, nd, 2, 2, 2), dtype=np.int64)
    off, rows = subset(grouped.off, pair_ids)
    pair_total = count_pairs(grouped.t[rows], grouped.rev[rows], off, deltas, per_pair)
    per_centre = np.zeros((len(centres) if local else 0, nd, 3, 2, 2, 2), dtype=np.int64)
    centred = state["stars"]
    off, rows = subset(centred.off, centres)
    star_total = count_stars(centred.t[rows], centred.nbr[rows], centred.out[rows], off,
                             centred.width, deltas, per_centre)
    per_vertex, tri_total = _count_triangles(state, mine, tri_off, tri_rows, vertices)
    totals = np.concatenate([pair_total.reshape(nd, 8), star_total.reshape(nd, 24),
                             tri_total.reshape(nd, 8)], axis=1).ravel()
    if vertices is None:
        return Partial(totals, np.zeros(0, np.int64), np.zeros((0, nd * _CELLS), np.int64))
    centre_local = np.zeros((len(vertices), nd, 3, 2, 2, 2), dtype=np.int64)
    centre_local[np.searchsorted(vertices, centres)] = per_centre
    counts = local_counts(centre_local, np.searchsorted(vertices, grouped.lo[pair_ids]),
                          np.searchsorted(vertices, grouped.hi[pair_ids]), per_pair,
                          per_vertex).reshape(len(vertices), nd * _CELLS)
    keep = counts.any(axis=1)
    return Partial(totals, vertices[keep], counts[keep])


def _count_triangles(state: dict[str, Any], mine: np.ndarray, off: np.ndarray,
                     rows: np.ndarray, vertices: np.ndarray | None,
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The triangle groups ``mine``: their counts per vertex of ``vertices`` (the task's,
    sorted; ``None``: no per-vertex counts) and their totals."""
    grouped, tri, deltas = state["pairs"], state["triangles"], state["deltas"]
    thirds = tri.thirds[rows]
    if vertices is not None:
        # the counter adds a triangle's counts to rows lo, hi and third of per_vertex:
        # number the task's vertices densely (the pairs it reads are its triangles', both
        # ends among them; the ids of the pairs it never reads do not matter)
        grouped = dataclasses.replace(grouped, lo=np.searchsorted(vertices, grouped.lo),
                                      hi=np.searchsorted(vertices, grouped.hi))
        thirds = np.searchsorted(vertices, thirds)
    per_vertex = np.zeros((0 if vertices is None else len(vertices), len(deltas), 2, 2, 2),
                          dtype=np.int64)
    part = TriangleGroups(off, tri.pair[mine], tri.sides[rows], thirds, tri.fwd, tri.bwd,
                          tri.d_off, tri.d_rank, tri.times)
    return per_vertex, count_triangle_groups(part, grouped, deltas, per_vertex)


def _touched(grouped: Pairs, tri: TriangleGroups, pair_ids: np.ndarray, centres: np.ndarray,
             mine: np.ndarray, tri_rows: np.ndarray) -> np.ndarray:
    """The sorted vertices of a task's groups: pairs' ends, centres, triangles' vertices."""
    edges = np.concatenate([pair_ids, tri.pair[mine]])
    return np.unique(np.concatenate([grouped.lo[edges], grouped.hi[edges], centres,
                                     tri.thirds[tri_rows]]))


def plan(stream: MotifStream, deltas: np.ndarray, local: bool = False,
         ) -> tuple[dict[str, Any], pa.Table]:
    """What the tasks share (the groups of the three counters, ``deltas``, ``local``) and
    the units they split: one row ``(kind, id)`` per group that can hold an instance."""
    grouped = pairs(stream)
    state = {"deltas": np.asarray(deltas, dtype=np.int64), "local": local, "pairs": grouped,
             "stars": stars(stream, directed_keys(stream)),
             "triangles": triangle_groups(stream, grouped, local)}
    return state, _units(state)


def count_motifs_spark(spark: Any, stream: MotifStream, deltas: np.ndarray,
                       partitions: int | None = None, local: bool = False) -> StreamCounts:
    """The ``(deltas, 6, 6)`` tables of ``stream`` and, with ``local``, its
    ``(vertices, deltas, 40)`` per-vertex counts, the groups counted by Spark tasks."""
    state, units = plan(stream, deltas, local)
    shared = spark.sparkContext.broadcast(state)
    partitions = partitions or spark.sparkContext.defaultParallelism
    frame = spark.createDataFrame(units).repartition(max(1, partitions), "id")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches), schema=units.schema)
        yield from to_rows(count_groups(shared.value, table.column("kind").to_numpy(),
                                        table.column("id").to_numpy()))

    parts = frame.mapInArrow(run, _OUT).toArrow()
    shared.unpersist()
    return add_up(parts, len(state["deltas"]), stream.n if local else None)


def to_rows(partial: Partial, batch: int = 1 << 16) -> Iterator[pa.RecordBatch]:
    """A task's counts as Arrow rows of ``batch`` or fewer: its totals (vertex
    ``TOTALS``), then its vertices."""
    vertex = np.concatenate([[TOTALS], partial.vertices]).astype(np.int64)
    counts = np.concatenate([partial.totals[None], partial.local])
    width = counts.shape[1]
    for at in range(0, len(vertex), batch):
        values = counts[at:at + batch].ravel()
        offsets = np.arange(0, len(values) + 1, width, dtype=np.int32)
        yield pa.record_batch({
            "vertex": pa.array(vertex[at:at + batch]),
            "counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})


def add_up(parts: pa.Table, nd: int, vertices: int | None) -> StreamCounts:
    """The driver's sum of the tasks' rows (per vertex too when ``vertices`` is given)."""
    # a stream with no group that can hold an instance gives no task, and zero counts
    total = np.zeros(nd * _CELLS, dtype=np.int64)
    local = None if vertices is None else np.zeros((vertices, nd * _CELLS), dtype=np.int64)
    for part in parts.to_batches():
        vertex = part.column("vertex").to_numpy()
        counts = part.column("counts").flatten().to_numpy().reshape(len(vertex), nd * _CELLS)
        mine = vertex == TOTALS
        total += counts[mine].sum(axis=0)
        if local is not None:
            np.add.at(local, vertex[~mine], counts[~mine])
    total = total.reshape(nd, _CELLS)
    tables = matrices(total[:, :8].reshape(nd, 2, 2, 2), total[:, 8:32].reshape(nd, 3, 2, 2, 2),
                      total[:, 32:].reshape(nd, 2, 2, 2))
    return StreamCounts(tables, None if local is None else local.reshape(vertices, nd, _CELLS))


def _units(state: dict[str, Any]) -> pa.Table:
    """One row per group that can hold an instance (3 events or more; every triangle
    group), tagged with its counter."""
    ids, kinds = [], []
    for kind, off in ((PAIR, state["pairs"].off), (STAR, state["stars"].off)):
        busy = np.flatnonzero(np.diff(off) >= 3)
        ids.append(busy)
        kinds.append(np.full(len(busy), kind))
    triangles = np.arange(len(state["triangles"].pair))
    ids.append(triangles)
    kinds.append(np.full(len(triangles), TRIANGLE))
    return pa.table({"kind": pa.array(np.concatenate(kinds), pa.int8()),
                     "id": pa.array(np.concatenate(ids), pa.int64())})


__all__ = ["TOTALS", "Partial", "add_up", "count_groups", "count_motifs_spark", "plan", "subset",
           "to_rows"]
