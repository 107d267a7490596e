"""The event stream as the motif counters read it: dense vertex ids, groups, the tie rule.

SNAP's ``temporalmotifs`` (Paranjape, Benson, Leskovec, WSDM 2017) counts every 3-event
subsequence of a group of events sorted by time. This module builds those groups with
NumPy, sorted by time and, on equal times, by the rule below, for the counters
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.motifs.stars import local_ids
from graphcep.engines.subgraph.kernel import group_by


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
    if len(names) == 0:
        return names
    try:
        values = pc.cast(names, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pc.take(names, pc.sort_indices(names))
    order = pa.table({"v": values, "s": names}).sort_by([("v", "ascending"), ("s", "ascending")])
    return order.column("s").combine_chunks()


def motif_stream(t: np.ndarray, src: pa.Array, dst: pa.Array) -> MotifStream:
    """Dense ids in the vertex order; self-loops marked on their vertex and removed."""
    src = pa.chunked_array([src]).combine_chunks() if not isinstance(src, pa.Array) else src
    dst = pa.chunked_array([dst]).combine_chunks() if not isinstance(dst, pa.Array) else dst
    names = vertex_order(pc.unique(pa.concat_arrays([src.cast(pa.string()),
                                                     dst.cast(pa.string())])))
    s = pc.index_in(src.cast(pa.string()), value_set=names).to_numpy().astype(np.int64)
    d = pc.index_in(dst.cast(pa.string()), value_set=names).to_numpy().astype(np.int64)
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


@dataclass(frozen=True)
class Pairs:
    """Events grouped by unordered pair ``lo < hi``, each group in pair order.

    ``t``/``rev`` are the sorted events (``rev`` 0: ``lo -> hi``, 1: ``hi -> lo``),
    ``off`` the group offsets, ``lo``/``hi`` the pair's vertices, ``pair`` each input
    event's pair id, ``events`` the number of events per pair.
    """

    t: np.ndarray
    rev: np.ndarray
    off: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    pair: np.ndarray
    events: np.ndarray


def pairs(stream: MotifStream) -> Pairs:
    """Group the events by unordered pair; ties: ``lo -> hi`` first."""
    lo = np.minimum(stream.src, stream.dst)
    hi = np.maximum(stream.src, stream.dst)
    keys, pair = np.unique(lo * stream.n + hi, return_inverse=True)
    rev = (stream.src != lo).astype(np.int64)
    order = np.lexsort((rev, stream.t, pair))
    events = np.bincount(pair, minlength=len(keys))
    return Pairs(stream.t[order], rev[order], offsets(pair[order], len(keys)),
                 keys // max(stream.n, 1), keys % max(stream.n, 1), pair, events)


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
    """Events at each centre in SNAP's star order (see the module docstring)."""
    n, m = stream.n, len(stream.t)
    centre = np.concatenate([stream.src, stream.dst])
    other = np.concatenate([stream.dst, stream.src])
    # a neighbour the centre sends to (static edge centre -> other) sorts first; at the
    # source of an event that is always so
    only_in = np.zeros(2 * m, dtype=np.int64)
    only_in[m:] = ~has_key(dkeys, stream.dst * n + stream.src)
    direction = np.repeat(np.array([0, 1], dtype=np.int64), m)
    minor = (only_in * n + other) * 2 + direction
    by_time = np.lexsort((minor, np.concatenate([stream.t, stream.t])))
    off, within = group_by(centre[by_time], n)  # stable: time order kept per centre
    order = by_time[within]
    other = other[order]
    nbr, width = local_ids(off, other, n)
    return Stars(np.concatenate([stream.t, stream.t])[order], nbr, direction[order], off, width)


__all__ = ["MotifStream", "Pairs", "Stars", "directed_keys", "has_key", "motif_stream",
           "offsets", "pairs", "stars", "vertex_order"]
