"""Compiled Algorithm DDST (numba): the fixpoint of :mod:`graphcep.engines.ddst.baseline`.

Algorithm DDST of "Event pattern matching over graph streams" (Sec. 3.1) runs once per
arriving edge in the baseline, once per signature match in the signature engine and once
per verification in the coloring engine, on graphs from a handful of edges (a coloring
part) to a whole dense window. Written as whole-array passes its cost on small graphs would
be the number of operations, not their size (about 200 µs on a six-edge part against 6 µs
compiled); compiled loops serve both ends.

Layout: the query as index arrays (``qsrc``, ``qdst``, ``topo`` and CSR lists ``pre``,
``post``, ``out_q``, ``in_q``); the graph as ``src``, ``dst``, ``t`` per edge over vertices
``0..n-1``; ``vc`` ``(nv, n)`` and ``ec`` ``(ne, m)`` the label-compatible candidates.
The functions mirror the lines of the paper's algorithm named in their docstrings.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_INT_MIN = np.iinfo(np.int64).min
_INT_MAX = np.iinfo(np.int64).max


@nb.njit(cache=True, nogil=True)
def components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Weakly connected components of the edges ``src -> dst`` over vertices ``0..n-1``:
    per vertex, the smallest vertex number in its part (union-find)."""
    parent = np.arange(n)
    for i in range(len(src)):
        a, b = src[i], dst[i]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    for v in range(n):  # roots are the smallest members: find in increasing order
        parent[v] = parent[parent[v]]
    return parent


@nb.njit(cache=True, nogil=True)
def renumber(src: np.ndarray, dst: np.ndarray,
             scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Number the vertices of the edges ``src -> dst`` (an engine's own numbers, each below
    ``len(scratch)``) ``0..n-1`` in order of first appearance, sources before destinations:
    the new ``src``, ``dst`` and, per new number, the old one.

    ``scratch`` must be all -1 and is left so: the cost follows the edges, not the engine's
    numbering (a verification renumbers a few hundred edges of a window of thousands)."""
    m = len(src)
    new_src = np.empty(m, dtype=np.int64)
    new_dst = np.empty(m, dtype=np.int64)
    kept = np.empty(2 * m, dtype=np.int64)
    n = 0
    for ends, out in ((src, new_src), (dst, new_dst)):
        for i in range(m):
            v = ends[i]
            if scratch[v] < 0:
                scratch[v] = n
                kept[n] = v
                n += 1
            out[i] = scratch[v]
    for i in range(n):
        scratch[kept[i]] = -1
    return new_src, new_dst, kept[:n]


@nb.njit(cache=True, nogil=True)
def dual_simulation(qsrc, qdst, src, dst, vc, ec) -> np.ndarray:
    """Line 2: the maximal dual simulation with edge labels (Ma et al.'s ``DualSim``):
    ``u`` keeps ``v`` while every query edge out of (into) ``u`` has a candidate out of
    (into) ``v`` whose other end is still matched."""
    sim = vc.copy()
    ne, n = ec.shape[0], vc.shape[1]
    out_ok = np.zeros(n, dtype=np.bool_)
    in_ok = np.zeros(n, dtype=np.bool_)
    changed = True
    while changed:
        changed = False
        for k in range(ne):
            u, w = qsrc[k], qdst[k]
            out_ok[:] = False
            in_ok[:] = False
            for e in range(len(src)):
                if ec[k, e]:
                    if sim[w, dst[e]]:
                        out_ok[src[e]] = True
                    if sim[u, src[e]]:
                        in_ok[dst[e]] = True
            for v in range(n):
                if sim[u, v] and not out_ok[v]:
                    sim[u, v] = False
                    changed = True
                if sim[w, v] and not in_ok[v]:
                    sim[w, v] = False
                    changed = True
    return sim


@nb.njit(cache=True, nogil=True)
def edge_relation(qsrc, qdst, src, dst, sim, cand) -> np.ndarray:
    """Lines 4 / 26: the edge pairs in ``cand`` whose endpoints are matched in ``sim``."""
    se = np.zeros_like(cand)
    for k in range(cand.shape[0]):
        for e in range(cand.shape[1]):
            se[k, e] = cand[k, e] and sim[qsrc[k], src[e]] and sim[qdst[k], dst[e]]
    return se


@nb.njit(cache=True, nogil=True)
def _earliest_after(keep, t, comp, ncomp, order, pre_ptr, pre_idx) -> None:
    """One timing pass (in place): in ``order``, query edge ``k`` keeps, per component, only
    candidates later than every predecessor's earliest kept time."""
    ne, m = keep.shape
    lo = np.full((ne, ncomp), _INT_MAX)
    bound = np.empty(ncomp, dtype=np.int64)
    for k in order:
        bound[:] = _INT_MIN
        for i in range(pre_ptr[k], pre_ptr[k + 1]):
            p = pre_idx[i]
            for c in range(ncomp):
                bound[c] = max(bound[c], lo[p, c])
        for e in range(m):
            if keep[k, e]:
                c = comp[e]
                if t[e] > bound[c]:
                    lo[k, c] = min(lo[k, c], t[e])
                else:
                    keep[k, e] = False


@nb.njit(cache=True, nogil=True)
def timing_keep(se, t, comp, ncomp, topo, pre_ptr, pre_idx, post_ptr, post_idx) -> np.ndarray:
    """Lines 9-18: forward then backward timing filtering, per component ``comp[e]``
    (``0..ncomp-1``); which pairs of ``se`` keep a timing witness.

    Forward: ``ts(k)`` is the earliest candidate time after every predecessor's ``ts``
    (candidates not after it are dropped). Backward, the latest time before every
    successor's, is the same pass on negated times in reverse order with successors as
    predecessors.
    """
    keep = se.copy()
    _earliest_after(keep, t, comp, ncomp, topo, pre_ptr, pre_idx)
    _earliest_after(keep, -t, comp, ncomp, topo[::-1], post_ptr, post_idx)
    return keep


@nb.njit(cache=True, nogil=True)
def _timing_filter(se, src, dst, t, n, topo, pre_ptr, pre_idx, post_ptr, post_idx):
    """Lines 6-18 on the match graph ``se``: components of its edges, then timing_keep."""
    ne, m = se.shape
    active = np.zeros(m, dtype=np.bool_)
    for e in range(m):
        for k in range(ne):
            if se[k, e]:
                active[e] = True
                break
    comp = components(n, src[active], dst[active])[src]
    return timing_keep(se, t, comp, n, topo, pre_ptr, pre_idx, post_ptr, post_idx)


@nb.njit(cache=True, nogil=True)
def distinct(cand: np.ndarray) -> bool:
    """Whether the rows (query edges) of ``cand`` ``(L, d)`` take pairwise distinct columns
    (stream edges): augmenting paths (Kuhn), breadth first."""
    rows, cols = cand.shape
    owner = np.full(cols, -1)
    mine = np.full(rows, -1)
    via = np.empty(cols, dtype=np.int64)
    seen = np.empty(cols, dtype=np.bool_)
    queue = np.empty(rows, dtype=np.int64)
    for r in range(rows):
        seen[:] = False
        queue[0], head, tail, free = r, 0, 1, -1
        while head < tail and free < 0:
            left = queue[head]
            head += 1
            for c in range(cols):
                if cand[left, c] and not seen[c]:
                    seen[c] = True
                    via[c] = left
                    if owner[c] < 0:
                        free = c
                        break
                    queue[tail] = owner[c]
                    tail += 1
        if free < 0:
            return False
        c = free
        while True:  # flip the path back to r
            left = via[c]
            before = mine[left]
            owner[c], mine[left] = left, c
            if left == r:
                break
            c = before
    return True


@nb.njit(cache=True, nogil=True)
def _side_ok(se, qs, at, start, stop) -> bool:
    """Whether query edges ``qs`` take distinct candidates among edges ``at[start:stop]``:
    counted first (none: no; at least ``len(qs)`` each: yes, Hall), else matched."""
    size = len(qs)
    if size == 0:
        return True
    easy = True
    for i in range(size):
        count = 0
        for j in range(start, stop):
            if se[qs[i], at[j]]:
                count += 1
        if count == 0:
            return False
        if count < size:
            easy = False
    if easy:
        return True
    cand = np.zeros((size, stop - start), dtype=np.bool_)
    for i in range(size):
        for j in range(start, stop):
            cand[i, j - start] = se[qs[i], at[j]]
    return distinct(cand)


@nb.njit(cache=True, nogil=True)
def degree_check(sim, se, out_ptr, out_idx, in_ptr, in_idx, by_src, src_ptr, by_dst,
                 dst_ptr) -> np.ndarray:
    """Lines 19-25: keep ``(u, v)`` only if ``u``'s out-edges match pairwise distinct
    edges out of ``v``, and its in-edges distinct edges into ``v``."""
    nv, n = sim.shape
    out = sim.copy()
    for u in range(nv):
        outs = out_idx[out_ptr[u]:out_ptr[u + 1]]
        ins = in_idx[in_ptr[u]:in_ptr[u + 1]]
        for v in range(n):
            if out[u, v]:
                out[u, v] = _side_ok(se, outs, by_src, src_ptr[v], src_ptr[v + 1]) and _side_ok(
                    se, ins, by_dst, dst_ptr[v], dst_ptr[v + 1]
                )
    return out


@nb.njit(cache=True, nogil=True)
def _by_vertex(ends: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Edges grouped by an end vertex: edge numbers and CSR offsets per vertex."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    for e in range(len(ends)):
        ptr[ends[e] + 1] += 1
    for v in range(n):
        ptr[v + 1] += ptr[v]
    fill = ptr[:-1].copy()
    order = np.empty(len(ends), dtype=np.int64)
    for e in range(len(ends)):
        order[fill[ends[e]]] = e
        fill[ends[e]] += 1
    return order, ptr


@nb.njit(cache=True, nogil=True)
def ddst(qsrc, qdst, topo, pre_ptr, pre_idx, post_ptr, post_idx, out_ptr, out_idx, in_ptr,
         in_idx, src, dst, t, vc, ec) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm DDST on one graph: the maximal ``(S, Se)`` as boolean matrices (lines
    2-26, repeated to a fixpoint); all false when some query vertex loses every match."""
    n = vc.shape[1]
    by_src, src_ptr = _by_vertex(src, n)
    by_dst, dst_ptr = _by_vertex(dst, n)
    sim = dual_simulation(qsrc, qdst, src, dst, vc, ec)
    se = edge_relation(qsrc, qdst, src, dst, sim, ec)
    while True:
        for u in range(sim.shape[0]):
            if not sim[u].any():
                return np.zeros_like(sim), np.zeros_like(ec)
        se_next = _timing_filter(se, src, dst, t, n, topo, pre_ptr, pre_idx, post_ptr,
                                 post_idx)
        sim_next = degree_check(sim, se_next, out_ptr, out_idx, in_ptr, in_idx, by_src,
                                src_ptr, by_dst, dst_ptr)
        se_next = edge_relation(qsrc, qdst, src, dst, sim_next, se_next)
        if (se_next == se).all() and (sim_next == sim).all():
            return sim, se
        sim, se = sim_next, se_next


def csr(lists: tuple[tuple[int, ...], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and values (int64) of a tuple of index lists."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    values = np.array([i for x in lists for i in x], dtype=np.int64)
    return ptr, values
