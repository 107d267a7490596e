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


@nb.njit(cache=True, nogil=True, inline="always")
def _searchsorted_key(keys, key):
    """Index of ``key`` in the sorted ``keys``, or -1."""
    at = np.searchsorted(keys, key)
    if at < keys.shape[0] and keys[at] == key:
        return at
    return -1


@nb.njit(cache=True, nogil=True)
def list_triangles(adj_off, adj, rank, counts_of, ukeys, n):
    """Static triangles ``(edge pair id, third vertex)``, each given to one edge.

    ``adj_off``/``adj``: each vertex's neighbours in its neighbour order; ``rank``: the
    degree order; ``counts_of``: events per undirected pair (ids from ``ukeys``).
    """
    nv = adj_off.shape[0] - 1
    mark = np.zeros(nv, dtype=np.int64)
    found = 0
    for phase in range(2):
        if phase == 1:
            pair_of = np.empty(found, dtype=np.int64)
            third = np.empty(found, dtype=np.int64)
            found = 0
        for u in range(nv):
            for p in range(adj_off[u], adj_off[u + 1]):
                if rank[adj[p]] > rank[u]:
                    mark[adj[p]] = p - adj_off[u] + 1
            for p in range(adj_off[u], adj_off[u + 1]):
                v = adj[p]
                if rank[v] <= rank[u]:
                    continue
                for q in range(adj_off[v], adj_off[v + 1]):
                    x = adj[q]
                    if rank[x] <= rank[v] or mark[x] == 0:
                        continue
                    if phase == 1:
                        first, second = (v, x) if mark[v] < mark[x] else (x, v)
                        pair_of[found], third[found] = _assign(u, first, second, counts_of,
                                                               ukeys, n)
                    found += 1
            for p in range(adj_off[u], adj_off[u + 1]):
                mark[adj[p]] = 0
    return pair_of, third


@nb.njit(cache=True, nogil=True)
def _assign(u, v, w, counts_of, ukeys, n):
    uv = _searchsorted_key(ukeys, min(u, v) * n + max(u, v))
    uw = _searchsorted_key(ukeys, min(u, w) * n + max(u, w))
    vw = _searchsorted_key(ukeys, min(v, w) * n + max(v, w))
    c_uv, c_uw, c_vw = counts_of[uv], counts_of[uw], counts_of[vw]
    if c_uv >= max(c_uw, c_vw):
        return uv, w
    if c_uw >= max(c_uv, c_vw):
        return uw, v
    return vw, u


@nb.njit(cache=True, nogil=True)
def _gather(a, b, thirds, dkeys, d_off, d_t, n, tmin, buf_key, buf_w):
    """The group's events into the buffers: sort key ``(t - tmin) * 8 + class``."""
    m = 0
    ends = (a, b)
    for c in range(2):
        k = _searchsorted_key(dkeys, ends[c] * n + ends[1 - c])
        if k >= 0:
            for i in range(d_off[k], d_off[k + 1]):
                buf_key[m] = (d_t[i] - tmin) * 8 + c
                buf_w[m] = -1
                m += 1
    for wi in range(thirds.shape[0]):
        w = thirds[wi]
        for c in range(4):  # w -> a, w -> b, a -> w, b -> w
            x = ends[c % 2]
            k = _searchsorted_key(dkeys, (w * n + x) if c < 2 else (x * n + w))
            if k >= 0:
                for i in range(d_off[k], d_off[k + 1]):
                    buf_key[m] = (d_t[i] - tmin) * 8 + 2 + c
                    buf_w[m] = wi
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
def _group(key, wloc, m, deltas, st, counts):
    """Slide over one sorted group for every δ, adding to ``counts[d, i, j, k]``."""
    pre_nodes, pos_nodes, pre, pos, mid = st
    for d in range(deltas.shape[0]):
        s = 0
        e = 0
        for j in range(m):
            tj = key[j] >> 3
            while s < m and (key[s] >> 3) < tj - deltas[d]:
                c = key[s] & 7
                if c >= 2:
                    _pop(pre_nodes, pre, d, wloc[s], (c - 2) // 2, c % 2)
                s += 1
            while e < m and (key[e] >> 3) <= tj + deltas[d]:
                c = key[e] & 7
                if c >= 2:
                    _push(pos_nodes, pos, d, wloc[e], (c - 2) // 2, c % 2)
                e += 1
            c = key[j] & 7
            if c < 2:
                _close(counts, pre, pos, mid, d, 1 - c)
                continue
            w, o, side = wloc[j], (c - 2) // 2, c % 2
            _pop(pos_nodes, pos, d, w, o, side)
            for i in range(2):
                mid[d, 1 - side, i, o] -= pre_nodes[d, i, 1 - side, w]
                mid[d, side, o, i] += pos_nodes[d, i, 1 - side, w]
            _push(pre_nodes, pre, d, w, o, side)
    for x in st:
        x[:] = 0


@nb.njit(cache=True, nogil=True)
def count_triangles(g_off, g_pair, g_third, lo, hi, dkeys, d_off, d_t, n, tmin, deltas,
                    per_vertex):
    """Triangle counts of every group (an edge and the thirds of its triangles).

    Parameters
    ----------
    g_off, g_pair, g_third
        Groups: group g is the edge ``g_pair[g]`` (pair id into ``lo``/``hi``) with the
        third vertices ``g_third[g_off[g]:g_off[g + 1]]``.
    dkeys, d_off, d_t
        Directed static edges (sorted keys ``src * n + dst``) and their event times.
    tmin
        The least time (sort keys are offsets from it).
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
        p = g_pair[g]
        edge = 0
        for c in range(2):
            k = _searchsorted_key(dkeys, (lo[p] * n + hi[p]) if c == 0 else (hi[p] * n + lo[p]))
            if k >= 0:
                edge += d_off[k + 1] - d_off[k]
        rest = 0
        for i in range(g_off[g], g_off[g + 1]):
            rest += _pair_events(lo[p], g_third[i], dkeys, d_off, n)
            rest += _pair_events(hi[p], g_third[i], dkeys, d_off, n)
        size = max(size, edge + rest)
        width = max(width, g_off[g + 1] - g_off[g])
    buf_key = np.empty(size, dtype=np.int64)
    buf_w = np.empty(size, dtype=np.int64)
    st = (np.zeros((nd, 2, 2, width), dtype=np.int64), np.zeros((nd, 2, 2, width), dtype=np.int64),
          np.zeros((nd, 2, 2, 2), dtype=np.int64), np.zeros((nd, 2, 2, 2), dtype=np.int64),
          np.zeros((nd, 2, 2, 2), dtype=np.int64))
    total = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    group = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    keep = per_vertex.shape[0] > 0
    for g in range(g_off.shape[0] - 1):
        p = g_pair[g]
        m = _gather(lo[p], hi[p], g_third[g_off[g]:g_off[g + 1]], dkeys, d_off, d_t, n, tmin,
                    buf_key, buf_w)
        order = np.argsort(buf_key[:m])
        key = buf_key[:m][order]
        wloc = buf_w[:m][order]
        group[:] = 0
        _group(key, wloc, m, deltas, st, group)
        total += group
        if keep:
            per_vertex[lo[p]] += group
            per_vertex[hi[p]] += group
            for i in range(g_off[g], g_off[g + 1]):
                per_vertex[g_third[i]] += group
    return total


@nb.njit(cache=True, nogil=True)
def _pair_events(x, y, dkeys, d_off, n):
    total = 0
    for key in (x * n + y, y * n + x):
        k = _searchsorted_key(dkeys, key)
        if k >= 0:
            total += d_off[k + 1] - d_off[k]
    return total


__all__ = ["count_triangles", "list_triangles"]
