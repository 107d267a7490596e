"""Triangle δ-temporal motifs: static triangles, each counted on one edge (numba).

Paranjape et al.'s fast triangle counter, as SNAP runs it:

1. list the static triangles (vertices ranked by degree, then id; each triangle found
   once from its lowest vertex ``u``, its other two ``v``, ``w`` in ``u``'s neighbour
   order);
2. give each triangle to one of its edges: the one with the most events (ties: ``uv``,
   then ``uw``, then ``vw``), so that the busiest edge's events are scanned once for all
   the triangles it carries;
3. per edge ``{a, b}``, sort its events with those of its triangles' other edges
   (tie rule in :mod:`~graphcep.engines.motifs.order`) and slide over them once, the
   windows of every δ together: the events off the edge build, per third vertex, pairs
   (one event at ``a``, one at ``b``) before, after and around each event on the edge,
   which closes them into triangles.

Before sorting, a group drops the events that cannot be in any instance for the largest
δ: a third vertex whose three pairs' time spans lie too far apart, a third-vertex event
with no event of the edge near it (time buckets at least δ wide) or none of the third
vertex's other side within δ, an edge event with no kept third-vertex event within δ.
An instance's events are all within δ of each other, so none of its events is dropped,
and the kept events keep their order: the counts are those of the whole group.

Third-vertex events carry ``dir`` (0: from the third vertex, 1: into it) and ``side``
(0: the edge's ``a``, 1: its ``b``); counts are SNAP's ``(2, 2, 2)`` triad table.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def higher_neighbours(lo, hi, directed, rank):
    """Each vertex's neighbours of higher ``rank``, in its neighbour order (those it sends
    to, then the others; each by id), as CSR offsets, neighbours and pair ids; pairs
    ``(lo, hi)`` sorted, ``directed`` their events per direction."""
    npairs = lo.shape[0]
    off = np.zeros(rank.shape[0] + 1, dtype=np.int64)
    for p in range(npairs):
        off[(lo[p] if rank[hi[p]] > rank[lo[p]] else hi[p]) + 1] += 1
    for v in range(rank.shape[0]):
        off[v + 1] += off[v]
    fill = off[:-1].copy()
    nbr = np.empty(npairs, dtype=np.int64)
    ids = np.empty(npairs, dtype=np.int64)
    for sends in (True, False):
        for from_hi in (True, False):  # all lower neighbours of a vertex, then its higher ones
            for p in range(npairs):
                u, x = (hi[p], lo[p]) if from_hi else (lo[p], hi[p])
                if rank[x] > rank[u] and (directed[p, 1 if from_hi else 0] > 0) == sends:
                    nbr[fill[u]], ids[fill[u]] = x, p
                    fill[u] += 1
    return off, nbr, ids


@nb.njit(cache=True, nogil=True)
def list_triangles(up_off, up, up_pair, counts_of, lo, first, last):
    """Static triangles of the lowest vertices ``first <= u < last``, each given to one
    edge: ``(edge, a-side pair, b-side pair)``, in the order of ``u``.

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
    for u in range(first, last):
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
def directed_lists(off, rev, rank, directed):
    """Each pair's events split by direction: list ``2p`` (``lo -> hi``) and ``2p + 1``
    (``hi -> lo``) of pair ``p``, as offsets and time ranks, each list sorted by time."""
    npairs = off.shape[0] - 1
    d_off = np.empty(2 * npairs + 1, dtype=np.int64)
    d_rank = np.empty(rank.shape[0], dtype=np.int64)
    d_off[2 * npairs] = rank.shape[0]
    for p in range(npairs):
        ahead, back = off[p], off[p] + directed[p, 0]
        d_off[2 * p], d_off[2 * p + 1] = ahead, back
        for i in range(off[p], off[p + 1]):
            if rev[i] == 0:
                d_rank[ahead] = rank[i]
                ahead += 1
            else:
                d_rank[back] = rank[i]
                back += 1
    return d_off, d_rank


@nb.njit(cache=True, nogil=True)
def group_triangles(found, lo, hi, alone):
    """The listed triangles grouped by their edge, in listing order within a group (one
    group per triangle when ``alone``): offsets, edges, sides and third vertices."""
    count = found.shape[0]
    order = np.arange(count)
    if alone:
        off = np.arange(count + 1)
        edges = found[:, 0].copy()
    else:
        per_edge = np.zeros(lo.shape[0] + 1, dtype=np.int64)
        for i in range(count):
            per_edge[found[i, 0] + 1] += 1
        edges = np.flatnonzero(per_edge[1:])
        off = np.zeros(edges.shape[0] + 1, dtype=np.int64)
        for g in range(edges.shape[0]):
            off[g + 1] = off[g] + per_edge[edges[g] + 1]
        at = np.empty(lo.shape[0], dtype=np.int64)
        at[edges] = off[:-1]
        for i in range(count):
            order[at[found[i, 0]]] = i
            at[found[i, 0]] += 1
    sides = np.empty((count, 2), dtype=np.int64)
    thirds = np.empty(count, dtype=np.int64)
    for k in range(count):
        i = order[k]
        sides[k, 0], sides[k, 1] = found[i, 1], found[i, 2]
        q = found[i, 1]  # the third vertex's pair with the edge's lo
        thirds[k] = hi[q] if lo[q] == lo[found[i, 0]] else lo[q]
    return off, edges, sides, thirds


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


@nb.njit(cache=True, nogil=True, inline="always")
def _reach(times, pos, end, low):
    """First index in ``[pos, end)`` of the sorted ``times`` whose time is ``>= low``
    (``end`` if none): a galloping search, cheap when the answer is near ``pos``."""
    if pos >= end or times[pos] >= low:
        return pos
    step = 1
    while pos + step < end and times[pos + step] < low:
        pos += step
        step *= 2
    top = min(pos + step, end)
    pos += 1
    while pos < top:
        half = (pos + top) >> 1
        if times[half] < low:
            pos = half + 1
        else:
            top = half
    return pos


@nb.njit(cache=True, nogil=True)
def _gather_sides(p, sides, fwd, bwd, lo, hi, d_off, d_rank, times, g_t, g_off, reach, near,
                  wbits, buf):
    """The group's third-vertex events that can be in an instance into ``buf`` as sort
    keys (time rank, class, third + 1): those with an event of the third vertex's other
    side within ``reach`` (the largest δ) and an event of the edge in the buckets
    ``near`` marks around theirs. The others are in no instance for any δ: dropping them
    changes no count."""
    stamp, shift, origin, mark = near
    m = 0
    e0, e1 = g_off[p], g_off[p + 1]  # the edge's events, sorted by time
    for wi in range(sides.shape[0]):
        qa, qb = sides[wi, 0], sides[wi, 1]
        first = max(g_t[g_off[qa]], g_t[g_off[qb]], g_t[e0])
        if first - min(g_t[g_off[qa + 1] - 1], g_t[g_off[qb + 1] - 1], g_t[e1 - 1]) > reach:
            continue  # the three pairs' time spans are too far apart
        for c in range(4):  # w -> a, w -> b, a -> w, b -> w
            q = sides[wi, c % 2]
            k = _runs(q, c >= 2, fwd, bwd, lo, lo[p] if c % 2 == 0 else hi[p])
            if k < 0:
                continue
            other = sides[wi, 1 - c % 2]
            o1 = g_off[other + 1]
            po = g_off[other]
            for i in range(d_off[k], d_off[k + 1]):
                ti = times[d_rank[i]]
                if shift >= 0 and stamp[(ti - origin) >> shift] != mark:
                    continue  # no event of the edge within reach
                po = _reach(g_t, po, o1, ti - reach)
                if po == o1:
                    break  # nothing of the other side from here on
                if g_t[po] - ti <= reach:
                    buf[m] = (((d_rank[i] << 3) | (2 + c)) << wbits) | (wi + 1)
                    m += 1
    return m


@nb.njit(cache=True, nogil=True)
def _mark_edge(g_t, begin, end, near):
    """Mark the time buckets within one bucket of the edge's events (a bucket is at least
    ``reach`` wide, so every time within ``reach`` of an edge event is marked)."""
    stamp, shift, origin, mark = near
    if shift < 0:
        return
    for i in range(begin, end):
        b = (g_t[i] - origin) >> shift
        stamp[b - 1] = mark
        stamp[b] = mark
        stamp[b + 1] = mark


@nb.njit(cache=True, nogil=True)
def _merge_edge(p, fwd, bwd, d_off, d_rank, times, reach, keys, ns, wbits, stimes, t, cls,
                wloc):
    """The sorted third-vertex ``keys[:ns]`` merged with the edge's two directed lists
    into ``t``/``cls``/``wloc``, keeping the edge events with a third-vertex event within
    ``reach``; returns the group's length."""
    mask = (1 << wbits) - 1
    for i in range(ns):
        stimes[i] = times[keys[i] >> (wbits + 3)]
    last = np.iinfo(np.int64).max
    ka, kb = fwd[p], bwd[p]
    ia, ea = (d_off[ka], d_off[ka + 1]) if ka >= 0 else (0, 0)
    ib, eb = (d_off[kb], d_off[kb + 1]) if kb >= 0 else (0, 0)
    m = 0
    side = 0
    near = 0
    while side < ns or ia < ea or ib < eb:
        key_a = (d_rank[ia] << 3) << wbits if ia < ea else last
        key_b = ((d_rank[ib] << 3) | 1) << wbits if ib < eb else last
        key_s = keys[side] if side < ns else last
        if key_s < key_a and key_s < key_b:
            t[m] = stimes[side]
            cls[m] = (key_s >> wbits) & 7
            wloc[m] = (key_s & mask) - 1
            side += 1
            m += 1
            continue
        c = 0 if key_a < key_b else 1
        if c == 0:
            te = times[d_rank[ia]]
            ia += 1
        else:
            te = times[d_rank[ib]]
            ib += 1
        near = _reach(stimes, near, ns, te - reach)
        if near < ns and stimes[near] - te <= reach:
            t[m] = te
            cls[m] = c
            wloc[m] = -1
            m += 1
    return m


@nb.njit(cache=True, nogil=True, inline="always")
def _push(nodes, sums, w, d, o, side):
    for i in range(2):
        sums[d, 1 - side, i, o] += nodes[w, d, i, 1 - side]
    nodes[w, d, o, side] += 1


@nb.njit(cache=True, nogil=True, inline="always")
def _pop(nodes, sums, w, d, o, side):
    nodes[w, d, o, side] -= 1
    for i in range(2):
        sums[d, side, o, i] -= nodes[w, d, i, 1 - side]


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
    """Slide over one sorted group once, every δ's windows together, adding to
    ``counts[d, i, j, k]``."""
    pre_nodes, pos_nodes, pre, pos, mid, start, end = st
    nd = deltas.shape[0]
    start[:] = 0
    end[:] = 0
    for j in range(m):
        tj = t[j]
        c = cls[j]
        for d in range(nd):
            s = start[d]
            low = tj - deltas[d]
            while t[s] < low:  # stops at j at the latest
                cs = cls[s]
                if cs >= 2:
                    _pop(pre_nodes, pre, wloc[s], d, (cs - 2) >> 1, cs & 1)
                s += 1
            start[d] = s
            e = end[d]
            high = tj + deltas[d]
            while e < m and t[e] <= high:
                ce = cls[e]
                if ce >= 2:
                    _push(pos_nodes, pos, wloc[e], d, (ce - 2) >> 1, ce & 1)
                e += 1
            end[d] = e
            if c < 2:
                _close(counts, pre, pos, mid, d, 1 - c)
                continue
            w, o, side = wloc[j], (c - 2) >> 1, c & 1
            _pop(pos_nodes, pos, w, d, o, side)
            for i in range(2):
                mid[d, 1 - side, i, o] -= pre_nodes[w, d, i, 1 - side]
                mid[d, side, o, i] += pos_nodes[w, d, i, 1 - side]
            _push(pre_nodes, pre, w, d, o, side)
    pre_nodes[:nthirds] = 0  # only what this group touched
    pos_nodes[:nthirds] = 0
    pre[:] = 0
    pos[:] = 0
    mid[:] = 0


@nb.njit(cache=True, nogil=True)
def count_triangles(g_off, g_pair, g_sides, thirds, lo, hi, fwd, bwd, d_off, d_rank, times,
                    g_t, g_off_pairs, deltas, per_vertex):
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
    g_t, g_off_pairs
        Each pair's events sorted by time (:class:`~graphcep.engines.motifs.order.Pairs`
        ``t`` and ``off``).
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
    reach = deltas.max() if nd else -1
    buf = np.empty(size, dtype=np.int64)
    stimes = np.empty(size, dtype=np.int64)
    t = np.empty(size, dtype=np.int64)
    cls = np.empty(size, dtype=np.int64)
    wloc = np.empty(size, dtype=np.int64)
    st = (np.zeros((width, nd, 2, 2), dtype=np.int64), np.zeros((width, nd, 2, 2), dtype=np.int64),
          np.zeros((nd, 2, 2, 2), dtype=np.int64), np.zeros((nd, 2, 2, 2), dtype=np.int64),
          np.zeros((nd, 2, 2, 2), dtype=np.int64), np.zeros(nd, dtype=np.int64),
          np.zeros(nd, dtype=np.int64))
    result = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    group = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    keep = per_vertex.shape[0] > 0
    shift, stamp = _buckets(times, reach)
    for g in range(g_off.shape[0] - 1):
        p = g_pair[g]
        if reach < 0:
            break
        near = (stamp, shift, times[0] - (1 << max(shift, 0)), g + 1)
        _mark_edge(g_t, g_off_pairs[p], g_off_pairs[p + 1], near)
        ns = _gather_sides(p, g_sides[g_off[g]:g_off[g + 1]], fwd, bwd, lo, hi, d_off, d_rank,
                           times, g_t, g_off_pairs, reach, near, wbits, buf)
        if ns < 2:
            continue  # an instance needs two third-vertex events
        buf[:ns].sort()
        m = _merge_edge(p, fwd, bwd, d_off, d_rank, times, reach, buf, ns, wbits, stimes, t, cls,
                        wloc)
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
def _buckets(times, reach):
    """Time buckets for the edge marks: a power-of-two width at least ``reach``, and at
    most about 2**20 buckets; their stamps (one spare bucket at each end). Shift -1 (no
    marks) when every time is within ``reach`` of every other, or for times or a reach
    so large that bucket arithmetic could overflow."""
    limit = 1 << 60
    if (times.shape[0] == 0 or reach < 0 or reach > limit or times[0] < -limit
            or times[-1] > limit or times[-1] - times[0] <= reach):
        return -1, np.zeros(1, dtype=np.int64)
    span = times[-1] - times[0]
    shift = 0
    while (1 << shift) < reach or (span >> shift) > (1 << 20):
        shift += 1
    return shift, np.zeros((span >> shift) + 4, dtype=np.int64)


@nb.njit(cache=True, nogil=True)
def _events(q, fwd, bwd, d_off):
    total = 0
    for k in (fwd[q], bwd[q]):
        if k >= 0:
            total += d_off[k + 1] - d_off[k]
    return total


__all__ = ["count_triangles", "directed_lists", "group_triangles", "higher_neighbours",
           "list_triangles"]
