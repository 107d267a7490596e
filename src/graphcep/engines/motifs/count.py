"""All 36 three-event δ-temporal motifs of a stream: the three counters and the 6x6 tables.

Semantics are SNAP's ``temporalmotifs``: an instance is any 3 events, in the group's
order (:mod:`~graphcep.engines.motifs.order`), on at most 3 vertices and connected, with
``t3 - t1 <= δ`` (inclusive); self-loops are dropped; equal events are distinct events.
All δ are counted in one call over one grouping of the events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphcep.engines.motifs.layout import matrices, raphtory_local
from graphcep.engines.motifs.order import (
    MotifStream,
    directed_keys,
    has_key,
    offsets,
    pairs,
    stars,
)
from graphcep.engines.motifs.pairs import count_pairs
from graphcep.engines.motifs.stars import count_stars
from graphcep.engines.motifs.triangles import count_triangles, list_triangles

_EMPTY = np.zeros((0, 1, 1, 1, 1), dtype=np.int64)


@dataclass(frozen=True)
class StreamCounts:
    """Counts of one stream for several δ.

    ``tables``: ``(deltas, 6, 6)`` int64 in SNAP's layout
    (:mod:`graphcep.engines.motifs.layout`);
    ``local``: ``(vertices, deltas, 40)`` in Raphtory's local layout, or ``None``.
    """

    tables: np.ndarray
    local: np.ndarray | None


def count_stream(stream: MotifStream, deltas: np.ndarray, local: bool = False) -> StreamCounts:
    """Count every motif of ``stream`` for each δ (int64, in the unit of ``stream.t``)."""
    deltas = np.asarray(deltas, dtype=np.int64)
    n, nd = stream.n, len(deltas)
    grouped = pairs(stream)
    per_pair = np.zeros((len(grouped.lo), nd, 2, 2, 2), np.int64) if local else _EMPTY[:, 0]
    pair_total = count_pairs(grouped.t, grouped.rev, grouped.off, deltas, per_pair)
    centred = stars(stream, directed_keys(stream))
    per_centre = np.zeros((n, nd, 3, 2, 2, 2), np.int64) if local else _EMPTY[:, :, None, 0]
    star_total = count_stars(centred.t, centred.nbr, centred.out, centred.off, centred.width,
                             deltas, per_centre)
    per_vertex = np.zeros((n, nd, 2, 2, 2), np.int64) if local else _EMPTY[:, 0]
    tri_total = _triangles(stream, grouped.lo, grouped.hi, grouped.events, deltas, per_vertex,
                           local)
    tables = matrices(pair_total, star_total, tri_total)
    if not local:
        return StreamCounts(tables, None)
    pair_local = np.zeros((n, nd, 2, 2, 2), np.int64)
    np.add.at(pair_local, grouped.lo, per_pair)
    np.add.at(pair_local, grouped.hi, per_pair[:, :, ::-1, ::-1, ::-1])
    return StreamCounts(tables, raphtory_local(per_centre, pair_local, per_vertex))


def _triangles(stream: MotifStream, lo: np.ndarray, hi: np.ndarray, events: np.ndarray,
               deltas: np.ndarray, per_vertex: np.ndarray, local: bool) -> np.ndarray:
    """The triangle counter's ``(deltas, 2, 2, 2)`` totals (SNAP's triad table)."""
    n = max(stream.n, 1)
    dkeys, inverse = np.unique(stream.src * n + stream.dst, return_inverse=True)
    order = np.lexsort((stream.t, inverse))
    d_off, d_t = offsets(inverse[order], len(dkeys)), stream.t[order]
    u = np.concatenate([lo, hi])
    x = np.concatenate([hi, lo])
    by_nbr = np.lexsort((x, ~has_key(dkeys, u * n + x), u))
    adj_off, adj = offsets(u[by_nbr], stream.n), x[by_nbr]
    degree = np.bincount(u, minlength=stream.n) + stream.self_loop
    rank = np.empty(stream.n, dtype=np.int64)
    rank[np.lexsort((np.arange(stream.n), degree))] = np.arange(stream.n)
    ukeys = lo * n + hi
    pair_of, third = list_triangles(adj_off, adj, rank, events, ukeys, n)
    if local:  # one group per triangle: its counts go to its three vertices
        g_pair, g_off, g_third = pair_of, np.arange(len(pair_of) + 1), third
    else:
        by_pair = np.argsort(pair_of, kind="stable")
        g_pair, starts = np.unique(pair_of[by_pair], return_index=True)
        g_off = np.append(starts, len(pair_of)).astype(np.int64)
        g_third = third[by_pair]
    tmin = int(stream.t.min()) if len(stream.t) else 0
    span = int(stream.t.max()) - tmin if len(stream.t) else 0
    if span >= 1 << 59:
        raise ValueError("the stream spans too long a time to count triangles exactly")
    return count_triangles(g_off, g_pair, g_third, lo, hi, dkeys, d_off, d_t, n, tmin, deltas,
                           per_vertex)


__all__ = ["StreamCounts", "count_stream"]
