"""δ-temporal motif counts on Spark: the counters' groups spread over tasks.

Every instance belongs to exactly one group of one counter -- a two-node instance to its
vertex pair, a star to its centre vertex, a triangle to the one static edge SNAP's rule
gives it (:mod:`graphcep.engines.motifs.triangles`) -- and each group is counted whole by
one task, so every instance is counted once and the sum of the tasks' counts is the
in-process count, tie rule included. The driver builds the groups (sorting the stream
once, listing the static triangles) and broadcasts them; Spark spreads the group ids over
``partitions`` tasks (``mapInArrow``), each runs the compiled counters on its groups, and
the driver adds up their ``(deltas, ...)`` partial counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.engines.motifs.count import (
    TriangleGroups,
    count_triangle_groups,
    triangle_groups,
)
from graphcep.engines.motifs.layout import matrices
from graphcep.engines.motifs.order import MotifStream, directed_keys, pairs, stars
from graphcep.engines.motifs.pairs import count_pairs
from graphcep.engines.motifs.stars import count_stars

PAIR, STAR, TRIANGLE = 0, 1, 2
_OUT = "pairs array<bigint>, stars array<bigint>, triangles array<bigint>"


def subset(off: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The groups ``ids`` of a CSR layout: their new offsets and the rows to take."""
    lengths = off[ids + 1] - off[ids]
    new_off = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_off[1:])
    rows = np.repeat(off[ids] - new_off[:-1], lengths) + np.arange(new_off[-1])
    return new_off, rows


def count_groups(state: dict[str, Any], kind: np.ndarray, ids: np.ndarray) -> dict[str, list]:
    """One task: the partial counts of the groups ``ids`` (of counter ``kind``)."""
    deltas = state["deltas"]
    grouped, centred, tri = state["pairs"], state["stars"], state["triangles"]
    empty = np.zeros((0, 1, 1, 1, 1), dtype=np.int64)
    off, rows = subset(grouped.off, ids[kind == PAIR])
    pair_total = count_pairs(grouped.t[rows], grouped.rev[rows], off, deltas, empty[:, 0])
    off, rows = subset(centred.off, ids[kind == STAR])
    star_total = count_stars(centred.t[rows], centred.nbr[rows], centred.out[rows], off,
                             centred.width, deltas, empty[:, :, None, 0])
    mine = ids[kind == TRIANGLE]
    off, rows = subset(tri.off, mine)
    part = TriangleGroups(off, tri.pair[mine], tri.sides[rows], tri.thirds[rows], tri.fwd,
                          tri.bwd, tri.d_off, tri.d_rank, tri.times)
    tri_total = count_triangle_groups(part, grouped, deltas, empty[:, 0])
    return {"pairs": pair_total.ravel().tolist(), "stars": star_total.ravel().tolist(),
            "triangles": tri_total.ravel().tolist()}


def count_motifs_spark(spark: Any, stream: MotifStream, deltas: np.ndarray,
                       partitions: int | None = None) -> np.ndarray:
    """The ``(deltas, 6, 6)`` tables of ``stream``, the groups counted by Spark tasks."""
    deltas = np.asarray(deltas, dtype=np.int64)
    grouped = pairs(stream)
    state = {"deltas": deltas, "pairs": grouped, "stars": stars(stream, directed_keys(stream)),
             "triangles": triangle_groups(stream, grouped)}
    shared = spark.sparkContext.broadcast(state)
    units = _units(state)
    partitions = partitions or spark.sparkContext.defaultParallelism
    frame = spark.createDataFrame(units).repartition(max(1, partitions), "id")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches), schema=units.schema)
        counts = count_groups(shared.value, table.column("kind").to_numpy(),
                              table.column("id").to_numpy())
        yield pa.RecordBatch.from_pylist([counts])

    parts = frame.mapInArrow(run, _OUT).toArrow()
    shared.unpersist()
    nd = len(deltas)
    cells = {"pairs": nd * 8, "stars": nd * 24, "triangles": nd * 8}
    # a stream with no group that can hold an instance gives no task, and zero counts
    total = {k: np.array(parts.column(k).to_pylist(), dtype=np.int64).reshape(-1, n)
             .sum(axis=0) for k, n in cells.items()}
    return matrices(total["pairs"].reshape(nd, 2, 2, 2), total["stars"].reshape(nd, 3, 2, 2, 2),
                    total["triangles"].reshape(nd, 2, 2, 2))


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


__all__ = ["count_groups", "count_motifs_spark", "subset"]
