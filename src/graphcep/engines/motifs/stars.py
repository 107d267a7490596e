"""Three-node star δ-temporal motifs: one pass over each centre's events (numba).

Paranjape et al.'s fast star counter. At each centre ``c`` the events are sorted (the
tie rule of :mod:`~graphcep.engines.motifs.order`); each event ``j`` in turn is the
last, the first or the middle event of a triple whose other two events share one
neighbour of ``c``:

* ``pre``: pairs on one neighbour within ``[t_j - δ, t_j]`` before ``j``;
* ``pos``: pairs on one neighbour within ``[t_j, t_j + δ]`` after ``j``;
* ``mid``: pairs ``(a, b)`` on one neighbour around ``j``, ``a`` before and ``b`` after,
  ``t_b - t_a <= δ``.

Triples all on ``j``'s own neighbour are two-node motifs, not stars: each role's sums
hold them too, and the counter takes them out afterwards, counting each neighbour's
events (in the centre's order) with the two-node counter of
:mod:`~graphcep.engines.motifs.pairs` -- what SNAP does by subtracting each centre's
two-node counts. Directions are relative to the centre: 0 = ``c -> x``, 1 = ``x -> c``.
Each δ keeps its own windows; they advance together in one pass over the events.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphcep.engines.motifs.pairs import pair_group, pair_scratch


@nb.njit(cache=True, nogil=True)
def local_ids(off, other, n):
    """Each event's neighbour as a dense index among its centre's neighbours, and the
    largest neighbour count."""
    stamp = np.full(n, -1, dtype=np.int64)
    slot = np.empty(n, dtype=np.int64)
    nbr = np.empty(other.shape[0], dtype=np.int64)
    width = 0
    for c in range(off.shape[0] - 1):
        count = 0
        for j in range(off[c], off[c + 1]):
            x = other[j]
            if stamp[x] != c:
                stamp[x] = c
                slot[x] = count
                count += 1
            nbr[j] = slot[x]
        width = max(width, count)
    return nbr, width


@nb.njit(cache=True, nogil=True, inline="always")
def _push(nodes, pair_sum, d, x, o):
    for i in range(2):
        pair_sum[d, i, o] += nodes[x, d, i]
    nodes[x, d, o] += 1


@nb.njit(cache=True, nogil=True, inline="always")
def _pop(nodes, pair_sum, d, x, o):
    nodes[x, d, o] -= 1
    for i in range(2):
        pair_sum[d, o, i] -= nodes[x, d, i]


@nb.njit(cache=True, nogil=True)
def _centre(t, nbr, out, begin, end, deltas, st, apart, counts):
    """Add one centre's star counts ``counts[d, role, i, j, k]`` (role 0 pre, 1 pos, 2 mid),
    with the triples on one neighbour when not ``apart``."""
    pre_nodes, pos_nodes, sums, start, stop = st[:5]
    nd = deltas.shape[0]
    start[:] = begin
    stop[:] = begin
    for j in range(begin, end):
        tj = t[j]
        x = nbr[j]
        o = out[j]
        for d in range(nd):
            s = start[d]
            low = tj - deltas[d]
            while t[s] < low:  # stops at j at the latest
                _pop(pre_nodes, sums[0], d, nbr[s], out[s])
                s += 1
            start[d] = s
            e = stop[d]
            high = tj + deltas[d]
            while e < end and t[e] <= high:
                _push(pos_nodes, sums[1], d, nbr[e], out[e])
                e += 1
            stop[d] = e
            _pop(pos_nodes, sums[1], d, x, o)
            for i in range(2):
                sums[2, d, i, o] -= pre_nodes[x, d, i]
            for a in range(2):
                for b in range(2):
                    counts[d, 0, a, b, o] += sums[0, d, a, b]
                    counts[d, 1, o, a, b] += sums[1, d, a, b]
                    counts[d, 2, a, o, b] += sums[2, d, a, b]
            for i in range(2):
                sums[2, d, o, i] += pos_nodes[x, d, i]
            _push(pre_nodes, sums[0], d, x, o)
    for j in range(begin, end):  # clear what this centre touched
        pre_nodes[nbr[j]] = 0
        pos_nodes[nbr[j]] = 0
    sums[:] = 0
    if apart:
        _same_neighbour(t, nbr, out, begin, end, deltas, st[5:], counts)


@nb.njit(cache=True, nogil=True)
def _same_neighbour(t, nbr, out, begin, end, deltas, st, counts):
    """Take out of every role the triples all on one neighbour (two-node motifs), counted
    per neighbour over its events in the centre's order."""
    at, run_t, run_out, scratch, triples = st
    width = 0
    for j in range(begin, end):
        width = max(width, nbr[j] + 1)
    at[:width + 1] = 0
    for j in range(begin, end):
        at[nbr[j] + 1] += 1
    for x in range(width):
        at[x + 1] += at[x]
    for j in range(begin, end):  # stable: each neighbour's events keep their order
        k = at[nbr[j]]
        at[nbr[j]] += 1
        run_t[k], run_out[k] = t[j], out[j]
    triples[:] = 0
    first = 0
    for x in range(width):  # at[x] is now where neighbour x's events end
        if at[x] - first >= 3:
            pair_group(run_t, run_out, first, at[x], deltas, scratch, triples)
        first = at[x]
    for role in range(3):
        counts[:, role] -= triples


@nb.njit(cache=True, nogil=True)
def count_stars(t, nbr, out, off, width, deltas, per_centre):
    """Star counts of every centre.

    Parameters
    ----------
    t, nbr, out, off, width
        The centre groups (:class:`~graphcep.engines.motifs.order.Stars`).
    deltas
        int64 windows, in the unit of ``t``.
    per_centre
        Output ``(vertices, len(deltas), 3, 2, 2, 2)`` int64, or an empty array to sum
        all centres into the result only.

    Returns
    -------
    numpy.ndarray
        ``(len(deltas), 3, 2, 2, 2)`` int64: role (pre, pos, mid), then the three
        directions relative to the centre, summed over centres.
    """
    return star_sweeps(t, nbr, out, off, width, deltas, per_centre, True)


@nb.njit(cache=True, nogil=True)
def star_sweeps(t, nbr, out, off, width, deltas, per_centre, apart):
    """:func:`count_stars`; unless ``apart``, every role keeps the triples on one
    neighbour (for the caller to take out, counted per pair)."""
    nd = deltas.shape[0]
    w = max(width, 1)
    size = 1
    for c in range(off.shape[0] - 1):
        size = max(size, off[c + 1] - off[c])
    st = (np.zeros((w, nd, 2), dtype=np.int64), np.zeros((w, nd, 2), dtype=np.int64),
          np.zeros((3, nd, 2, 2), dtype=np.int64), np.zeros(nd, dtype=np.int64),
          np.zeros(nd, dtype=np.int64), np.zeros(w + 1, dtype=np.int64),
          np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64), pair_scratch(nd),
          np.zeros((nd, 2, 2, 2), dtype=np.int64))
    total = np.zeros((nd, 3, 2, 2, 2), dtype=np.int64)
    group = np.zeros((nd, 3, 2, 2, 2), dtype=np.int64)
    keep = per_centre.shape[0] > 0
    for c in range(off.shape[0] - 1):
        if off[c + 1] - off[c] < 3:
            continue
        group[:] = 0
        _centre(t, nbr, out, off[c], off[c + 1], deltas, st, apart, group)
        total += group
        if keep:
            per_centre[c] = group
    return total


__all__ = ["count_stars", "local_ids", "star_sweeps"]
