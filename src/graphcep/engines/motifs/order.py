"""The event stream as the motif counters read it: dense vertex ids, groups, the tie rule.

SNAP's ``temporalmotifs`` (Paranjape, Benson, Leskovec, WSDM 2017) counts every 3-event
subsequence of a group of events sorted by time. This module builds those groups from
one time order of the events by counting sorts (numba), each group sorted by time and,
on equal times, by the rule below, for the counters
(:mod:`~graphcep.engines.motifs.pairs`, :mod:`~graphcep.engines.motifs.stars`,
:mod:`~graphcep.engines.motifs.triangles`).

Vertex order
    Vertex names are ranked numerically when all are integers (SNAP's node ids) and by
    text otherwise; every tie rule below compares vertices by that rank.

Tie rule (events with equal times)
    * a *pair* ``{a, b}`` (two-node motifs): ``a -> b`` before ``b -> a`` where ``a`` is
      the lower vertex (or the only source when the pair has one direction);
    * a *star* centre ``c``: by neighbour -- first the neighbours ``c`` sends to (by
      rank), then those that only send to ``c`` -- and for one neighbour ``x``,
      ``c -> x`` before ``x -> c``;
    * a *triangle* counted on its edge ``{a, b}`` (``a`` the lower vertex) with third
      vertex ``w``: ``a -> b``, ``b -> a``, ``w -> a``, ``w -> b``, ``a -> w``,
      ``b -> w``. Which edge of a triangle counts it is SNAP's: the one with the most
      events; on equal counts, the first of ``uv``, ``uw``, ``vw`` where ``u`` is the
      vertex of least degree (then rank; degree counts distinct neighbours, a self-loop
      making a vertex its own neighbour) and ``v`` precedes ``w`` in ``u``'s neighbour
      order (the star order above).

    This is the order in which SNAP gathers each group's events. SNAP then sorts them
    on time alone (its ``TKeyDat`` pairs compare keys only) with ``TVec::Sort``: an
    insertion sort, which keeps that order, for groups of up to 20 events, and beyond
    that a quicksort with random pivots, which does not (its degree order likewise).
    So on inputs where equal times do not meet in a group of more than 20 events,
    SNAP's tables and these are identical; elsewhere SNAP's split of tied instances
    between cells changes from run to run (and a star cell can come out negative, as
    it subtracts two-node counts sorted another way), while every group total -- the
    two-node, star and triangle sums -- is the same as here.

Self-loops are dropped from every count (they only add to a vertex's degree, as in SNAP).
Equal events (same time, same endpoints) are separate events: each takes part in its own
subsequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.motifs.stars import local_ids
from graphcep.engines.subgraph.kernel import counting_sort


@dataclass(frozen=True)
class MotifStream:
    """The stream in dense ids, self-loops removed.

    Attributes
    ----------
    names : list[str]
        Vertex names, index = vertex id = rank in the vertex order.
    t, src, dst : numpy.ndarray
        int64 times and endpoints of the events that are not self-loops, in input order.
    self_loop : numpy.ndarray
        bool per vertex: the vertex has a self-loop (one more neighbour for the degree).
    """

    names: list[str]
    t: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    self_loop: np.ndarray

    @property
    def n(self) -> int:
        """Number of vertices."""
        return len(self.names)


def vertex_order(names: pa.Array) -> pa.Array:
    """Distinct names in the vertex order: numeric when all are integers, else by text."""
    return pc.take(names, _order_indices(names))


def _order_indices(names: pa.Array) -> pa.Array:
    """Indices that sort distinct ``names`` into the vertex order."""
    if len(names) == 0:
        return pa.array([], pa.uint64())
    try:
        values = pc.cast(names, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pc.sort_indices(names)
    return pc.sort_indices(pa.table({"v": values, "s": names}),
                           sort_keys=[("v", "ascending"), ("s", "ascending")])


def motif_stream(t: np.ndarray, src: pa.Array, dst: pa.Array) -> MotifStream:
    """Dense ids in the vertex order; self-loops marked on their vertex and removed."""
    src = pa.chunked_array([src]).combine_chunks() if not isinstance(src, pa.Array) else src
    dst = pa.chunked_array([dst]).combine_chunks() if not isinstance(dst, pa.Array) else dst
    encoded = pc.dictionary_encode(pa.concat_arrays([src.cast(pa.string()),
                                                     dst.cast(pa.string())]))
    order = _order_indices(encoded.dictionary)
    names = pc.take(encoded.dictionary, order)
    position = np.empty(len(names), dtype=np.int64)
    position[order.to_numpy()] = np.arange(len(names))
    ids = position[encoded.indices.to_numpy()]
    s, d = ids[:len(src)], ids[len(src):]
    loops = s == d
    self_loop = np.zeros(len(names), dtype=bool)
    self_loop[s[loops]] = True
    keep = ~loops
    return MotifStream(names.to_pylist(), np.asarray(t, dtype=np.int64)[keep], s[keep], d[keep],
                       self_loop)


def offsets(keys: np.ndarray, nkeys: int) -> np.ndarray:
    """CSR offsets of sorted group keys: group k is ``[off[k], off[k + 1])``."""
    off = np.zeros(nkeys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=nkeys), out=off[1:])
    return off


def time_order(stream: MotifStream) -> np.ndarray:
    """The events' indices sorted by time (stable)."""
    return np.argsort(stream.t, kind="stable")


@dataclass(frozen=True)
class Pairs:
    """Events grouped by unordered pair ``lo < hi``, each group in pair order.

    ``t``/``rev`` are the sorted events (``rev`` 0: ``lo -> hi``, 1: ``hi -> lo``),
    ``rank`` their times' ranks among the distinct ``times``, ``off`` the group offsets,
    ``lo``/``hi`` the pair's vertices (pairs sorted by them), ``pair`` each input event's
    pair id, ``events`` the number of events per pair and ``directed`` per direction
    (``(pairs, 2)``, ``rev`` 0 then 1).
    """

    t: np.ndarray
    rev: np.ndarray
    off: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    pair: np.ndarray
    events: np.ndarray
    rank: np.ndarray
    times: np.ndarray
    directed: np.ndarray


def pairs(stream: MotifStream) -> Pairs:
    """Group the events by unordered pair; ties: ``lo -> hi`` first."""
    pair, lo, hi, off, t, rev, rank, times, directed = _pair_layout(
        time_order(stream), stream.t, stream.src, stream.dst, stream.n)
    return Pairs(t, rev, off, lo, hi, pair, np.diff(off), rank, times, directed)


@nb.njit(cache=True, nogil=True)
def _pair_layout(by_time, t, src, dst, n):
    """Pair ids in ``(lo, hi)`` order, and the events grouped by pair in ``(t, rev)``
    order, with their time ranks."""
    m = t.shape[0]
    rank, times = _time_ranks(by_time, t)
    pair, p_lo, p_hi = _pair_ids(np.minimum(src, dst), np.maximum(src, dst), n)
    npairs = p_lo.shape[0]
    off = np.zeros(npairs + 1, dtype=np.int64)
    directed = np.zeros((npairs, 2), dtype=np.int64)
    for e in range(m):
        off[pair[e] + 1] += 1
        directed[pair[e], 1 if src[e] > dst[e] else 0] += 1
    for p in range(npairs):
        off[p + 1] += off[p]
    fill = off[:-1].copy()
    g_t = np.empty(m, dtype=np.int64)
    g_rev = np.empty(m, dtype=np.int64)
    g_rank = np.empty(m, dtype=np.int64)
    for i in range(m):  # in time order: each pair's events come sorted by time
        e = by_time[i]
        j = fill[pair[e]]
        fill[pair[e]] += 1
        g_t[j], g_rev[j], g_rank[j] = t[e], 1 if src[e] > dst[e] else 0, rank[e]
    sort_ties(g_t, g_rev, off)
    return pair, p_lo, p_hi, off, g_t, g_rev, g_rank, times, directed


@nb.njit(cache=True, nogil=True)
def _time_ranks(by_time, t):
    """Each event's rank among the distinct times, and those times sorted."""
    rank = np.empty(t.shape[0], dtype=np.int64)
    times = np.empty(t.shape[0], dtype=np.int64)
    distinct = 0
    for i in range(t.shape[0]):
        e = by_time[i]
        if i == 0 or t[e] != times[distinct - 1]:
            times[distinct] = t[e]
            distinct += 1
        rank[e] = distinct - 1
    return rank, times[:distinct]


@nb.njit(cache=True, nogil=True)
def _pair_ids(lo, hi, n):
    """Each event's pair id, pairs numbered in ``(lo, hi)`` order; the pairs' vertices."""
    m = lo.shape[0]
    by_lo = np.empty(m, dtype=np.int64)
    lo_off = counting_sort(lo, n, by_lo)
    pair = np.empty(m, dtype=np.int64)
    p_lo = np.empty(m, dtype=np.int64)
    p_hi = np.empty(m, dtype=np.int64)
    stamp = np.full(n, -1, dtype=np.int64)
    slot = np.empty(n, dtype=np.int64)
    seen = np.empty(n, dtype=np.int64)
    npairs = 0
    for u in range(n):
        k = 0
        for i in range(lo_off[u], lo_off[u + 1]):
            h = hi[by_lo[i]]
            if stamp[h] != u:
                stamp[h] = u
                seen[k] = h
                k += 1
        seen[:k].sort()
        for j in range(k):
            slot[seen[j]] = npairs + j
            p_lo[npairs + j] = u
            p_hi[npairs + j] = seen[j]
        npairs += k
        for i in range(lo_off[u], lo_off[u + 1]):
            pair[by_lo[i]] = slot[hi[by_lo[i]]]
    return pair, p_lo[:npairs], p_hi[:npairs]


@nb.njit(cache=True, nogil=True)
def sort_ties(t, minor, off):
    """Sort each group's runs of equal ``t`` (groups ``off``, sorted by time) by ``minor``."""
    for g in range(off.shape[0] - 1):
        i = off[g]
        while i < off[g + 1]:
            j = i + 1
            while j < off[g + 1] and t[j] == t[i]:
                j += 1
            if j - i > 1:
                minor[i:j].sort()
            i = j


def directed_keys(stream: MotifStream) -> np.ndarray:
    """Sorted distinct ``src * n + dst`` of the (non-loop) static directed edges."""
    return np.unique(stream.src * stream.n + stream.dst)


def has_key(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Membership of ``keys`` in ``sorted_keys`` (binary search)."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


@dataclass(frozen=True)
class Stars:
    """Each event twice, once at each endpoint as centre, grouped by centre.

    ``t`` time, ``nbr`` the neighbour's index among the centre's neighbours (dense,
    from 0), ``out`` 0 when the centre is the source (SNAP's direction 0) and 1 when it
    is the destination; ``off`` the centre offsets; ``width`` the largest neighbour count.
    """

    t: np.ndarray
    nbr: np.ndarray
    out: np.ndarray
    off: np.ndarray
    width: int


def stars(stream: MotifStream, dkeys: np.ndarray) -> Stars:
    """Events at each centre in SNAP's star order (see the module docstring); ``dkeys``:
    the static directed edges (:func:`directed_keys`)."""
    return centre_groups(stream, has_key(dkeys, stream.dst * stream.n + stream.src))


def paired_stars(stream: MotifStream, grouped: Pairs) -> Stars:
    """:func:`stars`, the static directed edges read off the pair groups."""
    back = 1 - (stream.src > stream.dst)  # the direction dst -> src, as ``rev``
    return centre_groups(stream, grouped.directed[grouped.pair, back] > 0)


def centre_groups(stream: MotifStream, sends_back: np.ndarray) -> Stars:
    """:func:`stars` from ``sends_back``: per event, whether its ``dst`` sends to its ``src``."""
    t, nbr, out, off, width = _star_layout(time_order(stream), stream.t, stream.src,
                                           stream.dst, sends_back, stream.n)
    return Stars(t, nbr, out, off, width)


@nb.njit(cache=True, nogil=True)
def _star_layout(by_time, t, src, dst, sends_back, n):
    """Both ends of each event grouped by centre, sorted by time, then on equal times by
    the neighbour order (neighbours the centre sends to first, by rank) and direction."""
    m = t.shape[0]
    off = np.zeros(n + 1, dtype=np.int64)
    for e in range(m):
        off[src[e] + 1] += 1
        off[dst[e] + 1] += 1
    for c in range(n):
        off[c + 1] += off[c]
    fill = off[:-1].copy()
    c_t = np.empty(2 * m, dtype=np.int64)
    minor = np.empty(2 * m, dtype=np.int64)  # (only receives from it * n + other) * 2 + in
    for i in range(m):
        e = by_time[i]
        j = fill[src[e]]
        fill[src[e]] += 1
        c_t[j], minor[j] = t[e], 2 * dst[e]
        j = fill[dst[e]]
        fill[dst[e]] += 1
        c_t[j], minor[j] = t[e], 2 * ((0 if sends_back[e] else n) + src[e]) + 1
    sort_ties(c_t, minor, off)
    other = (minor >> 1) % n
    nbr, width = local_ids(off, other, n)
    return c_t, nbr, minor & 1, off, width


__all__ = ["MotifStream", "Pairs", "Stars", "centre_groups", "directed_keys",
           "has_key", "motif_stream", "offsets", "paired_stars", "pairs", "sort_ties", "stars",
           "time_order", "vertex_order"]
