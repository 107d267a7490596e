"""Compiled inner loops of the temporal subgraph engine (numba).

The engine keeps the window's edges in stream order in flat arrays (``t``, ``end``,
``src``, ``dst`` as dense integer vertex ids) and, per push, builds the groupings of them
its plans need, each a counting sort so it costs O(edges) and keeps stream order inside a
group:

* by source vertex (``out``), by destination vertex (``in``),
* by (source, destination) pair, found through an open-addressing hash table and screened
  by a bitset first, because most pair probes in a sparse graph find nothing,
* the window itself, for query edges that share no vertex with the ones bound before.

The groupings are laid out one after another in a single *layout* that also carries a
copy of each edge's time, end, endpoints and eligibility, so that a scan reads memory
sequentially instead of chasing indices into the window (that alone made the search
several times faster).

:func:`search` then enumerates, for every new edge that may play the *anchor* query edge
(the match's last edge in stream order), all ways to bind the remaining query edges to
earlier window edges, one query edge per level of an iterative backtracking search. Each
level scans the group its plan says (out-edges of a bound vertex, in-edges, edges between
two bound vertices, or the whole window) restricted by binary search to the time range the
closed temporal bounds allow; candidates are then checked exactly against the bounds,
vertex bindings (injective unless homomorphic) and edge distinctness.
"""

from __future__ import annotations

import numba as nb
import numpy as np

MODE_OUT = 0
MODE_IN = 1
MODE_PAIR = 2
MODE_ALL = 3

HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_INF = np.int64(2**60)  # bounds at or above this mean "none" (UNBOUNDED is 2**61)


@nb.njit(cache=True)
def group_by(keys: np.ndarray, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """Stable counting sort: ``idx[off[k]:off[k+1]]`` are the positions holding key k."""
    off = np.zeros(nkeys + 1, dtype=np.int64)
    for i in range(keys.shape[0]):
        off[keys[i] + 1] += 1
    for k in range(nkeys):
        off[k + 1] += off[k]
    fill = off[:-1].copy()
    idx = np.empty(keys.shape[0], dtype=np.int32)
    for i in range(keys.shape[0]):
        k = keys[i]
        idx[fill[k]] = i
        fill[k] += 1
    return off, idx


@nb.njit(cache=True)
def _hash(key: np.int64) -> np.uint64:
    return np.uint64(key) * HASH_MULTIPLIER


@nb.njit(cache=True)
def build_pair_index(src: np.ndarray, dst: np.ndarray, nvertices: int):
    """Group edges by (src, dst): hash table -> dense pair id -> counting sort, plus bitset."""
    n = src.shape[0]
    hbits = 4
    while (1 << hbits) < 2 * n + 2:
        hbits += 1
    size = 1 << hbits
    shift = np.uint64(64 - hbits)
    table_keys = np.full(size, -1, dtype=np.int64)
    table_ids = np.empty(size, dtype=np.int32)
    bbits = hbits + 3
    bshift = np.uint64(64 - bbits)
    bitset = np.zeros((1 << bbits) // 64 + 1, dtype=np.uint64)
    pair_of = np.empty(n, dtype=np.int32)
    npairs = 0
    mask = size - 1
    for i in range(n):
        key = np.int64(src[i]) * nvertices + dst[i]
        h = _hash(key)
        slot = np.int64(h >> shift)
        while True:
            k = table_keys[slot]
            if k == key:
                pair_of[i] = table_ids[slot]
                break
            if k == -1:
                table_keys[slot] = key
                table_ids[slot] = npairs
                pair_of[i] = npairs
                npairs += 1
                b = np.int64(h >> bshift)
                bitset[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
                break
            slot = (slot + 1) & mask
    off, idx = group_by(pair_of, npairs)
    return table_keys, table_ids, bitset, hbits, off, idx


@nb.njit(cache=True)
def build_layout(segments, t, end, src, dst, ok):
    """Copy edge data into group order: one row per (segment, edge) in ``segments`` order."""
    total = 0
    for seg in segments:
        total += seg.shape[0]
    k = ok.shape[0]
    l_idx = np.empty(total, dtype=np.int32)
    l_t = np.empty(total, dtype=np.int64)
    l_end = np.empty(total, dtype=np.int64)
    l_src = np.empty(total, dtype=np.int32)
    l_dst = np.empty(total, dtype=np.int32)
    l_ok = np.empty((k, total), dtype=np.uint8)
    p = 0
    for seg in segments:
        for i in range(seg.shape[0]):
            e = seg[i]
            l_idx[p] = e
            l_t[p] = t[e]
            l_end[p] = end[e]
            l_src[p] = src[e]
            l_dst[p] = dst[e]
            for q in range(k):
                l_ok[q, p] = ok[q, e]
            p += 1
    return l_idx, l_t, l_end, l_src, l_dst, l_ok


@nb.njit(cache=True)
def _find_pair(u, v, nvertices, table_keys, table_ids, bitset, hbits) -> int:
    key = np.int64(u) * nvertices + v
    h = _hash(key)
    b = np.int64(h >> np.uint64(64 - hbits - 3))
    if ((bitset[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)) == np.uint64(0):
        return -1
    slot = np.int64(h >> np.uint64(64 - hbits))
    mask = table_keys.shape[0] - 1
    while True:
        k = table_keys[slot]
        if k == key:
            return table_ids[slot]
        if k == -1:
            return -1
        slot = (slot + 1) & mask


@nb.njit(cache=True)
def _first_time_at_or_after(lt, lo_i, hi_i, t_min) -> int:
    while lo_i < hi_i:
        mid = (lo_i + hi_i) >> 1
        if lt[mid] < t_min:
            lo_i = mid + 1
        else:
            hi_i = mid
    return lo_i


@nb.njit(cache=True)
def _time_range(q, depth, order, bt, bend, U, k):
    """Start-time range for query edge q given the edges bound at levels < depth."""
    lo = -_INF
    hi = _INF
    sq = 2 * q
    z = 2 * k
    if U[sq, z] < _INF:
        hi = min(hi, U[sq, z])
    if U[z, sq] < _INF:
        lo = max(lo, -U[z, sq])
    for level in range(depth):
        b = order[level]
        for var in range(2):
            x = 2 * b + var
            val = bt[b] if var == 0 else bend[b]
            if U[sq, x] < _INF:  # s_q - x <= U
                hi = min(hi, val + U[sq, x])
            if U[x, sq] < _INF:  # x - s_q <= U
                lo = max(lo, val - U[x, sq])
    return lo, hi


@nb.njit(cache=True)
def _times_ok(q, ct, cend, depth, order, bt, bend, U, k) -> bool:
    """All closed bounds between query edge q (start ct, end cend) and bound edges hold."""
    z = 2 * k
    sq = 2 * q
    fq = sq + 1
    if ct > U[sq, z] or -ct > U[z, sq] or cend > U[fq, z] or -cend > U[z, fq]:
        return False
    if ct - cend > U[sq, fq] or cend - ct > U[fq, sq]:
        return False
    for level in range(depth):
        b = order[level]
        sb = 2 * b
        fb = sb + 1
        tb = bt[b]
        eb = bend[b]
        if ct - tb > U[sq, sb] or tb - ct > U[sb, sq]:
            return False
        if ct - eb > U[sq, fb] or eb - ct > U[fb, sq]:
            return False
        if cend - tb > U[fq, sb] or tb - cend > U[sb, fq]:
            return False
        if cend - eb > U[fq, fb] or eb - cend > U[fb, fq]:
            return False
    return True


@nb.njit(cache=True)
def _vertex_free(v, bind, nvars) -> bool:
    for var in range(nvars):  # noqa: SIM110 (numba compiles no generators)
        if bind[var] == v:
            return False
    return True


@nb.njit(cache=True)
def _try_bind(q, sv, dv, esrc, edst, bind, nvars, iso, newly):
    """Bind query edge q's endpoints to stream vertices sv, dv; record new bindings."""
    vs = esrc[q]
    vd = edst[q]
    newly[0] = -1
    newly[1] = -1
    if vs == vd:
        if sv != dv:
            return False
        if bind[vs] >= 0:
            return bind[vs] == sv
        if iso and not _vertex_free(sv, bind, nvars):
            return False
        bind[vs] = sv
        newly[0] = vs
        return True
    if bind[vs] >= 0:
        if bind[vs] != sv:
            return False
    elif iso and not _vertex_free(sv, bind, nvars):
        return False
    if bind[vd] >= 0:
        if bind[vd] != dv:
            return False
    elif iso and (sv == dv or not _vertex_free(dv, bind, nvars)):
        return False
    if bind[vs] < 0:
        bind[vs] = sv
        newly[0] = vs
    if bind[vd] < 0:
        bind[vd] = dv
        newly[1] = vd
    return True


@nb.njit(cache=True)
def search(
    anchors, start, order, mode, esrc, edst, U, nvars, iso,
    t, end, src, dst, ok, nvertices,
    seg_base, out_off, in_off, pair_off, table_keys, table_ids, bitset, hbits,
    l_idx, l_t, l_end, l_src, l_dst, l_ok,
    out_rows,
):
    """Enumerate matches anchored at window edges ``anchors[start:]`` into ``out_rows``.

    ``seg_base[mode]`` is where that grouping starts in the layout arrays ``l_*``.
    Returns ``(next_anchor, rows)``: ``next_anchor < len(anchors)`` means the buffer filled
    up and the caller must grow it and call again from ``next_anchor``.
    """
    k = order.shape[0]
    cap = out_rows.shape[0]
    rows = 0
    bind = np.full(nvars, -1, dtype=np.int64)
    bound_edge = np.full(k, -1, dtype=np.int64)
    bt = np.zeros(k, dtype=np.int64)
    bend = np.zeros(k, dtype=np.int64)
    cur = np.zeros(k, dtype=np.int64)
    stop = np.zeros(k, dtype=np.int64)
    hi_t = np.zeros(k, dtype=np.int64)
    newv = np.full((k, 2), -1, dtype=np.int64)
    newly = np.full(2, -1, dtype=np.int64)
    a_q = order[0]
    for ai in range(start, anchors.shape[0]):
        anchor = anchors[ai]
        rows_before = rows
        for var in range(nvars):
            bind[var] = -1
        for q in range(k):
            bound_edge[q] = -1
        for level in range(k):
            newv[level, 0] = -1
            newv[level, 1] = -1
        if not _times_ok(a_q, t[anchor], end[anchor], 0, order, bt, bend, U, k):
            continue
        if not _try_bind(a_q, src[anchor], dst[anchor], esrc, edst, bind, nvars, iso, newly):
            continue
        bound_edge[a_q] = anchor
        bt[a_q] = t[anchor]
        bend[a_q] = end[anchor]
        if k == 1:
            if rows >= cap:
                return ai, rows_before
            out_rows[rows, a_q] = anchor
            rows += 1
            continue
        depth = 1
        _open_level(depth, order, mode, esrc, edst, bind, bt, bend, U, k, anchor, nvertices,
                    seg_base, out_off, in_off, pair_off, table_keys, table_ids, bitset, hbits,
                    l_t, cur, stop, hi_t)
        while depth >= 1:
            q = order[depth]
            if bound_edge[q] >= 0:  # undo the previous candidate's bindings at this level
                for j in range(2):
                    if newv[depth, j] >= 0:
                        bind[newv[depth, j]] = -1
                        newv[depth, j] = -1
                bound_edge[q] = -1
            found = False
            hi = hi_t[depth]
            while cur[depth] < stop[depth]:
                p = cur[depth]
                cur[depth] += 1
                c = l_idx[p]
                if c >= anchor or l_t[p] > hi:
                    cur[depth] = stop[depth]
                    break
                if l_ok[q, p] == 0:
                    continue
                dup = False
                for level in range(depth):
                    if bound_edge[order[level]] == c:
                        dup = True
                        break
                if dup:
                    continue
                if not _times_ok(q, l_t[p], l_end[p], depth, order, bt, bend, U, k):
                    continue
                if not _try_bind(q, l_src[p], l_dst[p], esrc, edst, bind, nvars, iso, newly):
                    continue
                newv[depth, 0] = newly[0]
                newv[depth, 1] = newly[1]
                bound_edge[q] = c
                bt[q] = l_t[p]
                bend[q] = l_end[p]
                found = True
                break
            if not found:
                depth -= 1
                continue
            if depth == k - 1:
                if rows >= cap:
                    return ai, rows_before
                for qq in range(k):
                    out_rows[rows, qq] = bound_edge[qq]
                rows += 1
                continue
            depth += 1
            _open_level(depth, order, mode, esrc, edst, bind, bt, bend, U, k, anchor, nvertices,
                        seg_base, out_off, in_off, pair_off, table_keys, table_ids, bitset,
                        hbits, l_t, cur, stop, hi_t)
    return anchors.shape[0], rows


@nb.njit(cache=True)
def _open_level(depth, order, mode, esrc, edst, bind, bt, bend, U, k, anchor, nvertices,
                seg_base, out_off, in_off, pair_off, table_keys, table_ids, bitset, hbits,
                l_t, cur, stop, hi_t):
    """Set the scan range of level ``depth`` (positions in the layout) from the bindings."""
    q = order[depth]
    lo, hi = _time_range(q, depth, order, bt, bend, U, k)
    hi_t[depth] = hi
    cur[depth] = 0
    stop[depth] = 0
    if lo > hi:
        return
    m = mode[depth]
    base = seg_base[m]
    if m == MODE_OUT:
        u = bind[esrc[q]]
        a, b = base + out_off[u], base + out_off[u + 1]
    elif m == MODE_IN:
        v = bind[edst[q]]
        a, b = base + in_off[v], base + in_off[v + 1]
    elif m == MODE_PAIR:
        pid = _find_pair(bind[esrc[q]], bind[edst[q]], nvertices, table_keys, table_ids,
                         bitset, hbits)
        if pid < 0:
            return
        a, b = base + pair_off[pid], base + pair_off[pid + 1]
    else:
        a, b = base, base + anchor
    cur[depth] = _first_time_at_or_after(l_t, a, b, lo)
    stop[depth] = b
