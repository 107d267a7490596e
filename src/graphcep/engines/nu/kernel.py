"""The token game of :mod:`graphcep.engines.nu.engine`, compiled (numba).

Same rules, same order, other representation: a token is one int64 row (see
:mod:`graphcep.engines.nu.tables`), the stored tokens a growing array of rows in the order
they were stored, and

- an **index** from each node to the stored tokens that may read it next (one singly
  linked list of entries per node, plus one for tokens any node may advance), appended in
  storage order so that a link's candidates come out in that order by merging two lists;
  entries of expired tokens are unlinked when a walk meets them;
- a **hash table** over the tokens' identity fields, for the paper's deduplication (a
  produced token equal to a stored one is not stored again);

(The hash tables hold ``slot + 1`` and ``key + 1``, 0 for an empty place, so that they can
be allocated zeroed: the system hands out zero pages as they are first touched, and a
large table costs nothing until used. The token rows are allocated uninitialized for the
same reason, for the state bound's worth of tokens at once.)
- a **stamp** per token: the number of the link that last produced it, so that a token
  produced twice while one link is read is reported once.

:func:`read_links` reads links until one needs more room than the arrays have (the link
is then undone, and the caller grows the arrays and calls again from it), or the stored
tokens pass ``limit`` (the caller sweeps expired ones and checks its state bound). Expired
tokens stay in their rows until the caller sweeps (:func:`rebuild` after compacting).

The helpers a link's loop calls per token are inlined (``inline="always"``): a call to
a compiled function passes each array argument as a structure and takes a reference on
it, which cost more than the helpers' work (a quarter of the loop's time on the S1
triangle).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphcep.engines.nu.closing import SRC_ANY, SRC_CLOSING, SRC_CONST, SRC_TOKEN
from graphcep.engines.nu.tables import (
    EP_ALLOC,
    EP_GPTR,
    EP_PEND,
    EP_PTR,
    EP_RELEASE,
    EP_STOP,
    EP_TARGET,
    EV_ALLOC,
    EV_ARG,
    EV_KIND,
    EV_PTR,
    EV_RELEASE,
    EV_START,
    EV_TARGET,
    FAR,
    FINAL,
    G_CLOCK,
    G_HIGH,
    G_LOW,
    HAS_EV,
    INV_CLOCK,
    INV_HIGH,
    INV_PTR,
    J_ACTIVE,
    J_BEFORE,
    J_FIRST_ARG,
    J_FIRST_SRC,
    J_KEY0,
    J_KEY1,
    J_LAST,
    J_SECOND_ARG,
    J_SECOND_SRC,
    J_STARTS,
    JOIN,
    KEYS_AT,
    KIND_CONST,
    KIND_VAR,
    LINK_FIELDS,
    MIDDLE,
    NONE,
    NX_ARG,
    NX_FRESH,
    NX_KIND,
    NX_PTR,
    SH_CLOCKS,
    SH_CONSTS,
    SH_IDENTITY,
    SH_LINKS,
    SH_NEXT,
    SH_VARS,
    SHAPE,
)

# row fields before the clocks
LOC, FIRST, LAST, WMASK, CLOCK0 = 0, 1, 2, 3, 4

# what read_links stopped on (counters[STATUS]); the first four undo the link at RESUME,
# NEED_HISTORY and REPORTS_READY stop before it
(DONE, NEED_TOKENS, NEED_ENTRIES, NEED_SCRATCH, NEED_REPORTS, OVER_LIMIT, WITNESS_FULL,
 NEED_HISTORY, REPORTS_READY) = range(9)
# the counters array; REPORTS_AT: the reports at which read_links stops between two links
# so that its caller hands them out (0: never)
(N_TOKENS, N_ENTRIES, LINK_NO, N_REPORTS, STATUS, RESUME, N_BUCKETS, NEEDED, N_HISTORY,
 N_WAITING, N_CHUNKS, FREE_CHUNK, REPORTS_AT) = range(13)
# the columns of an index entry: the token's place, the next entry of its list, how long
# the token is kept (what a walk needs without reading the token)
ENT_SLOT, ENT_NEXT, ENT_KEEP = range(3)
ENTRY_FIELDS = 3
# the tokens the closing join pairs are listed in chunks, so that a list's entries lie
# together in memory (its walk is the join's hot loop): a chunk holds the next chunk, its
# first entry not dropped, the entries written, then CHUNK entries of (token place, how long
# the token is kept, the history key as far as the token fixes it). A chunk whose entries
# are all dropped goes to a free list (counters[FREE_CHUNK]: its first + 1, 0: none)
C_NEXT, C_BEGIN, C_END = range(3)
CHUNK = 8
CHUNK_FIELDS = 3 + 3 * CHUNK
# the columns of a link of the closing join's history: time, ends, arrival number, the
# number of the link (counters[LINK_NO]), the place of the link before it with its key
H_T, H_U, H_V, H_SEQ, H_NO, H_PREV = range(6)
HISTORY_FIELDS = 6
# set in the index keys of the tokens the closing join pairs (apart from the keys of the
# links tokens wait for: node ids stay below 2**31)
JOIN_BIT = 1 << 62

_MIX = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, inline="always")
def _mixed(h):
    # MurmurHash3's finaliser: every input bit reaches every output bit, so the low bits
    # that pick a slot of an open-addressing table do not cluster
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@nb.njit(cache=True, inline="always")
def _hash(row, identity):
    h = np.uint64(identity)
    for i in range(identity):
        h = (h ^ np.uint64(row[i])) * _MIX
    return _mixed(h)


@nb.njit(cache=True, inline="always")
def _same(a, b, identity):
    for i in range(identity):  # noqa: SIM110 -- a plain loop: no generator in numba
        if a[i] != b[i]:
            return False
    return True


@nb.njit(cache=True, inline="always")
def _copy(dst, src, count):
    # a plain loop: numba's slice assignment checks for overlap and may copy through a
    # temporary array
    for i in range(count):
        dst[i] = src[i]


@nb.njit(cache=True, inline="always")
def deadline_of(row, tab):
    """The last time the row's location lets it live (FAR: none)."""
    loc = row[LOC]
    best = FAR
    for k in range(tab[tab[INV_PTR] + loc], tab[tab[INV_PTR] + loc + 1]):
        start = row[CLOCK0 + tab[tab[INV_CLOCK] + k]]
        if start != NONE:
            best = min(best, start + tab[tab[INV_HIGH] + k])
    return best


@nb.njit(cache=True, inline="always")
def _read(src, dst, tr, node, now, tab):
    """``src`` reading the event ``node`` through event transition ``tr`` into ``dst``
    (Definition 7: allocate, check, release); False when not enabled or dead."""
    shape = tab[tab[SHAPE]:]
    clocks, nvars = shape[SH_CLOCKS], shape[SH_VARS]
    val0 = CLOCK0 + clocks
    held0 = val0 + nvars
    kind, arg = tab[tab[EV_KIND] + tr], tab[tab[EV_ARG] + tr]
    wmask = src[WMASK] | tab[tab[EV_ALLOC] + tr]
    if kind == KIND_CONST:
        if node != arg:
            return False
    elif kind == KIND_VAR:
        if node < shape[SH_CONSTS]:
            return False  # a variable reads unknown nodes only
        if (wmask >> arg) & 1:
            for j in range(nvars):
                if src[val0 + j] == node:
                    return False  # not fresh
        elif src[val0 + arg] != node:
            return False  # read mode: the node it holds
    _copy(dst, src, shape[SH_IDENTITY])
    if kind == KIND_VAR:
        dst[val0 + arg] = node
        dst[held0 + arg] = node
        wmask &= ~(1 << arg)
    release = tab[tab[EV_RELEASE] + tr]
    if release:
        for j in range(nvars):
            if (release >> j) & 1:
                dst[val0 + j] = -1
                wmask &= ~(1 << j)
    dst[WMASK] = wmask
    start = tab[tab[EV_START] + tr]
    if start:
        for c in range(clocks):
            if (start >> c) & 1 and dst[CLOCK0 + c] == NONE:
                dst[CLOCK0 + c] = now
    if dst[FIRST] == NONE:
        dst[FIRST] = now
    dst[LAST] = now
    dst[LOC] = tab[tab[EV_TARGET] + tr]
    return deadline_of(dst, tab) >= now


@nb.njit(cache=True, inline="always")
def _epsilon(src, dst, tr, now, tab):
    """``src`` through ε-transition ``tr`` into ``dst``; False when a guard or the new
    location's invariant fails."""
    shape = tab[tab[SHAPE]:]
    clocks, nvars = shape[SH_CLOCKS], shape[SH_VARS]
    for g in range(tab[tab[EP_GPTR] + tr], tab[tab[EP_GPTR] + tr + 1]):
        start = src[CLOCK0 + tab[tab[G_CLOCK] + g]]
        value = 0 if start == NONE else now - start
        if value < tab[tab[G_LOW] + g] or value > tab[tab[G_HIGH] + g]:
            return False
    _copy(dst, src, shape[SH_IDENTITY])
    pend, stop = tab[tab[EP_PEND] + tr], tab[tab[EP_STOP] + tr]
    if pend or stop:
        for c in range(clocks):
            if (pend >> c) & 1:
                dst[CLOCK0 + c] = src[LAST]  # the event the match read last (NONE: none)
            elif (stop >> c) & 1:
                dst[CLOCK0 + c] = NONE
    wmask = src[WMASK] | tab[tab[EP_ALLOC] + tr]
    release = tab[tab[EP_RELEASE] + tr]
    if release:
        val0 = CLOCK0 + clocks
        for j in range(nvars):
            if (release >> j) & 1:
                dst[val0 + j] = -1
                wmask &= ~(1 << j)
    dst[WMASK] = wmask
    dst[LOC] = tab[tab[EP_TARGET] + tr]
    return deadline_of(dst, tab) >= now


@nb.njit(cache=True, inline="always")
def _closure_of(scratch, todo, row, end, now, tab):
    """The ε-closure of ``scratch[row]`` (itself first) appended at ``end``, equal rows
    once, in the interpreted game's order (depth first, rows in the order met); the new
    end, or -1 when ``scratch`` is full. ``todo``: a stack as long as ``scratch``. Rows of
    ``scratch`` hold a token's identity only: the witness is the source token's and the
    link's, added when a token is produced."""
    identity = tab[tab[SHAPE] + SH_IDENTITY]
    if end >= scratch.shape[0]:
        return -1
    _copy(scratch[end], scratch[row], identity)
    begin = end
    end += 1
    todo[0] = begin
    top = 1
    while top:
        top -= 1
        cur = todo[top]
        loc = scratch[cur, LOC]
        for tr in range(tab[tab[EP_PTR] + loc], tab[tab[EP_PTR] + loc + 1]):
            if end >= scratch.shape[0]:
                return -1
            if not _epsilon(scratch[cur], scratch[end], tr, now, tab):
                continue
            seen = False
            for j in range(begin, end):  # a closure has a few rows: compare, no hashing
                if _same(scratch[j], scratch[end], identity):
                    seen = True
                    break
            if seen:
                continue
            todo[top] = end
            top += 1
            end += 1
    return end


@nb.njit(cache=True, inline="always")
def _pair(a, b):
    return (a << 32) | b


@nb.njit(cache=True, inline="always")
def _kept_until(row, tab):
    """How long a stored token is kept: its deadline; for a token the closing join pairs
    with later links, as long as a product of it may live (the clocks the last-but-one
    link starts begin at the token's deadline at the latest)."""
    own = deadline_of(row, tab)
    j = tab[JOIN]
    if not tab[j + J_ACTIVE] or row[LOC] != tab[j + J_BEFORE]:
        return own
    last, starts = tab[j + J_LAST], tab[j + J_STARTS]
    best = FAR
    for k in range(tab[tab[INV_PTR] + last], tab[tab[INV_PTR] + last + 1]):
        clock = tab[tab[INV_CLOCK] + k]
        start = row[CLOCK0 + clock]
        if start == NONE and (starts >> clock) & 1:
            start = min(own, FAR)
        if start != NONE:
            best = min(best, start + tab[tab[INV_HIGH] + k])
    return max(own, best)


@nb.njit(cache=True, inline="always")
def _join_key(row, tab):
    """The index key of a token the closing join pairs: the nodes it holds that the
    closing link's ends must equal (0: none), with :data:`JOIN_BIT`."""
    j = tab[JOIN]
    val0 = CLOCK0 + tab[tab[SHAPE] + SH_CLOCKS]
    first = second = 0
    if tab[j + J_KEY0] >= 0 and row[val0 + tab[j + J_KEY0]] >= 0:
        first = row[val0 + tab[j + J_KEY0]] + 1
    if tab[j + J_KEY1] >= 0 and row[val0 + tab[j + J_KEY1]] >= 0:
        second = row[val0 + tab[j + J_KEY1]] + 1
    return _pair(first, second) | JOIN_BIT


@nb.njit(cache=True, inline="always")
def _end_part(source, arg, u, v):
    """An end of the last-but-one link's key as a constant or the closing link ``u -> v``
    fixes it (id + 1; 0: the token fixes it, or any node)."""
    if source == SRC_CONST:
        return arg + 1
    if source == SRC_CLOSING:
        return (u if arg == 0 else v) + 1
    return 0


@nb.njit(cache=True, inline="always")
def _token_history_key(row, tab):
    """The ends of the last-but-one link's key that the joined token ``row`` fixes (its
    variables' nodes + 1, 0 elsewhere); -1 when one of them holds nothing (never enabled)."""
    j = tab[JOIN]
    val0 = CLOCK0 + tab[tab[SHAPE] + SH_CLOCKS]
    a = b = 0
    if tab[j + J_FIRST_SRC] == SRC_TOKEN:
        a = row[val0 + tab[j + J_FIRST_ARG]] + 1
        if a == 0:
            return -1
    if tab[j + J_SECOND_SRC] == SRC_TOKEN:
        b = row[val0 + tab[j + J_SECOND_ARG]] + 1
        if b == 0:
            return -1
    return _pair(a, b)


@nb.njit(cache=True, inline="always")
def _history_key(first, second, tab):
    """The key a link of the history is found by: its ends that the closing join knows
    (id + 1; 0 for one it does not)."""
    j = tab[JOIN]
    a = first + 1 if tab[j + J_FIRST_SRC] != SRC_ANY else 0
    b = second + 1 if tab[j + J_SECOND_SRC] != SRC_ANY else 0
    return _pair(a, b)


@nb.njit(cache=True, inline="always")
def _history_slot(hkeys, key):
    """The place of ``key`` in the history's hash table (empty if new): its rows hold a
    key + 1 (0: empty) and the newest link with that key, side by side (one cache line)."""
    mask = hkeys.shape[0] - 1
    at = np.int64(_mixed(np.uint64(key)) & np.uint64(mask))
    while hkeys[at, 0] and hkeys[at, 0] != key + 1:
        at = (at + 1) & mask
    return at


@nb.njit(cache=True, inline="always")
def _history_bit(hbits, key):
    """The word and bit of ``key`` in the history's filter (a one-hash Bloom filter: a
    clear bit says no link has the key, cheaper than a miss in the hash table)."""
    h = _mixed(np.uint64(key)) >> np.uint64(32)
    bit = np.int64(h & np.uint64(hbits.shape[0] * 64 - 1))
    return bit >> 6, np.int64(1) << (bit & 63)


@nb.njit(cache=True, inline="always")
def _remember(hist, n, hkeys, hbits, tab):
    """Chain history link ``n`` after the newest link with its key."""
    key = _history_key(hist[n, H_U], hist[n, H_V], tab)
    at = _history_slot(hkeys, key)
    hist[n, H_PREV] = hkeys[at, 1] if hkeys[at, 0] else -1
    hkeys[at, 0] = key + 1
    hkeys[at, 1] = n
    word, bit = _history_bit(hbits, key)
    hbits[word] |= bit


@nb.njit(cache=True)
def _join(u, v, now, closing, tab, tok, born, chunks, head, tail, pkeys, counters,
          cand, pairs, hist, hkeys, hbits, scratch, todo, outs, labels, tprime, before,
          reports):
    """The closing join for the link ``u -> v`` (``closing``: its witness fields): every
    stored token it pairs with a link of the history, replayed through the game's steps
    in the order the game would have stored the products (the history link's arrival,
    then the token's storage order); a status."""
    j = tab[JOIN]
    first = u + 1 if tab[j + J_KEY0] >= 0 else 0
    second = v + 1 if tab[j + J_KEY1] >= 0 else 0
    bucket = _bucket(_pair(first, second) | JOIN_BIT, pkeys, False, counters, head,
                     tail)
    if bucket < 0:
        return DONE
    count = _walk_joined(bucket, now, chunks, head, tail, cand, counters)
    if count < 0:
        return NEED_SCRATCH
    fixed = _pair(_end_part(tab[j + J_FIRST_SRC], tab[j + J_FIRST_ARG], u, v),
                  _end_part(tab[j + J_SECOND_SRC], tab[j + J_SECOND_ARG], u, v))
    found = 0
    for c in range(count):
        chunk, at = cand[c] // CHUNK, 3 + 3 * (cand[c] % CHUNK)
        if chunks[chunk, at + 2] < 0:
            continue  # reads a variable that holds nothing: never enabled
        key = chunks[chunk, at + 2] | fixed
        word, bit = _history_bit(hbits, key)
        if not hbits[word] & bit:
            continue
        place = _history_slot(hkeys, key)
        if not hkeys[place, 0]:
            continue
        slot = chunks[chunk, at]
        cand[c] = slot
        row = tok[slot]
        alive, since, stored = deadline_of(row, tab), row[LAST], born[slot]
        # the token reads links that came after it was stored, while it lived
        h = hkeys[place, 1]
        while h >= 0 and hist[h, H_NO] > stored and hist[h, H_T] >= since:
            if hist[h, H_T] <= alive:
                if found >= pairs.shape[0]:
                    return NEED_SCRATCH
                pairs[found] = (h << 32) | c
                found += 1
            h = hist[h, H_PREV]
    if found > 1:
        pairs[:found].sort()
    last = tab[j + J_LAST]
    for p in range(found):
        h, c = pairs[p] >> 32, pairs[p] & 0xFFFFFFFF
        source = tok[cand[c]]
        t2 = hist[h, H_T]
        before[0], before[1], before[2], before[3] = t2, hist[h, H_U], hist[h, H_V], hist[h, H_SEQ]
        made, top = _link_rows(source, before[1], before[2], t2, scratch, todo, 0, outs, labels,
                               0, tab)
        if made < 0:
            return NEED_SCRATCH
        for r in range(made):
            product = scratch[outs[r]]
            if product[LOC] != last or deadline_of(product, tab) < now:
                continue  # not stored, or dead by now
            before[4], before[5] = labels[r, 0], labels[r, 1]
            if not _witnessed(tprime, product, source, before, tab):
                return WITNESS_FULL
            closed, _ = _link_rows(tprime, u, v, now, scratch, todo, top, outs, labels, made,
                                   tab)
            if closed < 0:
                return NEED_SCRATCH
            for f in range(made, made + closed):
                final = scratch[outs[f]]
                if tab[tab[HAS_EV] + final[LOC]]:
                    continue
                closing[4], closing[5] = labels[f, 0], labels[f, 1]
                done = _report(final, tprime, closing, reports, counters, tab)
                if done < 0:
                    return WITNESS_FULL
                if done == 0:
                    return NEED_REPORTS
    return DONE


@nb.njit(cache=True, inline="always")
def _link_rows(source, u, v, now, scratch, todo, base, outs, labels, at, tab):
    """The rows ``source`` makes by reading the link ``u -> v`` (an event, its ε-closure,
    an event, its ε-closure), in the game's order: their places in ``scratch`` (written
    from ``base`` on) into ``outs``, and the two event transitions that read the link into
    ``labels``, from ``at`` on; how many, and the first place of ``scratch`` left free
    (-1: ``scratch``, ``outs`` or ``labels`` is full)."""
    count = 0
    top = base
    loc = source[LOC]
    for tr_u in range(tab[tab[EV_PTR] + loc], tab[tab[EV_PTR] + loc + 1]):
        if top >= scratch.shape[0]:
            return -1, top
        if not _read(source, scratch[top], tr_u, u, now, tab):
            continue
        mid_begin = top + 1
        mid_end = _closure_of(scratch, todo, top, mid_begin, now, tab)
        if mid_end < 0:
            return -1, top
        top = mid_end
        for m in range(mid_begin, mid_end):
            mloc = scratch[m, LOC]
            for tr_v in range(tab[tab[EV_PTR] + mloc], tab[tab[EV_PTR] + mloc + 1]):
                if top >= scratch.shape[0]:
                    return -1, top
                if not _read(scratch[m], scratch[top], tr_v, v, now, tab):
                    continue
                end = _closure_of(scratch, todo, top, top + 1, now, tab)
                if end < 0:
                    return -1, top
                for e in range(top + 1, end):
                    if tab[tab[MIDDLE] + scratch[e, LOC]]:
                        continue
                    if at + count >= outs.shape[0]:
                        return -1, top
                    outs[at + count] = e
                    labels[at + count, 0], labels[at + count, 1] = tr_u, tr_v
                    count += 1
                top = end
    return count, top


@nb.njit(cache=True)
def _keys(row, tab, out):
    """The index keys of a stored token into ``out``; how many. A key is the pair of the
    nodes (id + 1; 0: any node) that may begin and end the next link it reads: the first
    from the event transitions of its location, the second from those their ε-moves
    reach (:func:`graphcep.engines.nu.tables._next_reads`). -1 when the interpreted game
    would not store it: no event of its location can be enabled."""
    val0 = CLOCK0 + tab[tab[SHAPE] + SH_CLOCKS]
    loc = row[LOC]
    count = 0
    readable = False
    for tr in range(tab[tab[EV_PTR] + loc], tab[tab[EV_PTR] + loc + 1]):
        kind, arg = tab[tab[EV_KIND] + tr], tab[tab[EV_ARG] + tr]
        wmask = row[WMASK] | tab[tab[EV_ALLOC] + tr]
        if kind == KIND_CONST:
            first = arg + 1
        elif kind == KIND_VAR and not (wmask >> arg) & 1:
            if row[val0 + arg] < 0:
                continue  # holds nothing: never enabled
            first = row[val0 + arg] + 1
        else:
            first = 0
        readable = True
        for nx in range(tab[tab[NX_PTR] + tr], tab[tab[NX_PTR] + tr + 1]):
            nkind, narg = tab[tab[NX_KIND] + nx], tab[tab[NX_ARG] + nx]
            if nkind == KIND_CONST:
                second = narg + 1
            elif nkind == KIND_VAR and not tab[tab[NX_FRESH] + nx] and not (wmask >> narg) & 1:
                if kind == KIND_VAR and narg == arg:
                    second = first  # the variable the first end read
                elif row[val0 + narg] < 0:
                    continue
                else:
                    second = row[val0 + narg] + 1
            else:
                second = 0
            key = _pair(first, second)
            known = False
            for j in range(count):
                known = known or out[j] == key
            if not known:
                out[count] = key
                count += 1
    return count if readable else -1


@nb.njit(cache=True)
def _bucket(key, pkeys, add, counters, head, tail):
    """The list of ``key`` (-1: none, or, with ``add``, no room for a new one). ``pkeys``
    rows: key + 1 (0: empty) and its list, side by side; kept at most half full."""
    mask = pkeys.shape[0] - 1
    at = np.int64(_mixed(np.uint64(key)) & np.uint64(mask))
    while pkeys[at, 0]:
        if pkeys[at, 0] == key + 1:
            return pkeys[at, 1]
        at = (at + 1) & mask
    if not add:
        return -1
    bucket = counters[N_BUCKETS]
    if bucket >= head.shape[0] or 2 * (bucket + 1) > pkeys.shape[0]:
        return -1
    counters[N_BUCKETS] = bucket + 1
    pkeys[at, 0] = key + 1
    pkeys[at, 1] = bucket
    head[bucket] = -1
    tail[bucket] = -1
    return bucket


@nb.njit(cache=True)
def _index(slot, tok, deadline, tab, ent, chunks, head, tail, pkeys, counters, keys):
    """Put stored token ``slot`` in the lists of its keys; False when the entry arrays are
    full. A token no event can advance is not kept: it gets the deadline -FAR."""
    count = _keys(tok[slot], tab, keys)
    if count < 0:
        deadline[slot] = -FAR
        return True
    j = tab[JOIN]
    if tab[j + J_ACTIVE] and tok[slot, LOC] == tab[j + J_BEFORE]:  # for the closing join
        return _list_joined(_join_key(tok[slot], tab), slot, deadline[slot],
                            _token_history_key(tok[slot], tab), chunks, head, tail, pkeys,
                            counters)
    counters[N_WAITING] += 1
    n_entries = counters[N_ENTRIES]
    if n_entries + count > ent.shape[0]:
        return False
    for k in range(count):
        bucket = _bucket(keys[k], pkeys, True, counters, head, tail)
        if bucket < 0:
            return False
        e = n_entries
        n_entries += 1
        ent[e, ENT_SLOT] = slot
        ent[e, ENT_NEXT] = -1
        ent[e, ENT_KEEP] = deadline[slot]
        if tail[bucket] < 0:
            head[bucket] = e
        else:
            ent[tail[bucket], ENT_NEXT] = e
        tail[bucket] = e
    counters[N_ENTRIES] = n_entries
    return True


@nb.njit(cache=True, inline="always")
def _unlink(rows, next_column, bucket, prev, node, following, head, tail):
    """Take ``node`` (after ``prev``, before ``following``) out of list ``bucket``, whose
    items are ``rows`` linked through their ``next_column``."""
    if prev < 0:
        head[bucket] = following
    else:
        rows[prev, next_column] = following
    if tail[bucket] == node:
        tail[bucket] = prev


@nb.njit(cache=True)
def _walk(bucket, now, ent, head, tail, out, count):
    """Append the tokens of the live entries of list ``bucket`` to ``out``, unlinking
    expired ones; the new count, or -1 when ``out`` is full."""
    prev = -1
    e = head[bucket]
    while e >= 0:
        following = ent[e, ENT_NEXT]
        if ent[e, ENT_KEEP] < now:
            _unlink(ent, ENT_NEXT, bucket, prev, e, following, head, tail)
        else:
            if count >= out.shape[0]:
                return -1
            out[count] = ent[e, ENT_SLOT]
            count += 1
            prev = e
        e = following
    return count


@nb.njit(cache=True, inline="always")
def _list_joined(key, slot, keep, history_key, chunks, head, tail, pkeys, counters):
    """Append a token the closing join pairs to the chunks of list ``key``; False when
    the arrays are full."""
    bucket = _bucket(key, pkeys, True, counters, head, tail)
    if bucket < 0:
        return False
    c = tail[bucket]
    if c < 0 or chunks[c, C_END] == CHUNK:
        if counters[FREE_CHUNK]:
            fresh = counters[FREE_CHUNK] - 1
            counters[FREE_CHUNK] = chunks[fresh, C_NEXT] + 1
        else:
            fresh = counters[N_CHUNKS]
            if fresh >= chunks.shape[0]:
                return False
            counters[N_CHUNKS] = fresh + 1
        chunks[fresh, C_NEXT], chunks[fresh, C_BEGIN], chunks[fresh, C_END] = -1, 0, 0
        if c < 0:
            head[bucket] = fresh
        else:
            chunks[c, C_NEXT] = fresh
        tail[bucket] = fresh
        c = fresh
    k = chunks[c, C_END]
    chunks[c, 3 + 3 * k], chunks[c, 4 + 3 * k], chunks[c, 5 + 3 * k] = slot, keep, history_key
    chunks[c, C_END] = k + 1
    return True


@nb.njit(cache=True)
def _walk_joined(bucket, now, chunks, head, tail, out, counters):
    """The places (chunk * CHUNK + entry) of the live entries of closing-join list
    ``bucket`` into ``out``, in storage order, dropping the expired ones at the front of
    each chunk and the chunks that have none left; how many (-1: ``out`` is full)."""
    count = 0
    prev = -1
    c = head[bucket]
    while c >= 0:
        begin, end = chunks[c, C_BEGIN], chunks[c, C_END]
        while begin < end and chunks[c, 4 + 3 * begin] < now:
            begin += 1
        chunks[c, C_BEGIN] = begin
        following = chunks[c, C_NEXT]
        if begin == CHUNK:  # full, and every entry dropped: free
            _unlink(chunks, C_NEXT, bucket, prev, c, following, head, tail)
            chunks[c, C_NEXT] = counters[FREE_CHUNK] - 1
            counters[FREE_CHUNK] = c + 1
            c = following
            continue
        for k in range(begin, end):
            if chunks[c, 4 + 3 * k] >= now:
                if count >= out.shape[0]:
                    return -1
                out[count] = c * CHUNK + k
                count += 1
        prev = c
        c = following
    return count


@nb.njit(cache=True)
def _candidates(u, v, now, ent, head, tail, pkeys, counters, cand):
    """The stored tokens that may read the link ``u -> v``: the lists of the keys (u, v),
    (u, any), (any, v) and (any, any), in storage order, each token once; the count (-1:
    ``cand`` is full)."""
    count = 0
    lists = 0
    for k in range(4):
        first = u + 1 if k < 2 else 0
        second = v + 1 if k % 2 == 0 else 0
        bucket = _bucket(_pair(first, second), pkeys, False, counters, head, tail)
        if bucket < 0:
            continue
        before = count
        count = _walk(bucket, now, ent, head, tail, cand, count)
        if count < 0:
            return -1
        lists += count > before
    if lists > 1:
        cand[:count].sort()
        kept = 1
        for i in range(1, count):
            if cand[i] != cand[kept - 1]:
                cand[kept] = cand[i]
                kept += 1
        count = kept
    return count


@nb.njit(cache=True, inline="always")
def _produce(row, source, link, tok, deadline, stamp, born, htab, counters, first_new, reports,
             tab):
    """A token produced by the current link (``row``: its identity; its witness is
    ``source``'s and ``link``): report it if final and new for this link, store it if
    new. 1 done, 0 when the token or report arrays are full (the caller undoes the link),
    -1 when the witness is full."""
    if not tab[tab[HAS_EV] + row[LOC]]:
        # nothing can advance it: reported if final (repeats of a report are dropped by
        # the caller), never stored
        return _report(row, source, link, reports, counters, tab)
    identity = tab[tab[SHAPE] + SH_IDENTITY]
    link_no = counters[LINK_NO]
    n = counters[N_TOKENS]
    mask = htab.shape[0] - 1
    h = _hash(row, identity)
    at = np.int64(h & np.uint64(mask))
    while htab[at]:
        slot = htab[at] - 1
        # a slot at or past n was stored by a link undone since (see read_links)
        if slot < n and _same(tok[slot], row, identity):
            if slot >= first_new or stamp[slot] == link_no:
                return 1  # produced already while this link was read
            stamp[slot] = link_no
            return _report(row, source, link, reports, counters, tab)
        at = (at + 1) & mask
    if n >= tok.shape[0]:
        return 0
    if not _witnessed(tok[n], row, source, link, tab):
        return -1
    deadline[n] = _kept_until(row, tab)
    stamp[n] = link_no
    born[n] = link_no
    htab[at] = n + 1
    counters[N_TOKENS] = n + 1
    return _report(row, source, link, reports, counters, tab)


@nb.njit(cache=True, inline="always")
def _report(row, source, link, reports, counters, tab):
    if not tab[tab[FINAL] + row[LOC]]:
        return 1
    r = counters[N_REPORTS]
    if r >= reports.shape[0]:
        return 0
    if not _witnessed(reports[r], row, source, link, tab):
        return -1
    counters[N_REPORTS] = r + 1
    return 1


@nb.njit(cache=True, inline="always")
def _witnessed(dst, row, source, link, tab):
    """``dst``: the identity ``row``, and the witness of ``source`` with ``link`` (time,
    source, target, arrival, the two labels) after it; False when it is full."""
    base = tab[tab[SHAPE] + SH_IDENTITY]
    count = source[base]
    if count >= tab[tab[SHAPE] + SH_LINKS]:
        return False
    _copy(dst, row, base)
    at = base + 1
    for i in range(LINK_FIELDS * count):
        dst[at + i] = source[at + i]
    at += LINK_FIELDS * count
    for i in range(LINK_FIELDS):
        dst[at + i] = link[i]
    dst[base] = count + 1
    return True


@nb.njit(cache=True, nogil=True)
def read_links(ts, us, vs, seqs, begin, limit, tab, starts, tok, deadline, stamp, born, htab,
               ent, chunks, head, tail, pkeys, scratch, cand, pairs, hist, hkeys,
               hbits, reports, counters):
    """Read links ``begin ..`` (node ids ``us``/``vs``): every start row and every
    stored token waiting for the source tries the link, then the closing join pairs it
    with the history; stops when the stored tokens and history links pass ``limit``, and
    before a link once ``counters[REPORTS_AT]`` reports are made. See the module
    docstring."""
    keys = np.empty(tab[tab[SHAPE] + SH_NEXT], np.int64)
    todo = np.empty(scratch.shape[0], np.int64)
    outs = np.empty(scratch.shape[0], np.int64)
    labels = np.empty((scratch.shape[0], 2), np.int64)
    link = np.empty(LINK_FIELDS, np.int64)
    before = np.empty(LINK_FIELDS, np.int64)
    tprime = np.empty(tok.shape[1], np.int64)
    nconst = tab[tab[SHAPE] + SH_CONSTS]
    joining = tab[tab[JOIN] + J_ACTIVE] != 0
    constant_starts = True
    for k in range(starts.shape[0]):
        loc = starts[k, LOC]
        for tr in range(tab[tab[EV_PTR] + loc], tab[tab[EV_PTR] + loc + 1]):
            constant_starts = constant_starts and tab[tab[EV_KIND] + tr] == KIND_CONST
    counters[STATUS] = DONE
    for i in range(begin, ts.shape[0]):
        if 0 < counters[REPORTS_AT] <= counters[N_REPORTS]:
            counters[STATUS] = REPORTS_READY
            counters[RESUME] = i
            return
        if joining and counters[N_HISTORY] >= hist.shape[0]:
            counters[STATUS] = NEED_HISTORY
            counters[RESUME] = i
            return
        now, u, v, seq = ts[i], us[i], vs[i], seqs[i]
        link[0], link[1], link[2], link[3] = now, u, v, seq
        first_new = counters[N_TOKENS]
        first_report = counters[N_REPORTS]
        counters[LINK_NO] += 1
        found = 0 if counters[N_WAITING] == 0 else _candidates(
            u, v, now, ent, head, tail, pkeys, counters, cand)
        status = DONE if found >= 0 else NEED_SCRATCH
        # a start that reads constants only cannot read a node that is none of them
        tried = starts.shape[0] if u < nconst or not constant_starts else 0
        total = tried + max(found, 0)
        k = 0
        while status == DONE and k < total:
            source = starts[k] if k < tried else tok[cand[k - tried]]
            k += 1
            made, _ = _link_rows(source, u, v, now, scratch, todo, 0, outs, labels, 0, tab)
            if made < 0:
                status = NEED_SCRATCH
            for r in range(max(made, 0)):
                link[4], link[5] = labels[r, 0], labels[r, 1]
                done = _produce(scratch[outs[r]], source, link, tok, deadline, stamp, born,
                                htab, counters, first_new, reports, tab)
                if done < 0:
                    status = WITNESS_FULL
                elif done == 0:
                    status = NEED_TOKENS if counters[N_REPORTS] < \
                        reports.shape[0] else NEED_REPORTS
                if status != DONE:
                    break
        if status == DONE and joining:
            status = _join(u, v, now, link, tab, tok, born, chunks, head, tail, pkeys,
                           counters, cand, pairs, hist, hkeys, hbits, scratch, todo,
                           outs, labels, tprime, before, reports)
        # room for every new token's keys first, so that a commit is never half done
        if status == DONE:
            needed = 0
            for slot in range(first_new, counters[N_TOKENS]):
                needed += tab[tab[KEYS_AT] + tok[slot, LOC]]
            if counters[N_ENTRIES] + needed > ent.shape[0] or \
                    counters[N_BUCKETS] + needed > head.shape[0] or \
                    2 * (counters[N_BUCKETS] + needed) > pkeys.shape[0] or \
                    (joining and counters[N_CHUNKS] + needed > chunks.shape[0]):
                counters[NEEDED] = needed
                status = NEED_ENTRIES
        if status == DONE:
            for slot in range(first_new, counters[N_TOKENS]):
                if not _index(slot, tok, deadline, tab, ent, chunks, head, tail, pkeys,
                              counters, keys):
                    status = NEED_ENTRIES
                    break
        if status != DONE:  # undo the link; the caller rebuilds the index and hash table
            counters[N_TOKENS] = first_new
            counters[N_REPORTS] = first_report
            counters[STATUS] = status
            counters[RESUME] = i
            return
        if joining:
            n = counters[N_HISTORY]
            hist[n, H_T], hist[n, H_U], hist[n, H_V], hist[n, H_SEQ] = now, u, v, seq
            hist[n, H_NO] = counters[LINK_NO]
            _remember(hist, n, hkeys, hbits, tab)
            counters[N_HISTORY] = n + 1
        if counters[N_TOKENS] + counters[N_HISTORY] > limit:
            counters[STATUS] = OVER_LIMIT
            counters[RESUME] = i + 1
            return


@nb.njit(cache=True)
def rebuild(tok, n, since, deadline, tab, htab, ent, chunks, head, tail, pkeys, counters):
    """The hash table and the index of the first ``n`` stored tokens (after a sweep);
    False when the entry arrays are too small."""
    htab[:] = 0
    pkeys[:, 0] = 0
    counters[N_ENTRIES] = 0
    counters[N_WAITING] = 0
    counters[N_CHUNKS] = 0
    counters[FREE_CHUNK] = 0
    counters[N_BUCKETS] = 0
    keys = np.empty(tab[tab[SHAPE] + SH_NEXT], np.int64)
    rehash(tok, n, since, tab, htab)
    for slot in range(n):
        if deadline[slot] == -FAR:
            continue
        if not _index(slot, tok, deadline, tab, ent, chunks, head, tail, pkeys,
                      counters, keys):
            return False
    return True


@nb.njit(cache=True)
def rehash(tok, n, since, tab, htab):
    """Put the stored tokens of the first ``n`` whose last link came at ``since`` or later
    in the (empty) hash table. A token a link produces has read that link last, so it can
    only equal a stored token of the same time: no link before ``since`` (the time of the
    next link to read, or earlier) will be read again, and the tokens of earlier times, the
    front of the storage order, need no place in the table."""
    identity = tab[tab[SHAPE] + SH_IDENTITY]
    mask = htab.shape[0] - 1
    slot = n - 1
    while slot >= 0 and tok[slot, LAST] >= since:
        at = np.int64(_hash(tok[slot], identity) & np.uint64(mask))
        while htab[at]:
            at = (at + 1) & mask
        htab[at] = slot + 1
        slot -= 1


@nb.njit(cache=True)
def rehash_buckets(old, pkeys):
    """The lists' keys in a larger (empty) table."""
    mask = pkeys.shape[0] - 1
    for i in range(old.shape[0]):
        key = old[i, 0]
        if not key:
            continue
        at = np.int64(_mixed(np.uint64(key - 1)) & np.uint64(mask))
        while pkeys[at, 0]:
            at = (at + 1) & mask
        pkeys[at, 0] = key  # already the key + 1
        pkeys[at, 1] = old[i, 1]


@nb.njit(cache=True)
def compact(tok, deadline, born, n, horizon):
    """Move the first ``n`` tokens alive at ``horizon`` to the front, in order (a row's
    place is its storage order); how many."""
    live = 0
    for slot in range(n):
        if deadline[slot] >= horizon:
            if slot != live:
                for i in range(tok.shape[1]):
                    tok[live, i] = tok[slot, i]
                deadline[live] = deadline[slot]
                born[live] = born[slot]
            live += 1
    return live


@nb.njit(cache=True)
def oldest_joined(tok, deadline, n, horizon, tab):
    """The last link time of the oldest token the closing join pairs that is kept at
    ``horizon`` (FAR: none): no history link before it can be read."""
    before = tab[tab[JOIN] + J_BEFORE]
    oldest = FAR
    for slot in range(n):
        if tok[slot, LOC] == before and deadline[slot] >= horizon:
            oldest = min(oldest, tok[slot, LAST])
    return oldest


@nb.njit(cache=True)
def compact_history(hist, count, oldest, tab, hkeys, hbits):
    """Keep the history links from time ``oldest`` on, in order, chained anew; how many."""
    kept = 0
    hkeys[:, 0] = 0
    hbits[:] = 0
    for h in range(count):
        if hist[h, H_T] >= oldest:
            for f in range(HISTORY_FIELDS):
                hist[kept, f] = hist[h, f]
            _remember(hist, kept, hkeys, hbits, tab)
            kept += 1
    return kept
