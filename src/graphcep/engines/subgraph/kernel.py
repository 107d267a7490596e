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
vertex bindings (injective unless homomorphic) and edge distinctness. The backtracking
state lives in an array the caller keeps, so the search can stop when its output buffer
is full and go on later from the same place: matches come out in bounded buffers.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphcep.engines.subgraph.plan import MODE_IN, MODE_OUT, MODE_PAIR
from graphcep.hashing import GOLDEN_GAMMA

HASH_MULTIPLIER = GOLDEN_GAMMA  # Fibonacci hashing (graphcep.hashing)
_INF = np.int64(2**60)  # bounds at or above this mean "none" (UNBOUNDED is 2**61)


@nb.njit(cache=True, nogil=True)
def counting_sort(keys, nkeys, into):
    """Stable counting sort into ``into``: ``into[off[k]:off[k + 1]]`` are the positions
    holding key ``k``, in order; returns ``off``."""
    off = np.zeros(nkeys + 1, dtype=np.int64)
    for i in range(keys.shape[0]):
        off[keys[i] + 1] += 1
    for k in range(nkeys):
        off[k + 1] += off[k]
    fill = off[:-1].copy()
    for i in range(keys.shape[0]):
        into[fill[keys[i]]] = i
        fill[keys[i]] += 1
    return off


@nb.njit(cache=True, nogil=True)
def group_by(keys: np.ndarray, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """Stable counting sort: ``idx[off[k]:off[k+1]]`` are the positions holding key k."""
    idx = np.empty(keys.shape[0], dtype=np.int32)
    return counting_sort(keys, nkeys, idx), idx


@nb.njit(cache=True)
def _hash(key: np.int64) -> np.uint64:
    return np.uint64(key) * HASH_MULTIPLIER


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True)
def build_signatures(src, dst, nvertices, words):
    """Per-vertex neighbour signatures, two-bit Bloom filters: bits ``h1(v)`` and ``h2(v)``
    (mod ``64*words``) of row ``u`` are set when the window has an edge u -> v (``out``),
    resp. v -> u (``in``).

    A pair lookup first tests the signature of the endpoint bound earlier -- one row that
    stays in cache while its partner varies -- and probes the hash table only on a hit.
    Two bits per neighbour instead of one: on S2's triangle (40 neighbours in a 1,024-bit
    row) one bit let 4% of the candidates through to a hash probe, nearly all of them
    false; two bits in the same cached row let 0.6% through.
    """
    sig_out = np.zeros(nvertices * words, dtype=np.uint64)
    sig_in = np.zeros(nvertices * words, dtype=np.uint64)
    for i in range(src.shape[0]):
        u = src[i]
        v = dst[i]
        _set_signature(sig_out, u, v, words)
        _set_signature(sig_in, v, u, words)
    return sig_out, sig_in


@nb.njit(cache=True)
def _signature_bits(other, words) -> tuple[np.int64, np.int64]:
    """The two bits that stand for vertex ``other`` in a signature row of ``words`` words
    (two disjoint slices of the well-mixed high bits of its Fibonacci hash)."""
    h = _hash(np.int64(other))
    mask = words * 64 - 1
    return np.int64(h >> np.uint64(52)) & mask, np.int64(h >> np.uint64(40)) & mask


@nb.njit(cache=True)
def _set_signature(sig, row, other, words) -> None:
    b1, b2 = _signature_bits(other, words)
    sig[row * words + (b1 >> 6)] |= np.uint64(1) << np.uint64(b1 & 63)
    sig[row * words + (b2 >> 6)] |= np.uint64(1) << np.uint64(b2 & 63)


@nb.njit(cache=True)
def _in_signature(sig, row, other, words) -> bool:
    """Whether both of ``other``'s bits are set in signature row ``row`` (False: no such
    edge; True: maybe)."""
    b1, b2 = _signature_bits(other, words)
    base = row * words
    both = (sig[base + (b1 >> 6)] >> np.uint64(b1 & 63)) & (sig[base + (b2 >> 6)]
                                                            >> np.uint64(b2 & 63))
    return (both & np.uint64(1)) != np.uint64(0)


@nb.njit(cache=True, nogil=True)
def fill_layout(order, t, end, src, dst, ok, l_idx, l_t, l_end, l_src, l_dst, l_ok, at):
    """Copy edge data into group order: row ``at + p`` of the layout ``l_*`` gets edge
    ``order[p]``. Each grouping fills its own segment, in the thread that built it (a
    typed list of segments would be compiled anew in every process, as numba cannot
    cache typed-list methods)."""
    k = ok.shape[0]  # 0 rows: every edge may play every query edge (no predicates)
    for p in range(order.shape[0]):
        e = order[p]
        r = at + p
        l_idx[r] = e
        l_t[r] = t[e]
        l_end[r] = end[e]
        l_src[r] = src[e]
        l_dst[r] = dst[e]
        for q in range(k):
            l_ok[q, r] = ok[q, e]


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


def scratch_size(nvars: int, k: int) -> int:
    """Entries of :func:`search`'s ``scratch``: its backtracking state for ``nvars`` query
    vertices and ``k`` query edges."""
    return nvars + 8 * k + 1


@nb.njit(cache=True, nogil=True)
def search(
    anchors, start, order, mode, esrc, edst, nvars, iso, dup,
    rng_off, rng_var, rng_upper, rng_c, chk_off, chk_x, chk_y, chk_c, sig_side,
    t, end, src, dst, nvertices,
    seg_base, out_off, in_off, pair_off, table_keys, table_ids, bitset, hbits,
    sig_out, sig_in, words,
    l_idx, l_t, l_end, l_src, l_dst, l_ok,
    out_rows, scratch, resume, count_only,
):
    """Enumerate matches anchored at window edges ``anchors[start:]`` into ``out_rows``.

    Level ``d`` binds query edge ``order[d]``. Its start time must lie in the range given
    by ``rng_*[rng_off[d]:rng_off[d+1]]`` (``val[var] + c`` as an upper bound when
    ``rng_upper``, else ``val[var] - c`` as a lower bound), and the explicit checks
    ``chk_*[chk_off[d]:chk_off[d+1]]`` (``val[x] - val[y] <= c``) must hold; ``val`` holds
    the start (``2q``) and end (``2q+1``) of every bound query edge and 0 for the origin
    (``2k``). ``seg_base[mode]`` is where that grouping starts in the layout ``l_*``.

    Everything runs in this one function on purpose: numba passes each array argument of
    a call that LLVM does not inline with reference-count updates, and with this many
    arrays a helper call per candidate cost more than the search itself.

    The search stops when ``out_rows`` is full and can go on where it stopped: the
    backtracking state lives in ``scratch`` (``int64[scratch_size(nvars, k)]``, kept by
    the caller between calls), so a batch with billions of matches comes out in buffers
    of a fixed size. ``resume`` is the third value the previous call returned.
    ``count_only`` counts matches without writing them (``out_rows`` may then be empty).

    Returns ``(next_anchor, rows, suspended)``: ``rows`` matches were written (counted);
    ``next_anchor < len(anchors)`` or ``suspended`` means the buffer filled up and the
    caller must take the rows out and call again from ``next_anchor`` with ``resume`` set
    to ``suspended`` (True: inside that anchor's search, a match found and not yet
    written).
    """
    k = order.shape[0]
    cap = out_rows.shape[0]
    rows = 0
    bind = scratch[0:nvars]
    at = nvars
    bound_edge = scratch[at:at + k]
    at += k
    val = scratch[at:at + 2 * k + 1]
    at += 2 * k + 1
    cur = scratch[at:at + k]
    at += k
    stop = scratch[at:at + k]
    at += k
    hi_t = scratch[at:at + k]
    at += k
    newv = scratch[at:at + 2 * k].reshape((k, 2))
    if not resume:
        val[:] = 0
    filtered = l_ok.shape[0] > 0
    a_q = order[0]
    pending = resume
    depth = 0
    opening = False
    for ai in range(start, anchors.shape[0]):
        anchor = anchors[ai]
        if pending:  # back inside the search that filled the previous buffer, at a leaf
            depth = k - 1
            opening = False
        else:
            for var in range(nvars):
                bind[var] = -1
            for level in range(k):
                bound_edge[order[level]] = -1
                newv[level, 0] = -1
                newv[level, 1] = -1
            # level 0: the anchor edge itself
            val[2 * a_q] = t[anchor]
            val[2 * a_q + 1] = end[anchor]
            ok = True
            for j in range(chk_off[0], chk_off[1]):
                if val[chk_x[j]] - val[chk_y[j]] > chk_c[j]:
                    ok = False
                    break
            if not ok:
                continue
            sv = src[anchor]
            dv = dst[anchor]
            if esrc[a_q] == edst[a_q]:
                if sv != dv:
                    continue
                bind[esrc[a_q]] = sv
            else:
                if iso and sv == dv:
                    continue
                bind[esrc[a_q]] = sv
                bind[edst[a_q]] = dv
            bound_edge[a_q] = anchor
            if k == 1:
                if not count_only:
                    if rows >= cap:
                        return ai, rows, False
                    out_rows[rows, a_q] = anchor
                rows += 1
                continue
            depth = 1
            opening = True
        while depth >= 1:
            if pending:  # the match found when the previous buffer was full
                pending = False
                for qq in range(k):
                    out_rows[rows, qq] = bound_edge[qq]
                rows += 1
                continue
            q = order[depth]
            if opening:
                # -- set the scan range of this level from the bindings so far --------
                opening = False
                cur[depth] = 0
                stop[depth] = 0
                m = mode[depth]
                base = seg_base[m]
                a = 0
                b = 0
                if m == MODE_PAIR:  # cheap existence tests first: most pairs have no edge
                    u = bind[esrc[q]]
                    v = bind[edst[q]]
                    maybe = (_in_signature(sig_out, u, v, words) if sig_side[depth] == 0
                             else _in_signature(sig_in, v, u, words))
                    if not maybe:
                        depth -= 1
                        continue
                    pid = _find_pair(u, v, nvertices, table_keys, table_ids, bitset, hbits)
                    if pid < 0:
                        depth -= 1
                        continue
                    a = base + pair_off[pid]
                    b = base + pair_off[pid + 1]
                elif m == MODE_OUT:
                    u = bind[esrc[q]]
                    a = base + out_off[u]
                    b = base + out_off[u + 1]
                elif m == MODE_IN:
                    v = bind[edst[q]]
                    a = base + in_off[v]
                    b = base + in_off[v + 1]
                else:
                    a = base
                    b = base + anchor
                lo = -_INF
                hi = _INF
                for j in range(rng_off[depth], rng_off[depth + 1]):
                    bound = val[rng_var[j]]
                    if rng_upper[j]:
                        hi = min(hi, bound + rng_c[j])
                    else:
                        lo = max(lo, bound - rng_c[j])
                if lo > hi:
                    depth -= 1
                    continue
                hi_t[depth] = hi
                while a < b:  # first position with start >= lo (groups are time-sorted)
                    mid = (a + b) >> 1
                    if l_t[mid] < lo:
                        a = mid + 1
                    else:
                        b = mid
                cur[depth] = a
                if m == MODE_PAIR:
                    stop[depth] = base + pair_off[pid + 1]
                elif m == MODE_OUT:
                    stop[depth] = base + out_off[bind[esrc[q]] + 1]
                elif m == MODE_IN:
                    stop[depth] = base + in_off[bind[edst[q]] + 1]
                else:
                    stop[depth] = base + anchor
            elif bound_edge[q] >= 0:  # undo the previous candidate's bindings
                for j in range(2):
                    if newv[depth, j] >= 0:
                        bind[newv[depth, j]] = -1
                        newv[depth, j] = -1
                bound_edge[q] = -1
            # -- next candidate at this level -----------------------------------------
            found = False
            hi = hi_t[depth]
            vs = esrc[q]
            vd = edst[q]
            # look ahead: when the next level needs an edge between two vertices this
            # candidate determines, test that pair's signature before anything else --
            # it rejects most candidates with one cached memory access
            lookahead = depth + 1 < k and mode[depth + 1] == MODE_PAIR
            if lookahead:
                q2 = order[depth + 1]
                u_var = esrc[q2]
                v_var = edst[q2]
                side = sig_side[depth + 1]
            p = cur[depth] - 1
            end_p = stop[depth]
            while p + 1 < end_p:
                p += 1
                c = l_idx[p]
                if c >= anchor or l_t[p] > hi:
                    p = end_p
                    break
                if lookahead:
                    sv = l_src[p]
                    dv = l_dst[p]
                    u = sv if u_var == vs else (dv if u_var == vd else bind[u_var])
                    v = sv if v_var == vs else (dv if v_var == vd else bind[v_var])
                    maybe = (_in_signature(sig_out, u, v, words) if side == 0
                             else _in_signature(sig_in, v, u, words))
                    if not maybe:
                        continue
                if filtered and l_ok[q, p] == 0:
                    continue
                if dup[depth]:
                    seen = False
                    for level in range(depth):
                        if bound_edge[order[level]] == c:
                            seen = True
                            break
                    if seen:
                        continue
                val[2 * q] = l_t[p]
                val[2 * q + 1] = l_end[p]
                ok = True
                for j in range(chk_off[depth], chk_off[depth + 1]):
                    if val[chk_x[j]] - val[chk_y[j]] > chk_c[j]:
                        ok = False
                        break
                if not ok:
                    continue
                # bind the endpoints: equal to earlier bindings, or new and (iso) unused
                sv = l_src[p]
                dv = l_dst[p]
                if vs == vd and sv != dv:
                    continue
                new_s = bind[vs] < 0
                new_d = vd != vs and bind[vd] < 0
                if not new_s and bind[vs] != sv:
                    continue
                if vd != vs and not new_d and bind[vd] != dv:
                    continue
                if iso:
                    if new_s and new_d and sv == dv:
                        continue
                    clash = False
                    for var in range(nvars):
                        w = bind[var]
                        if (new_s and w == sv) or (new_d and w == dv):
                            clash = True
                            break
                    if clash:
                        continue
                if new_s:
                    bind[vs] = sv
                    newv[depth, 0] = vs
                if new_d:
                    bind[vd] = dv
                    newv[depth, 1] = vd
                bound_edge[q] = c
                found = True
                break
            cur[depth] = p + 1
            if not found:
                depth -= 1
                continue
            if depth == k - 1:
                if count_only:
                    rows += 1
                    continue
                if rows >= cap:  # full: this match goes first in the next buffer
                    return ai, rows, True
                for qq in range(k):
                    out_rows[rows, qq] = bound_edge[qq]
                rows += 1
                continue
            depth += 1
            opening = True
    return anchors.shape[0], rows, False
