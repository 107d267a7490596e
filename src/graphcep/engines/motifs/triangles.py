"""Triangle δ-temporal motifs: static triangles, each counted on one edge (numba).

Paranjape et al.'s fast triangle counter, as SNAP runs it:

1. list the static triangles (vertices ranked by degree, then id; each triangle found
   once from its lowest vertex ``u``, its other two ``v``, ``w`` in ``u``'s neighbour
   order);
2. give each triangle to one of its edges: the one with the most events (ties: ``uv``,
   then ``uw``, then ``vw``), so that the busiest edge's events are scanned once for all
   the triangles it carries;
3. per edge ``{a, b}``, sort its events with those of its triangles' other edges
   (tie rule in :mod:`~graphcep.engines.motifs.order`) and slide over them once: the
   events off the edge build, per third vertex, pairs (one event at ``a``, one at ``b``)
   before, after and around each event on the edge, which closes them into triangles.

Third-vertex events carry ``dir`` (0: from the third vertex, 1: into it) and ``side``
(0: the edge's ``a``, 1: its ``b``); counts are SNAP's ``(2, 2, 2)`` triad table.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def list_triangles(up_off, up, up_pair, counts_of, lo):
    """Static triangles, each given to one edge: ``(edge, a-side pair, b-side pair)``.

    ``up_off``/``up``: each vertex's neighbours of higher degree rank, in its neighbour
    order; ``up_pair`` the undirected pair id of each entry; ``counts_of``: events per
    pair; ``lo``: each pair's lower vertex (the edge's ``a``). Each triangle is found
    once, from its lowest-ranked vertex. The third vertex's pairs with ``a`` and with
    ``b`` come in that order.
    """
    nv = up_off.shape[0] - 1
    mark = np.zeros(nv, dtype=np.int64)
    size = 1024
    out = np.empty((size, 3), dtype=np.int64)
    found = 0
    for u in range(nv):
        for p in range(up_off[u], up_off[u + 1]):
            mark[up[p]] = p + 1
        for p in range(up_off[u], up_off[u + 1]):
            v = up[p]
            for q in range(up_off[v], up_off[v + 1]):
                x = up[q]
                if mark[x] == 0:
                    continue
                if found == size:
                    size *= 2
                    grown = np.empty((size, 3), dtype=np.int64)
                    grown[:found] = out[:found]
                    out = grown
                # v and x in u's neighbour order; the pairs uv, uw, vw of SNAP's names
                if mark[v] < mark[x]:
                    uv, uw, vw = up_pair[p], up_pair[mark[x] - 1], up_pair[q]
                    names = (u, v, x)
                else:
                    uv, uw, vw = up_pair[mark[x] - 1], up_pair[p], up_pair[q]
                    names = (u, x, v)
                out[found] = _assign(uv, uw, vw, names, counts_of, lo)
                found += 1
        for p in range(up_off[u], up_off[u + 1]):
            mark[up[p]] = 0
    return out[:found]


@nb.njit(cache=True, nogil=True)
def _assign(uv, uw, vw, names, counts_of, lo):
    """SNAP's choice: the edge with the most events (ties: uv, uw, vw)."""
    u, v, w = names
    c_uv, c_uw, c_vw = counts_of[uv], counts_of[uw], counts_of[vw]
    if c_uv >= max(c_uw, c_vw):
        return (uv, uw, vw) if lo[uv] == u else (uv, vw, uw)
    if c_uw >= max(c_uv, c_vw):
        return (uw, uv, vw) if lo[uw] == u else (uw, vw, uv)
    return (vw, uv, uw) if lo[vw] == v else (vw, uw, uv)


@nb.njit(cache=True, nogil=True)
def _runs(q, from_x, fwd, bwd, lo, x):
    """Directed list of pair ``q`` leaving ``x`` (``from_x``) or entering it, or -1."""
    return fwd[q] if (lo[q] == x) == from_x else bwd[q]


@nb.njit(cache=True, nogil=True)
def _gather(p, sides, fwd, bwd, lo, hi, d_off, d_rank, wbits, buf):
    """The group's events into ``buf`` as sort keys: time rank, class, third + 1."""
    m = 0
    for c in range(2):  # a -> b, b -> a
        k = fwd[p] if c == 0 else bwd[p]
        if k >= 0:
            for i in range(d_off[k], d_off[k + 1]):
                buf[m] = ((d_rank[i] << 3) | c) << wbits
                m += 1
    for wi in range(sides.shape[0]):
        for c in range(4):  # w -> a, w -> b, a -> w, b -> w
            q = sides[wi, c % 2]
            x = lo[p] if c % 2 == 0 else hi[p]
            k = _runs(q, c >= 2, fwd, bwd, lo, x)
            if k >= 0:
                for i in range(d_off[k], d_off[k + 1]):
                    buf[m] = (((d_rank[i] << 3) | (2 + c)) << wbits) | (wi + 1)
                    m += 1
    return m


@nb.njit(cache=True, nogil=True, inline="always")
def _push(nodes, sums, d, w, o, side):
    for i in range(2):
        sums[d, 1 - side, i, o] += nodes[d, i, 1 - side, w]
    nodes[d, o, side, w] += 1


@nb.njit(cache=True, nogil=True, inline="always")
def _pop(nodes, sums, d, w, o, side):
    nodes[d, o, side, w] -= 1
    for i in range(2):
        sums[d, side, o, i] -= nodes[d, i, 1 - side, w]


@nb.njit(cache=True, nogil=True, inline="always")
def _close(counts, pre, pos, mid, d, uv):
    """An edge event (``uv`` 1: ``a -> b``) closes the pairs around it (SNAP's table)."""
    vu = 1 - uv
    counts[d, 0, 0, 0] += mid[d, uv, 0, 0] + pos[d, uv, 0, 1] + pre[d, vu, 1, 1]
    counts[d, 1, 0, 0] += mid[d, uv, 1, 0] + pos[d, vu, 0, 1] + pre[d, vu, 0, 1]
    counts[d, 0, 1, 0] += mid[d, vu, 0, 0] + pos[d, uv, 1, 1] + pre[d, vu, 1, 0]
    counts[d, 1, 1, 0] += mid[d, vu, 1, 0] + pos[d, vu, 1, 1] + pre[d, vu, 0, 0]
    counts[d, 0, 0, 1] += mid[d, uv, 0, 1] + pos[d, uv, 0, 0] + pre[d, uv, 1, 1]
    counts[d, 1, 0, 1] += mid[d, uv, 1, 1] + pos[d, vu, 0, 0] + pre[d, uv, 0, 1]
    counts[d, 0, 1, 1] += mid[d, vu, 0, 1] + pos[d, uv, 1, 0] + pre[d, uv, 1, 0]
    counts[d, 1, 1, 1] += mid[d, vu, 1, 1] + pos[d, vu, 1, 0] + pre[d, uv, 0, 0]


@nb.njit(cache=True, nogil=True)
def _group(t, cls, wloc, m, nthirds, deltas, st, counts):
    """Slide over one sorted group for every δ, adding to ``counts[d, i, j, k]``."""
    pre_nodes, pos_nodes, pre, pos, mid = st
    for d in range(deltas.shape[0]):
        s = 0
        e = 0
        for j in range(m):
            tj = t[j]
            while s < m and t[s] < tj - deltas[d]:
                c = cls[s]
                if c >= 2:
                    _pop(pre_nodes, pre, d, wloc[s], (c - 2) // 2, c % 2)
                s += 1
            while e < m and t[e] <= tj + deltas[d]:
                c = cls[e]
                if c >= 2:
                    _push(pos_nodes, pos, d, wloc[e], (c - 2) // 2, c % 2)
                e += 1
            c = cls[j]
            if c < 2:
                _close(counts, pre, pos, mid, d, 1 - c)
                continue
            w, o, side = wloc[j], (c - 2) // 2, c % 2
            _pop(pos_nodes, pos, d, w, o, side)
            for i in range(2):
                mid[d, 1 - side, i, o] -= pre_nodes[d, i, 1 - side, w]
                mid[d, side, o, i] += pos_nodes[d, i, 1 - side, w]
            _push(pre_nodes, pre, d, w, o, side)
    pre_nodes[:, :, :, :nthirds] = 0  # only what this group touched
    pos_nodes[:, :, :, :nthirds] = 0
    pre[:] = 0
    pos[:] = 0
    mid[:] = 0


@nb.njit(cache=True, nogil=True)
def count_triangles(g_off, g_pair, g_sides, thirds, lo, hi, fwd, bwd, d_off, d_rank, times,
                    deltas, per_vertex):
    """Triangle counts of every group (an edge and the triangles it carries).

    Parameters
    ----------
    g_off, g_pair, g_sides
        Groups: group g is the pair ``g_pair[g]`` (ids into ``lo``/``hi``, ``a``/``b``)
        with its triangles' other pairs ``g_sides[g_off[g]:g_off[g + 1]]`` (column 0 the
        pair with ``a``, column 1 with ``b``); ``thirds`` their third vertices.
    fwd, bwd, d_off, d_rank
        Each pair's directed event lists (``lo -> hi``, ``hi -> lo``; -1 for none) and
        their times as ranks among the distinct times, sorted.
    times
        The distinct times, sorted (``times[rank]``).
    deltas
        int64 windows, in the unit of the times.
    per_vertex
        Output ``(vertices, len(deltas), 2, 2, 2)``: each group's counts added to its
        edge's two vertices and its third vertices (meant for groups of one triangle
        each), or an empty array.

    Returns
    -------
    numpy.ndarray
        ``(len(deltas), 2, 2, 2)`` int64: SNAP's triad table summed over groups.
    """
    nd = deltas.shape[0]
    size = 1
    width = 1
    for g in range(g_off.shape[0] - 1):
        total = _events(g_pair[g], fwd, bwd, d_off)
        for i in range(g_off[g], g_off[g + 1]):
            total += _events(g_sides[i, 0], fwd, bwd, d_off)
            total += _events(g_sides[i, 1], fwd, bwd, d_off)
        size = max(size, total)
        width = max(width, g_off[g + 1] - g_off[g])
    wbits = 1
    while (1 << wbits) <= width:
        wbits += 1
    mask = (1 << wbits) - 1
    buf = np.empty(size, dtype=np.int64)
    t = np.empty(size, dtype=np.int64)
    cls = np.empty(size, dtype=np.int64)
    wloc = np.empty(size, dtype=np.int64)
    st = (np.zeros((nd, 2, 2, width), dtype=np.int64), np.zeros((nd, 2, 2, width), dtype=np.int64),
          np.zeros((nd, 2, 2, 2), dtype=np.int64), np.zeros((nd, 2, 2, 2), dtype=np.int64),
          np.zeros((nd, 2, 2, 2), dtype=np.int64))
    result = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    group = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    keep = per_vertex.shape[0] > 0
    for g in range(g_off.shape[0] - 1):
        p = g_pair[g]
        m = _gather(p, g_sides[g_off[g]:g_off[g + 1]], fwd, bwd, lo, hi, d_off, d_rank, wbits,
                    buf)
        buf[:m].sort()
        for i in range(m):
            key = buf[i]
            t[i] = times[key >> (wbits + 3)]
            cls[i] = (key >> wbits) & 7
            wloc[i] = (key & mask) - 1
        group[:] = 0
        _group(t, cls, wloc, m, g_off[g + 1] - g_off[g], deltas, st, group)
        result += group
        if keep:
            per_vertex[lo[p]] += group
            per_vertex[hi[p]] += group
            for i in range(g_off[g], g_off[g + 1]):
                per_vertex[thirds[i]] += group
    return result


@nb.njit(cache=True, nogil=True)
def _events(q, fwd, bwd, d_off):
    total = 0
    for k in (fwd[q], bwd[q]):
        if k >= 0:
            total += d_off[k + 1] - d_off[k]
    return total


__all__ = ["count_triangles", "list_triangles"]
