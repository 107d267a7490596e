"""The coloring engine's upkeep compiled (numba): COLOR-EDGE over arrays.

:mod:`graphcep.engines.ddst.coloring` explains the algorithm; this module holds its per-edge
part -- black edges arriving and departing, hosting, recoloring, red components by
union-find -- as compiled loops over integer arrays, so that an edge costs a fraction of a
microsecond instead of several microseconds of Python objects and dicts. Everything that
runs only at a trigger (the local rounds, the refinement, Algorithm DDST) stays in Python.

State: int64 matrices whose rows are fields (the constants below) and whose columns are
edge rows (``E``), vertex rows (``V``) and union-find nodes (``N``, each root also holding
its component's record, with per-query-edge ``countMap`` and earliest and latest times in
``CT``); ``CNT[side, v, f]`` counts a vertex's black out- (side 0) and in-edges (side 1)
by fit set, fit sets being numbered (``fitmask[f]``); ``S`` holds scalars; ``efree`` and
``nfree`` are free stacks of edge rows and nodes. A vertex without edges has every count 0
and hosts nothing: it is the same as a vertex the window does not hold, so the engine
frees vertex rows between batches, never inside this module. Query edges and vertices are
bits of int64 masks: at most 62 of each.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphcep.engines.ddst.kernel import distinct

INT_MIN = np.iinfo(np.int64).min
INT_MAX = np.iinfo(np.int64).max

# edge fields (rows of E)
T, SEQ, NUM, SRC, DST, FID, FITS, RED, NODE, OUT_NEXT, IN_NEXT, FIFO_NEXT, ALIVE_NEXT, \
    ALIVE_PREV = range(14)
EDGE_FIELDS = 14
# vertex fields (rows of V)
HOSTS, RED_DEG, ANCHOR, OUT_HEAD, OUT_TAIL, IN_HEAD, IN_TAIL, DEG_OUT, DEG_IN = range(9)
VERTEX_FIELDS = 9
# node fields (rows of N); the C_ ones are a root's component record
PARENT, EDGE, NSEQ, NLIVE, MEM_NEXT, C_NEED, C_LIVE, C_DEAD, C_SPLIT, C_MEMBERS, C_MEM_HEAD, \
    C_MEM_TAIL, C_ALIVE_HEAD, ALLOC = range(14)
NODE_FIELDS = 14
# CT planes
COUNT, FIRST, LAST = range(3)
# scalars
FIFO_HEAD, FIFO_TAIL, FIFO_LEN, EFREE_N, NFREE_N, NODES_USED = range(6)
SCALARS = 6
# query parameters (P)
P_NE, P_NV, P_NO_IN, P_NO_OUT, P_LAST, P_COUNT_WINDOW, P_SIZE, P_SLACK, P_ORDERED = range(9)
# what :func:`run` stopped for
DONE, TRIGGER, NEED_NODES = 0, 1, 2


# -- distinct representatives ---------------------------------------------------------------


@nb.njit(cache=True, nogil=True)
def representatives(masks: np.ndarray, counts: np.ndarray, want: int) -> bool:
    """Whether the query edges ``want`` (a bit mask) can take pairwise distinct edges,
    given ``counts[i]`` edges whose fit (or match) set is ``masks[i]``: Hall's condition up
    to 4 query edges, a bipartite matching beyond (:func:`kernel.distinct`, over at most
    ``len(want)`` copies of each fit set: more copies never help)."""
    if want == 0:
        return True
    if not want & (want - 1):
        for i in range(len(masks)):  # noqa: SIM110 -- numba compiles loops, not any()
            if counts[i] > 0 and masks[i] & want:
                return True
        return False
    bits = np.empty(64, dtype=np.int64)
    n = 0
    for j in range(63):
        if want >> j & 1:
            bits[n] = j
            n += 1
    if n <= 4:
        for pick in range(1, 1 << n):
            sub, size = 0, 0
            for i in range(n):
                if pick >> i & 1:
                    sub |= 1 << bits[i]
                    size += 1
            total = 0
            for i in range(len(masks)):
                if counts[i] > 0 and masks[i] & sub:
                    total += counts[i]
            if total < size:
                return False
        return True
    slots = 0
    for i in range(len(masks)):
        if counts[i] > 0 and masks[i] & want:
            slots += min(counts[i], n)
    if slots < n:
        return False
    cand = np.zeros((n, slots), dtype=np.bool_)  # query edge x distinct edge it may take
    k = 0
    for i in range(len(masks)):
        if counts[i] > 0 and masks[i] & want:
            for _ in range(min(counts[i], n)):
                for x in range(n):
                    cand[x, k] = masks[i] >> bits[x] & 1
                k += 1
    return distinct(cand)


@nb.njit(cache=True, nogil=True)
def _side_hosts(cnt: np.ndarray, fitmask: np.ndarray, want: int) -> bool:
    return representatives(fitmask, cnt[: len(fitmask)], want)


@nb.njit(cache=True, nogil=True)
def hosts_query_vertex(V, CNT, fitmask, out_want, in_want, v, s) -> bool:
    """Whether vertex row ``v``'s black edges give query vertex ``s`` distinct edges."""
    ow, iw = out_want[s], in_want[s]
    if ow and (V[DEG_OUT, v] == 0 or not _side_hosts(CNT[0, v], fitmask, ow)):
        return False
    return not (iw and (V[DEG_IN, v] == 0 or not _side_hosts(CNT[1, v], fitmask, iw)))


@nb.njit(cache=True, nogil=True)
def hosts_by_red(E, V, out_want, in_want, v, s) -> bool:
    """Round 1 of the local rounds at ``v``: whether its red edges, by match set, give
    query vertex ``s`` distinct partners."""
    for side in range(2):
        want = out_want[s] if side == 0 else in_want[s]
        if not want:
            continue
        head = V[OUT_HEAD, v] if side == 0 else V[IN_HEAD, v]
        deg = V[DEG_OUT, v] if side == 0 else V[DEG_IN, v]
        masks = np.empty(deg, dtype=np.int64)
        counts = np.zeros(deg, dtype=np.int64)
        k = 0
        e = head
        while e >= 0:
            m = E[RED, e]
            if m:
                at = -1
                for i in range(k):
                    if masks[i] == m:
                        at = i
                        break
                if at < 0:
                    masks[k] = m
                    at = k
                    k += 1
                counts[at] += 1
            e = E[OUT_NEXT, e] if side == 0 else E[IN_NEXT, e]
        if not representatives(masks[:k], counts[:k], want):
            return False
    return True


# -- union-find and red components ---------------------------------------------------------


@nb.njit(cache=True, nogil=True)
def find(N, node) -> int:
    """The master node of ``node``'s component, compressing the chain."""
    root = node
    while N[PARENT, root] != root:
        root = N[PARENT, root]
    while N[PARENT, node] != root:
        nxt = N[PARENT, node]
        N[PARENT, node] = root
        node = nxt
    return root


@nb.njit(cache=True, nogil=True)
def _free_node(N, S, nfree, node) -> None:
    N[ALLOC, node] = 0
    nfree[S[NFREE_N]] = node
    S[NFREE_N] += 1
    S[NODES_USED] -= 1


@nb.njit(cache=True, nogil=True)
def _new_component(N, CT, node, ne) -> None:
    N[C_NEED, node] = (1 << ne) - 1
    N[C_LIVE, node] = 0
    N[C_DEAD, node] = 0
    N[C_SPLIT, node] = 0
    N[C_MEMBERS, node] = 0
    N[C_MEM_HEAD, node] = -1
    N[C_MEM_TAIL, node] = -1
    N[C_ALIVE_HEAD, node] = -1
    CT[COUNT, node, :] = 0
    CT[FIRST, node, :] = INT_MAX
    CT[LAST, node, :] = INT_MIN


@nb.njit(cache=True, nogil=True)
def _add_member(N, root, node) -> None:
    N[MEM_NEXT, node] = -1
    if N[C_MEM_TAIL, root] < 0:
        N[C_MEM_HEAD, root] = node
    else:
        N[MEM_NEXT, N[C_MEM_TAIL, root]] = node
    N[C_MEM_TAIL, root] = node
    N[C_MEMBERS, root] += 1


@nb.njit(cache=True, nogil=True)
def _link_alive(E, N, root, e) -> None:
    head = N[C_ALIVE_HEAD, root]
    E[ALIVE_PREV, e] = -1
    E[ALIVE_NEXT, e] = head
    if head >= 0:
        E[ALIVE_PREV, head] = e
    N[C_ALIVE_HEAD, root] = e
    N[C_LIVE, root] += 1


@nb.njit(cache=True, nogil=True)
def _unlink_alive(E, N, root, e) -> None:
    prev, nxt = E[ALIVE_PREV, e], E[ALIVE_NEXT, e]
    if prev >= 0:
        E[ALIVE_NEXT, prev] = nxt
    else:
        N[C_ALIVE_HEAD, root] = nxt
    if nxt >= 0:
        E[ALIVE_PREV, nxt] = prev
    N[C_LIVE, root] -= 1


@nb.njit(cache=True, nogil=True)
def alive_rows(E, N, root) -> np.ndarray:
    """The edge rows of a component's red edges (any order)."""
    out = np.empty(N[C_LIVE, root], dtype=np.int64)
    e, k = N[C_ALIVE_HEAD, root], 0
    while e >= 0:
        out[k] = e
        k += 1
        e = E[ALIVE_NEXT, e]
    return out


@nb.njit(cache=True, nogil=True)
def _union(E, N, CT, a, b, ne) -> int:
    """Lines 11-14: merge two components; the larger one's master stays (ties: ``a``)."""
    if N[C_MEMBERS, b] > N[C_MEMBERS, a]:
        a, b = b, a
    N[PARENT, b] = a
    _merge_alive(E, N, a, b)
    for j in range(ne):
        CT[COUNT, a, j] += CT[COUNT, b, j]
        CT[FIRST, a, j] = min(CT[FIRST, a, j], CT[FIRST, b, j])
        CT[LAST, a, j] = max(CT[LAST, a, j], CT[LAST, b, j])
    N[C_NEED, a] &= N[C_NEED, b]
    if N[C_MEM_HEAD, b] >= 0:  # b's members after a's
        if N[C_MEM_TAIL, a] < 0:
            N[C_MEM_HEAD, a] = N[C_MEM_HEAD, b]
        else:
            N[MEM_NEXT, N[C_MEM_TAIL, a]] = N[C_MEM_HEAD, b]
        N[C_MEM_TAIL, a] = N[C_MEM_TAIL, b]
    N[C_MEMBERS, a] += N[C_MEMBERS, b]
    N[C_DEAD, a] += N[C_DEAD, b]
    N[C_SPLIT, a] |= N[C_SPLIT, b]
    return a


@nb.njit(cache=True, nogil=True)
def _merge_alive(E, N, a, b) -> None:
    """Move ``b``'s red edges into ``a``'s list (before the union makes ``b`` a member)."""
    e = N[C_ALIVE_HEAD, b]
    while e >= 0:
        nxt = E[ALIVE_NEXT, e]
        _link_alive(E, N, a, e)
        e = nxt
    N[C_ALIVE_HEAD, b] = -1
    N[C_LIVE, b] = 0


@nb.njit(cache=True, nogil=True)
def _join(E, V, N, CT, S, nfree, e, ne) -> int:
    """Lines 7-18: a black edge turns red: find the masters at both ends; join, merge, or
    start a component. Returns its root."""
    S[NFREE_N] -= 1
    node = nfree[S[NFREE_N]]
    S[NODES_USED] += 1
    N[ALLOC, node] = 1
    N[NLIVE, node] = 1
    N[EDGE, node] = e
    N[NSEQ, node] = E[SEQ, e]
    E[NODE, e] = node
    r0, r1 = -1, -1
    for k in range(2):
        v = E[SRC, e] if k == 0 else E[DST, e]
        if V[RED_DEG, v]:
            r = find(N, V[ANCHOR, v])
            if r0 < 0:
                r0 = r
            elif r != r0:
                r1 = r
    if r0 < 0:
        root = node
        _new_component(N, CT, node, ne)
    elif r1 < 0:
        root = r0
    else:
        root = _union(E, N, CT, r0, r1, ne)
    N[PARENT, node] = root
    _add_member(N, root, node)
    _link_alive(E, N, root, e)
    for k in range(2):
        v = E[SRC, e] if k == 0 else E[DST, e]
        if not V[RED_DEG, v]:
            V[ANCHOR, v] = node
        V[RED_DEG, v] += 1
    return root


@nb.njit(cache=True, nogil=True)
def _add_red(E, V, N, CT, S, nfree, e, bits, ne) -> None:
    root = find(N, E[NODE, e]) if E[RED, e] else _join(E, V, N, CT, S, nfree, e, ne)
    E[RED, e] |= bits
    t = E[T, e]
    for j in range(ne):
        if bits >> j & 1:
            CT[COUNT, root, j] += 1
            if CT[COUNT, root, j] == 1:
                N[C_NEED, root] &= ~(1 << j)
            CT[FIRST, root, j] = min(CT[FIRST, root, j], t)
            CT[LAST, root, j] = max(CT[LAST, root, j], t)


@nb.njit(cache=True, nogil=True)
def _remove_red(E, V, N, CT, S, nfree, e, bits, P, scratch) -> None:
    """Remove query edges from ``e``'s match set; an emptied one deletes ``e`` logically."""
    ne = P[P_NE]
    root = find(N, E[NODE, e])
    for j in range(ne):
        if bits >> j & 1:
            CT[COUNT, root, j] -= 1
            if CT[COUNT, root, j] == 0:
                N[C_NEED, root] |= 1 << j
    E[RED, e] &= ~bits
    if E[RED, e]:
        return
    N[NLIVE, E[NODE, e]] = 0
    E[NODE, e] = -1
    _unlink_alive(E, N, root, e)
    N[C_DEAD, root] += 1
    src, dst = E[SRC, e], E[DST, e]
    for k in range(2):
        v = src if k == 0 else dst
        V[RED_DEG, v] -= 1
        if not V[RED_DEG, v]:
            V[ANCHOR, v] = -1
    # a pendant edge or a self-loop holds no path between other red edges
    if src != dst and V[RED_DEG, src] and V[RED_DEG, dst]:
        N[C_SPLIT, root] = 1
    if N[C_LIVE, root] == 0:
        _drop(N, S, nfree, root)
    elif N[C_DEAD, root] > N[C_LIVE, root] + P[P_SLACK]:
        rebuild(E, V, N, CT, S, nfree, root, ne, scratch)


@nb.njit(cache=True, nogil=True)
def _drop(N, S, nfree, root) -> None:
    """Forget a component with no red edge left (nothing points into it any more)."""
    node = N[C_MEM_HEAD, root]
    while node >= 0:
        nxt = N[MEM_NEXT, node]
        _free_node(N, S, nfree, node)
        node = nxt


@nb.njit(cache=True, nogil=True)
def _top(up, v) -> int:
    while up[v] != v:
        up[v] = up[up[v]]
        v = up[v]
    return v


@nb.njit(cache=True, nogil=True)
def rebuild(E, V, N, CT, S, nfree, root, ne, scratch) -> None:
    """Regroup a component's red edges into their true components; free deleted nodes.

    ``O(size)``. The old master stays master of its part if its edge is still red; other
    parts get their earliest edge's node as master. ``scratch``: -1 per vertex row, left so.
    """
    rows = alive_rows(E, N, root)
    nums = np.empty(len(rows), dtype=np.int64)
    for i in range(len(rows)):
        nums[i] = E[NUM, rows[i]]
    rows = rows[np.argsort(nums)]  # arrival order
    node = N[C_MEM_HEAD, root]
    while node >= 0:  # deleted nodes go (the master too, when its edge is gone)
        nxt = N[MEM_NEXT, node]
        if not N[NLIVE, node]:
            _free_node(N, S, nfree, node)
        node = nxt
    # parts: union-find over the edges' ends, numbered locally through scratch
    m = len(rows)
    up = np.arange(2 * m)
    ends = np.empty(2 * m, dtype=np.int64)
    nloc = 0
    for i in range(m):
        for k in range(2):
            v = E[SRC, rows[i]] if k == 0 else E[DST, rows[i]]
            if scratch[v] < 0:
                scratch[v] = nloc
                nloc += 1
            ends[2 * i + k] = scratch[v]
    for i in range(m):
        scratch[E[SRC, rows[i]]] = -1
        scratch[E[DST, rows[i]]] = -1
        a, b = _top(up, ends[2 * i]), _top(up, ends[2 * i + 1])
        if a != b:
            up[b] = a
    part = np.empty(m, dtype=np.int64)
    master_of = np.full(nloc, -1, dtype=np.int64)
    for i in range(m):
        p = part[i] = _top(up, ends[2 * i])
        node = E[NODE, rows[i]]
        if master_of[p] < 0 or node == root:
            master_of[p] = node
    for p in range(nloc):
        if master_of[p] >= 0:
            _new_component(N, CT, master_of[p], ne)
    for i in range(m):
        e, master = rows[i], master_of[part[i]]
        N[PARENT, E[NODE, e]] = master
        _add_member(N, master, E[NODE, e])
        _link_alive(E, N, master, e)
        V[ANCHOR, E[SRC, e]] = master
        V[ANCHOR, E[DST, e]] = master
        red, t = E[RED, e], E[T, e]
        for j in range(ne):
            if red >> j & 1:
                CT[COUNT, master, j] += 1
                CT[FIRST, master, j] = min(CT[FIRST, master, j], t)
                CT[LAST, master, j] = max(CT[LAST, master, j], t)
    for p in range(nloc):
        master = master_of[p]
        if master >= 0:
            need = 0
            for j in range(ne):
                if CT[COUNT, master, j] == 0:
                    need |= 1 << j
            N[C_NEED, master] = need


# -- coloring ------------------------------------------------------------------------------


@nb.njit(cache=True, nogil=True)
def _recolor(E, V, N, CT, S, nfree, Q, P, scratch, e, which) -> None:
    """Set ``e``'s red bits among ``which``: red for ``q`` when both ends can host."""
    esrc, edst = Q[0], Q[1]
    hs, hd = V[HOSTS, E[SRC, e]], V[HOSTS, E[DST, e]]
    red = 0
    for j in range(P[P_NE]):
        if which >> j & 1 and hs >> esrc[j] & 1 and hd >> edst[j] & 1:
            red |= 1 << j
    now = E[RED, e] & which
    if red & ~now:
        _add_red(E, V, N, CT, S, nfree, e, red & ~now, P[P_NE])
    if now & ~red:
        _remove_red(E, V, N, CT, S, nfree, e, now & ~red, P, scratch)


@nb.njit(cache=True, nogil=True)
def _recolor_at(E, V, N, CT, S, nfree, Q, P, scratch, v, flips) -> None:
    """Recolor the edges at ``v`` for the query edges of the query vertices that flipped."""
    out_want, in_want = Q[2], Q[3]
    outs, ins = 0, 0
    for s in range(P[P_NV]):
        if flips >> s & 1:
            outs |= out_want[s]
            ins |= in_want[s]
    if outs:
        e = V[OUT_HEAD, v]
        while e >= 0:
            if E[FITS, e] & outs:
                _recolor(E, V, N, CT, S, nfree, Q, P, scratch, e, E[FITS, e] & outs)
            e = E[OUT_NEXT, e]
    if ins:
        e = V[IN_HEAD, v]
        while e >= 0:
            if E[FITS, e] & ins:
                _recolor(E, V, N, CT, S, nfree, Q, P, scratch, e, E[FITS, e] & ins)
            e = E[IN_NEXT, e]


@nb.njit(cache=True, nogil=True)
def _gain(V, CNT, Q, P, v, roles) -> int:
    """After an arrival at ``v``: which of ``roles``, not hosted there yet, it now hosts."""
    flips = 0
    for s in range(P[P_NV]):
        if roles >> s & 1 and hosts_query_vertex(V, CNT, Q[4], Q[2], Q[3], v, s):
            flips |= 1 << s
    V[HOSTS, v] |= flips
    return flips


@nb.njit(cache=True, nogil=True)
def _lose(E, V, N, CT, CNT, S, nfree, Q, P, scratch, v, roles) -> None:
    """After a departure at ``v``: the query vertices among ``roles`` it can no longer host
    stop being hosted, and the edges around it are recolored."""
    flips = 0
    roles &= V[HOSTS, v]
    for s in range(P[P_NV]):
        if roles >> s & 1 and not hosts_query_vertex(V, CNT, Q[4], Q[2], Q[3], v, s):
            flips |= 1 << s
    if flips:
        V[HOSTS, v] &= ~flips
        _recolor_at(E, V, N, CT, S, nfree, Q, P, scratch, v, flips)


@nb.njit(cache=True, nogil=True)
def _arrive(E, V, N, CT, CNT, S, nfree, Q, P, scratch, e) -> None:
    """Lines 1-23 for a black edge ``e`` (its row filled): count it at its ends, link it
    into their lists and the window's, color it, then its neighbours."""
    a, b, f = E[SRC, e], E[DST, e], E[FID, e]
    E[OUT_NEXT, e] = -1
    E[IN_NEXT, e] = -1
    E[FIFO_NEXT, e] = -1
    E[RED, e] = 0
    E[NODE, e] = -1
    if S[FIFO_TAIL] < 0:
        S[FIFO_HEAD] = e
    else:
        E[FIFO_NEXT, S[FIFO_TAIL]] = e
    S[FIFO_TAIL] = e
    S[FIFO_LEN] += 1
    CNT[0, a, f] += 1
    if V[OUT_TAIL, a] < 0:
        V[OUT_HEAD, a] = e
    else:
        E[OUT_NEXT, V[OUT_TAIL, a]] = e
    V[OUT_TAIL, a] = e
    V[DEG_OUT, a] += 1
    CNT[1, b, f] += 1
    if V[IN_TAIL, b] < 0:
        V[IN_HEAD, b] = e
    else:
        E[IN_NEXT, V[IN_TAIL, b]] = e
    V[IN_TAIL, b] = e
    V[DEG_IN, b] += 1
    # what may start hosting: not hosted yet, and, at an end with edges on one side only
    # (a vertex new to the window), needing no edge on the other side
    src_roles, dst_roles = Q[5], Q[6]
    roles = src_roles[f] & ~V[HOSTS, a]
    if not V[DEG_IN, a]:
        roles &= P[P_NO_IN]
    up_src = _gain(V, CNT, Q, P, a, roles) if roles else 0
    roles = dst_roles[f] & ~V[HOSTS, b]
    if not V[DEG_OUT, b]:
        roles &= P[P_NO_OUT]
    up_dst = _gain(V, CNT, Q, P, b, roles) if roles else 0
    if V[HOSTS, a] and V[HOSTS, b]:  # the new edge first (lines 5-20), as the master rule needs
        _recolor(E, V, N, CT, S, nfree, Q, P, scratch, e, E[FITS, e])
    if up_src:
        _recolor_at(E, V, N, CT, S, nfree, Q, P, scratch, a, up_src)
    if up_dst:
        _recolor_at(E, V, N, CT, S, nfree, Q, P, scratch, b, up_dst)


@nb.njit(cache=True, nogil=True)
def _depart(E, V, N, CT, CNT, S, nfree, efree, Q, P, scratch) -> None:
    """The oldest edge leaves the window: delete it logically, recolor around its ends."""
    e = S[FIFO_HEAD]
    S[FIFO_HEAD] = E[FIFO_NEXT, e]
    if S[FIFO_HEAD] < 0:
        S[FIFO_TAIL] = -1
    S[FIFO_LEN] -= 1
    if E[RED, e]:
        _remove_red(E, V, N, CT, S, nfree, e, E[RED, e], P, scratch)
    a, b, f = E[SRC, e], E[DST, e], E[FID, e]
    CNT[0, a, f] -= 1  # the oldest edge anywhere, so the oldest at both ends
    V[OUT_HEAD, a] = E[OUT_NEXT, e]
    if V[OUT_HEAD, a] < 0:
        V[OUT_TAIL, a] = -1
    V[DEG_OUT, a] -= 1
    CNT[1, b, f] -= 1
    V[IN_HEAD, b] = E[IN_NEXT, e]
    if V[IN_HEAD, b] < 0:
        V[IN_TAIL, b] = -1
    V[DEG_IN, b] -= 1
    efree[S[EFREE_N]] = e
    S[EFREE_N] += 1
    E[NUM, e] = -1  # not in the window
    src_roles, dst_roles = Q[5], Q[6]
    if V[HOSTS, a]:
        _lose(E, V, N, CT, CNT, S, nfree, Q, P, scratch, a, src_roles[f])
    if V[HOSTS, b]:
        _lose(E, V, N, CT, CNT, S, nfree, Q, P, scratch, b, dst_roles[f])


@nb.njit(cache=True, nogil=True)
def expire(E, V, N, CT, CNT, S, nfree, efree, Q, P, scratch, num, now) -> None:
    """Departures before arrival ``num`` at time ``now`` (oldest first)."""
    size = P[P_SIZE]
    if P[P_COUNT_WINDOW]:
        while S[FIFO_HEAD] >= 0 and E[NUM, S[FIFO_HEAD]] <= num - size:
            _depart(E, V, N, CT, CNT, S, nfree, efree, Q, P, scratch)
    else:
        while S[FIFO_HEAD] >= 0 and E[T, S[FIFO_HEAD]] < now - size:
            _depart(E, V, N, CT, CNT, S, nfree, efree, Q, P, scratch)


# -- tests 1-3 -----------------------------------------------------------------------------


@nb.njit(cache=True, nogil=True)
def bounds_meet(first, last, t, pin, topo, pre_ptr, pre_idx, post_ptr, post_idx) -> bool:
    """Earliest times forward along ``≺``, latest backward, with the pin at ``t``: every
    query edge's range non-empty."""
    ne = len(topo)
    lo = np.zeros(ne, dtype=np.int64)
    for k in range(ne):
        j = topo[k]
        x = t if j == pin else first[j]
        for i in range(pre_ptr[j], pre_ptr[j + 1]):
            x = max(x, lo[pre_idx[i]] + 1)
        lo[j] = x
    hi = np.zeros(ne, dtype=np.int64)
    for k in range(ne - 1, -1, -1):
        j = topo[k]
        x = t if j == pin else last[j]
        for i in range(post_ptr[j], post_ptr[j + 1]):
            x = min(x, hi[post_idx[i]] - 1)
        if x < lo[j]:
            return False
        hi[j] = x
    return True


@nb.njit(cache=True, nogil=True)
def timing_possible(first, last, t, pins, ordered, topo, pre_ptr, pre_idx, post_ptr,
                    post_idx) -> bool:
    """Whether some query edge in ``pins``, at time ``t``, can have a timing witness."""
    if not ordered:
        return True
    for pin in range(len(topo)):
        if pins >> pin & 1 and bounds_meet(first, last, t, pin, topo, pre_ptr, pre_idx,
                                           post_ptr, post_idx):
            return True
    return False


# -- a batch -------------------------------------------------------------------------------


@nb.njit(cache=True, nogil=True)
def run(E, V, N, CT, CNT, S, nfree, efree, Q, P, scratch, rows, nums, start) -> tuple:
    """Arrivals ``start..`` of a batch's black edges (``rows``, their fields filled; ``nums``
    their arrival numbers): expire, color, and stop at an edge that passes tests 1-3
    (``TRIGGER``, the engine verifies it and calls again from the next) or before an edge
    that may need more union-find nodes than are free (``NEED_NODES``, from this one).
    Returns ``(what, index)``; ``(DONE, len(rows))`` at the end."""
    topo, pre_ptr, pre_idx, post_ptr, post_idx = Q[7], Q[8], Q[9], Q[10], Q[11]
    for i in range(start, len(rows)):
        e = rows[i]
        expire(E, V, N, CT, CNT, S, nfree, efree, Q, P, scratch, nums[i], E[T, e])
        a, b = E[SRC, e], E[DST, e]
        room = 4 + V[DEG_OUT, a] + V[DEG_IN, a] + V[DEG_OUT, b] + V[DEG_IN, b]
        if S[NFREE_N] < room:
            return NEED_NODES, i
        E[NUM, e] = nums[i]
        _arrive(E, V, N, CT, CNT, S, nfree, Q, P, scratch, e)
        pins = E[RED, e] & P[P_LAST]
        if pins:
            root = find(N, E[NODE, e])
            if N[C_NEED, root] == 0 and timing_possible(
                    CT[FIRST, root], CT[LAST, root], E[T, e], pins, P[P_ORDERED], topo,
                    pre_ptr, pre_idx, post_ptr, post_idx):
                return TRIGGER, i
    return DONE, len(rows)


@nb.njit(cache=True, nogil=True)
def edges_at(E, V, v) -> np.ndarray:
    """The edge rows at vertex row ``v``: its out-edges, then its in-edges, oldest first."""
    out = np.empty(V[DEG_OUT, v] + V[DEG_IN, v], dtype=np.int64)
    k = 0
    e = V[OUT_HEAD, v]
    while e >= 0:
        out[k] = e
        k += 1
        e = E[OUT_NEXT, e]
    e = V[IN_HEAD, v]
    while e >= 0:
        out[k] = e
        k += 1
        e = E[IN_NEXT, e]
    return out
