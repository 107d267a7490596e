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
    Pairs,
    counting_sort,
    paired_stars,
    pairs,
    sort_ties,
)
from graphcep.engines.motifs.pairs import count_pairs
from graphcep.engines.motifs.stars import star_sweeps
from graphcep.engines.motifs.triangles import (
    count_triangles,
    directed_lists,
    higher_neighbours,
    list_triangles,
)

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
    centred = paired_stars(stream, grouped)
    per_centre = np.zeros((n, nd, 3, 2, 2, 2), np.int64) if local else _EMPTY[:, :, None, 0]
    star_total = star_sweeps(centred.t, centred.nbr, centred.out, centred.off, centred.width,
                             deltas, per_centre, False)
    star_total -= _one_neighbour(grouped, deltas, pair_total, per_pair, per_centre)[:, None]
    per_vertex = np.zeros((n, nd, 2, 2, 2), np.int64) if local else _EMPTY[:, 0]
    tri_total = count_triangle_groups(triangle_groups(stream, grouped, local), grouped, deltas,
                                      per_vertex)
    tables = matrices(pair_total, star_total, tri_total)
    if not local:
        return StreamCounts(tables, None)
    pair_local = np.zeros((n, nd, 2, 2, 2), np.int64)
    np.add.at(pair_local, grouped.lo, per_pair)
    np.add.at(pair_local, grouped.hi, per_pair[:, :, ::-1, ::-1, ::-1])
    return StreamCounts(tables, raphtory_local(per_centre, pair_local, per_vertex))


def _one_neighbour(grouped: Pairs, deltas: np.ndarray, pair_total: np.ndarray,
                   per_pair: np.ndarray, per_centre: np.ndarray) -> np.ndarray:
    """The triples on one neighbour that the star sweeps keep: per centre, the two-node
    counts of each of its pairs, letters relative to the centre and ties in the centre's
    order (its own event first) -- at ``lo`` those of the pair counter, at ``hi`` counted
    again. Returns their total; takes them out of ``per_centre`` when it has rows."""
    letters = 1 - grouped.rev
    sort_ties(grouped.t, letters, grouped.off)
    per_hi = np.zeros_like(per_pair)
    hi_total = count_pairs(grouped.t, letters, grouped.off, deltas, per_hi)
    if len(per_centre):
        same = np.zeros(per_centre.shape[:2] + (2, 2, 2), np.int64)
        np.add.at(same, grouped.lo, per_pair)
        np.add.at(same, grouped.hi, per_hi)
        per_centre -= same[:, :, None]
    return pair_total + hi_total


@dataclass(frozen=True)
class TriangleGroups:
    """The triangle counter's input: group g is the pair ``pair[g]`` with its triangles'
    other pairs ``sides[off[g]:off[g + 1]]`` (with ``a``, with ``b``) and third vertices;
    ``fwd``/``bwd``/``d_off``/``d_rank``/``times``: each pair's directed event lists."""

    off: np.ndarray
    pair: np.ndarray
    sides: np.ndarray
    thirds: np.ndarray
    fwd: np.ndarray
    bwd: np.ndarray
    d_off: np.ndarray
    d_rank: np.ndarray
    times: np.ndarray


def triangle_groups(stream: MotifStream, grouped: Pairs, local: bool = False) -> TriangleGroups:
    """List the static triangles, give each to one edge, group them by edge (one group
    per triangle when ``local``: its counts then go to its three vertices)."""
    lo, hi = grouped.lo, grouped.hi
    d_off, d_rank = directed_lists(grouped.off, grouped.rev, grouped.rank, grouped.directed)
    pair = np.arange(len(lo))
    fwd = np.where(grouped.directed[:, 0] > 0, 2 * pair, -1)
    bwd = np.where(grouped.directed[:, 1] > 0, 2 * pair + 1, -1)
    degree = np.bincount(np.concatenate([lo, hi]), minlength=stream.n) + stream.self_loop
    rank = np.empty(stream.n, dtype=np.int64)
    rank[np.lexsort((np.arange(stream.n), degree))] = np.arange(stream.n)
    found = list_triangles(*higher_neighbours(lo, hi, grouped.directed, rank), grouped.events, lo)
    if local:
        g_pair, g_off = found[:, 0], np.arange(len(found) + 1)
    else:
        by_edge = np.empty(len(found), dtype=np.int64)
        edge_off = counting_sort(found[:, 0], len(lo), by_edge)
        found = found[by_edge]
        g_pair = np.flatnonzero(np.diff(edge_off))
        g_off = np.append(edge_off[g_pair], len(found)).astype(np.int64)
    side_a = found[:, 1]
    thirds = np.where(lo[side_a] == lo[found[:, 0]], hi[side_a], lo[side_a])
    return TriangleGroups(g_off, g_pair, np.ascontiguousarray(found[:, 1:]), thirds, fwd, bwd,
                          d_off, d_rank, grouped.times)


def count_triangle_groups(groups: TriangleGroups, grouped: Pairs, deltas: np.ndarray,
                          per_vertex: np.ndarray) -> np.ndarray:
    """The triangle counter's ``(deltas, 2, 2, 2)`` totals (SNAP's triad table)."""
    return count_triangles(groups.off, groups.pair, groups.sides, groups.thirds, grouped.lo,
                           grouped.hi, groups.fwd, groups.bwd, groups.d_off, groups.d_rank,
                           groups.times, grouped.t, grouped.off, deltas, per_vertex)


__all__ = ["StreamCounts", "TriangleGroups", "count_stream", "count_triangle_groups",
           "triangle_groups"]
