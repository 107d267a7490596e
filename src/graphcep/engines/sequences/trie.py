"""A compiled trie of marked patterns, changed in place, walked from every start position.

Each marked pattern (:func:`graphcep.patterns.sequences.mark`) is a path of *tokens*
from the root; a token reads one symbol:

- ``CONST s``: the symbol ``s`` (symbols are interned as non-negative integers);
- ``FRESH``: any symbol (a variable's first occurrence);
- ``BACK j``: the symbol read ``j`` places after the start of the occurrence (a later
  occurrence of the variable first met at offset ``j``).

This is a bijection with marked patterns, so a path matches a window of the sequence iff
its pattern does under Definitions 1-2 of du Mouza, Rigaux, Scholl (SSDBM 2006): a
constant its own symbol, a variable any symbol, the same variable the same symbol;
different variables may bind equal symbols, and a variable may bind a symbol that is a
constant elsewhere (``FRESH`` does not look at what it reads). Equal patterns share a
node; a pattern and its refinements share their common prefix.

A node's children are found three ways: a hash table from ``(node, symbol)`` to its
``CONST`` child (open addressing, linear probing, tombstones), the node's one ``FRESH``
child, and a linked list of its ``BACK`` children. :func:`match` walks the trie depth
first from each start position of a key's buffer (its last symbols, then the new ones):
at each node it follows the ``CONST`` child of the next symbol, the ``FRESH`` child and
each ``BACK`` child whose referenced symbol equals it. A node where subscriptions end
reports each of them, if the window ends on a new symbol and the subscription was added
no later than the window's first edge arrived.

:func:`add` and :func:`remove` change the trie in place in ``O(pattern length)``
(a node counts the subscriptions whose path passes it; a node no path passes is unlinked
and its row reused), and list the rows they wrote. No match state outlives a call to
:func:`match` -- each key keeps only its last symbols -- so a reused row can never be
mistaken for the old one. The arrays grow a few rows per change
(:mod:`~graphcep.engines.sequences.trie_arrays`): :func:`copy_rows` and :func:`sync_rows`
build the larger copy.

Layouts:

- ``nodes[n, :]`` (``int32``, what a walk reads): ``N_FRESH`` (the FRESH child or -1),
  ``N_BACK`` (the first BACK child or -1), ``N_SIB`` (the next BACK sibling; the next
  free row for a free row), ``N_SUBS`` (the first subscription ending here or -1),
  ``N_VAL`` (the symbol or offset of the token reaching it), ``N_CONST`` (how many CONST
  children it has), ``N_CXOR`` / ``N_SXOR`` (the XOR of those children's rows and of
  their symbols: with one child, that child and its symbol, found without the table --
  most deep nodes have one);
- ``cold[n, :]`` (``int32``, for changes): ``C_PARENT``, ``C_KIND`` (the token's kind),
  ``C_COUNT`` (subscriptions whose path passes it);
- ``root[s]`` (``int32``): the root's CONST child for symbol ``s`` or -1 (also in the
  table; every start position looks it up, so it gets a dense array of its own);
- ``subs[i, :]`` (``int64``): ``S_NODE`` (where subscription slot ``i`` ends),
  ``S_NEXT`` (the next subscription ending there), ``S_ADDED`` (the arrival number from
  which it reports);
- ``table`` (``int64``): ``(capacity, 2)`` rows of ``(key, child)``, key ``-1`` empty and
  ``-2`` deleted, key = ``parent << 32 | symbol``;
- ``meta``: ``M_NODES`` (rows in use or freed), ``M_FREE`` (the first free row),
  ``M_LIVE`` / ``M_USED`` (live and live-or-deleted table entries).
"""

from __future__ import annotations

import numba as nb
import numpy as np

CONST, FRESH, BACK = 0, 1, 2
N_FRESH, N_BACK, N_SIB, N_SUBS, N_VAL, N_CONST, N_CXOR, N_SXOR = range(8)
NODE_FIELDS = 8
C_PARENT, C_KIND, C_COUNT = range(3)
COLD_FIELDS = 3
S_NODE, S_NEXT, S_ADDED = range(3)
SUB_FIELDS = 3
M_NODES, M_FREE, M_LIVE, M_USED = range(4)
EMPTY, DELETED = -1, -2
#: Symbols and nodes are below 2**31 (int32 fields; one table key holds both).
SYMBOL_LIMIT = 1 << 31


def tokens(marked: tuple[str | int, ...], intern: dict[str, int]) -> np.ndarray:
    """A marked pattern's tokens as ``(kind, value)`` rows; constants interned.

    >>> tokens(("a", 0, "b", 0), {}).tolist()
    [[0, 0], [1, -1], [0, 1], [2, 1]]
    """
    first: dict[int, int] = {}
    rows = []
    for offset, item in enumerate(marked):
        if isinstance(item, str):
            rows.append((CONST, intern.setdefault(item, len(intern))))
        elif item in first:
            rows.append((BACK, first[item]))
        else:
            first[item] = offset
            rows.append((FRESH, -1))
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def new_nodes(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Room for ``capacity`` nodes: the fields a walk reads, and the others."""
    nodes = np.full((capacity, NODE_FIELDS), -1, dtype=np.int32)
    nodes[:, N_CONST:] = 0
    cold = np.zeros((capacity, COLD_FIELDS), dtype=np.int32)
    return nodes, cold


def new_table(capacity: int) -> np.ndarray:
    return np.full((capacity, 2), EMPTY, dtype=np.int64)


def new_meta() -> np.ndarray:
    meta = np.zeros(4, dtype=np.int64)
    meta[M_NODES], meta[M_FREE] = 1, -1  # row 0 is the root
    return meta


# -- the table ---------------------------------------------------------------------------


@nb.njit(cache=True, inline="always")
def _slot(key: int, mask: int) -> int:
    h = key * np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15, wrapping
    return (h ^ (h >> 29)) & mask


@nb.njit(cache=True, inline="always")
def _find(table: np.ndarray, node: int, symbol: int) -> int:
    """The CONST child of ``node`` for ``symbol``, or -1."""
    key = (np.int64(node) << 32) | symbol
    mask = table.shape[0] - 1
    i = _slot(key, mask)
    while True:
        k = table[i, 0]
        if k == key:
            return table[i, 1]
        if k == EMPTY:
            return -1
        i = (i + 1) & mask


@nb.njit(cache=True)
def _put(table: np.ndarray, meta: np.ndarray, key: int, child: int) -> None:
    mask = table.shape[0] - 1
    i = _slot(key, mask)
    while table[i, 0] >= 0:
        i = (i + 1) & mask
    if table[i, 0] == EMPTY:
        meta[M_USED] += 1
    table[i, 0], table[i, 1] = key, child
    meta[M_LIVE] += 1


@nb.njit(cache=True)
def _delete(table: np.ndarray, meta: np.ndarray, key: int) -> None:
    mask = table.shape[0] - 1
    i = _slot(key, mask)
    while table[i, 0] != key:
        i = (i + 1) & mask
    table[i, 0] = DELETED
    meta[M_LIVE] -= 1


# -- changes -----------------------------------------------------------------------------


@nb.njit(cache=True)
def _child(nodes: np.ndarray, table: np.ndarray, node: int, kind: int, val: int) -> int:
    if kind == CONST:
        return _find(table, node, val)
    if kind == FRESH:
        return nodes[node, N_FRESH]
    c = nodes[node, N_BACK]
    while c >= 0 and nodes[c, N_VAL] != val:
        c = nodes[c, N_SIB]
    return c


@nb.njit(cache=True)
def _new_node(nodes: np.ndarray, cold: np.ndarray, table: np.ndarray, meta: np.ndarray,
              root: np.ndarray, parent: int, kind: int, val: int) -> int:
    node = meta[M_FREE]
    if node >= 0:
        meta[M_FREE] = nodes[node, N_SIB]
    else:
        node = meta[M_NODES]
        meta[M_NODES] += 1
    nodes[node, :N_CONST] = -1
    nodes[node, N_CONST:] = 0
    nodes[node, N_VAL] = val
    cold[node, C_PARENT], cold[node, C_KIND], cold[node, C_COUNT] = parent, kind, 0
    if kind == CONST:
        _put(table, meta, (np.int64(parent) << 32) | val, node)
        _toggle_const(nodes, parent, node, val, 1)
        if parent == 0:
            root[val] = node
    elif kind == FRESH:
        nodes[parent, N_FRESH] = node
    else:
        nodes[node, N_SIB] = nodes[parent, N_BACK]
        nodes[parent, N_BACK] = node
    return node


@nb.njit(cache=True, inline="always")
def _toggle_const(nodes: np.ndarray, parent: int, child: int, val: int, step: int) -> None:
    """Count a CONST child in (``step`` 1) or out (-1); the XORs of the children's rows
    and symbols name the child when there is one."""
    nodes[parent, N_CONST] += step
    nodes[parent, N_CXOR] ^= child
    nodes[parent, N_SXOR] ^= val


@nb.njit(cache=True)
def add(nodes: np.ndarray, cold: np.ndarray, table: np.ndarray, meta: np.ndarray,
        root: np.ndarray, subs: np.ndarray, slot: int, toks: np.ndarray, added: int,
        touched: np.ndarray) -> int:
    """Subscribe ``slot`` to the path of ``toks``, reporting from arrival ``added`` on.
    The caller leaves room for ``len(toks)`` new nodes and table entries. The node rows
    written go to ``touched`` (the path, root first); their number is returned."""
    node = 0
    cold[0, C_COUNT] += 1
    touched[0] = 0
    for d in range(toks.shape[0]):
        child = _child(nodes, table, node, toks[d, 0], toks[d, 1])
        if child < 0:
            child = _new_node(nodes, cold, table, meta, root, node, toks[d, 0], toks[d, 1])
        cold[child, C_COUNT] += 1
        node = child
        touched[d + 1] = node
    subs[slot, S_NODE], subs[slot, S_NEXT], subs[slot, S_ADDED] = node, nodes[node, N_SUBS], added
    nodes[node, N_SUBS] = slot
    return toks.shape[0] + 1


@nb.njit(cache=True)
def _unlink(nodes: np.ndarray, cold: np.ndarray, table: np.ndarray, meta: np.ndarray,
            root: np.ndarray, node: int) -> int:
    """Unlink ``node`` from its parent and free its row; the other row written (the
    BACK sibling before it) or -1."""
    parent, kind = cold[node, C_PARENT], cold[node, C_KIND]
    c = -1
    if kind == CONST:
        _delete(table, meta, (np.int64(parent) << 32) | nodes[node, N_VAL])
        _toggle_const(nodes, parent, node, nodes[node, N_VAL], -1)
        if parent == 0:
            root[nodes[node, N_VAL]] = -1
    elif kind == FRESH:
        nodes[parent, N_FRESH] = -1
    elif nodes[parent, N_BACK] == node:
        nodes[parent, N_BACK] = nodes[node, N_SIB]
    else:
        c = nodes[parent, N_BACK]
        while nodes[c, N_SIB] != node:
            c = nodes[c, N_SIB]
        nodes[c, N_SIB] = nodes[node, N_SIB]
    nodes[node, N_SIB] = meta[M_FREE]
    meta[M_FREE] = node
    return c


@nb.njit(cache=True)
def remove(nodes: np.ndarray, cold: np.ndarray, table: np.ndarray, meta: np.ndarray,
           root: np.ndarray, subs: np.ndarray, slot: int,
           touched: np.ndarray) -> tuple[int, int]:
    """Unsubscribe ``slot``; nodes no other subscription passes are freed. The node rows
    written go to ``touched`` (at most twice the pattern's length, plus one); returned:
    their number and the other subscription slot written (-1: none)."""
    node = subs[slot, S_NODE]
    s = -1
    if nodes[node, N_SUBS] == slot:
        nodes[node, N_SUBS] = subs[slot, S_NEXT]
    else:
        s = nodes[node, N_SUBS]
        while subs[s, S_NEXT] != slot:
            s = subs[s, S_NEXT]
        subs[s, S_NEXT] = subs[slot, S_NEXT]
    subs[slot, :] = -1
    n = 0
    while node != 0:
        touched[n] = node
        n += 1
        parent = cold[node, C_PARENT]
        cold[node, C_COUNT] -= 1
        if cold[node, C_COUNT] == 0:
            c = _unlink(nodes, cold, table, meta, root, node)
            if c >= 0:
                touched[n] = c
                n += 1
        node = parent
    cold[0, C_COUNT] -= 1
    touched[n] = 0
    return n + 1, s


# -- growth ------------------------------------------------------------------------------


@nb.njit(cache=True, inline="always")
def _const_key(nodes: np.ndarray, cold: np.ndarray, row: int) -> int:
    """The table key of the live CONST node at ``row``, or -1 (no such node)."""
    if row == 0 or cold[row, C_COUNT] <= 0 or cold[row, C_KIND] != CONST:
        return -1
    return (np.int64(cold[row, C_PARENT]) << 32) | nodes[row, N_VAL]


@nb.njit(cache=True)
def copy_rows(nodes: np.ndarray, cold: np.ndarray, to_nodes: np.ndarray,
              to_cold: np.ndarray, to_table: np.ndarray, to_meta: np.ndarray,
              lo: int, hi: int) -> None:
    """Copy node rows ``lo:hi`` into larger arrays, entering each live CONST node in
    their table (which holds none of these rows yet)."""
    for r in range(lo, hi):
        to_nodes[r, :] = nodes[r, :]
        to_cold[r, :] = cold[r, :]
        key = _const_key(nodes, cold, r)
        if key >= 0:
            _put(to_table, to_meta, key, r)


@nb.njit(cache=True)
def sync_rows(nodes: np.ndarray, cold: np.ndarray, to_nodes: np.ndarray,
              to_cold: np.ndarray, to_table: np.ndarray, to_meta: np.ndarray,
              rows: np.ndarray, copied: int) -> None:
    """Copy again the rows among ``rows`` below ``copied`` (copied before a change wrote
    them), moving their table entries with them."""
    for i in range(rows.shape[0]):
        r = rows[i]
        if r >= copied:
            continue
        old, new = _const_key(to_nodes, to_cold, r), _const_key(nodes, cold, r)
        if old != new:
            if old >= 0:
                _delete(to_table, to_meta, old)
            if new >= 0:
                _put(to_table, to_meta, new, r)
        to_nodes[r, :] = nodes[r, :]
        to_cold[r, :] = cold[r, :]


# -- matching ----------------------------------------------------------------------------


#: Columns of :func:`match`'s occurrences.
O_SUB, O_KEY, O_START, O_LEN, O_END = range(5)
OUT_FIELDS = 5


@nb.njit(cache=True)
def _group(batch_key: np.ndarray, batch_row: np.ndarray, keys: int):
    """The batch's store rows grouped by key, in stream order within a key (a counting
    sort): ``(rows, bounds)``, key ``k``'s rows being ``rows[bounds[k]:bounds[k + 1]]``."""
    bounds = np.zeros(keys + 1, dtype=np.int64)
    for i in range(batch_key.shape[0]):
        if batch_key[i] >= 0:
            bounds[batch_key[i] + 1] += 1
    for k in range(keys):
        bounds[k + 1] += bounds[k]
    rows = np.empty(bounds[keys], dtype=np.int64)
    fill = bounds[:keys].copy()
    for i in range(batch_key.shape[0]):
        k = batch_key[i]
        if k >= 0:
            rows[fill[k]] = batch_row[i]
            fill[k] += 1
    return rows, bounds


@nb.njit(cache=True, nogil=True)
def match(nodes: np.ndarray, table: np.ndarray, root: np.ndarray, subs: np.ndarray,
          longest: int,
          batch_key: np.ndarray, batch_row: np.ndarray, key_ids: np.ndarray,
          symbol: np.ndarray, arrival: np.ndarray, history: np.ndarray, held: np.ndarray,
          position: np.ndarray, out: np.ndarray, out_rows: np.ndarray) -> tuple[int, int]:
    """Read a batch: each key's occurrences ending on one of its new symbols.

    Parameters
    ----------
    nodes, table, root, subs
        The trie (module docstring).
    longest
        The longest subscribed pattern (bounds the walk's stack).
    batch_key, batch_row, key_ids
        Per edge of the batch in stream order: its key's number among the batch's keys
        (-1: in no sequence) and its row in the edge store; per key of the batch, its
        number among all keys (the row of ``history``).
    symbol, arrival
        Per row of the edge store: its interned symbol and arrival number.
    history, held, position
        Per key: the store rows of its last ``history.shape[1]`` edges (oldest first), how
        many of them there are, and how many edges it has read. Updated in place.
    out, out_rows
        Where the occurrences go: per occurrence (``out[i, :]``) the subscription slot,
        the key, the start position, the length and the arrival number of its last edge;
        in ``out_rows``, each occurrence's store rows one after the other.

    Returns
    -------
    (found, used)
        Occurrences found and rows they hold. When either exceeds its array's room,
        nothing was changed: call again with arrays that large. (Growing the arrays
        inside the walk would cost more than walking twice, rarely.)
    """
    order, bounds = _group(batch_key, batch_row, key_ids.shape[0])
    width = history.shape[1]
    found, used = 0, 0
    stack_node = np.empty((longest + 2) * (longest + 2) + 8, dtype=np.int64)
    stack_depth = np.empty_like(stack_node)
    buf = np.empty(width + order.shape[0] + 1, dtype=np.int64)
    syms = np.empty_like(buf)
    for local in range(key_ids.shape[0]):
        lo, hi = bounds[local], bounds[local + 1]
        if lo == hi:
            continue  # all its edges had no symbol
        k = key_ids[local]
        old = held[k]
        for i in range(old):
            buf[i] = history[k, i]
        for i in range(hi - lo):
            buf[old + i] = order[lo + i]
        size = old + hi - lo
        for i in range(size):
            syms[i] = symbol[buf[i]]
        first_position = position[k] - old
        for start in range(size):
            stack_node[0], stack_depth[0] = 0, 0
            sp = 1
            while sp > 0:
                sp -= 1
                node, depth = stack_node[sp], stack_depth[sp]
                s = nodes[node, N_SUBS]
                if s >= 0 and start + depth > old:
                    first = arrival[buf[start]]
                    while s >= 0:
                        if subs[s, S_ADDED] <= first:
                            if found < out.shape[0] and used + depth <= out_rows.shape[0]:
                                out[found, O_SUB], out[found, O_KEY] = s, k
                                out[found, O_START] = first_position + start
                                out[found, O_LEN] = depth
                                out[found, O_END] = arrival[buf[start + depth - 1]]
                                for i in range(depth):
                                    out_rows[used + i] = buf[start + i]
                            found += 1
                            used += depth
                        s = subs[s, S_NEXT]
                at = start + depth
                if at >= size:
                    continue
                sym = syms[at]
                consts = nodes[node, N_CONST]
                if node == 0:
                    if sym < root.shape[0] and root[sym] >= 0:
                        stack_node[sp], stack_depth[sp] = root[sym], 1
                        sp += 1
                elif consts == 1:
                    if nodes[node, N_SXOR] == sym:
                        stack_node[sp], stack_depth[sp] = nodes[node, N_CXOR], depth + 1
                        sp += 1
                elif consts > 1:
                    c = _find(table, node, sym)
                    if c >= 0:
                        stack_node[sp], stack_depth[sp] = c, depth + 1
                        sp += 1
                c = nodes[node, N_FRESH]
                if c >= 0:
                    stack_node[sp], stack_depth[sp] = c, depth + 1
                    sp += 1
                c = nodes[node, N_BACK]
                while c >= 0:
                    if syms[start + nodes[c, N_VAL]] == sym:
                        stack_node[sp], stack_depth[sp] = c, depth + 1
                        sp += 1
                    c = nodes[c, N_SIB]
    if found > out.shape[0] or used > out_rows.shape[0]:
        return found, used
    _remember(order, bounds, key_ids, history, held, position)
    return found, used


@nb.njit(cache=True)
def _remember(order: np.ndarray, bounds: np.ndarray, key_ids: np.ndarray,
              history: np.ndarray, held: np.ndarray, position: np.ndarray) -> None:
    """Each key of the batch keeps its last ``history.shape[1]`` rows."""
    width = history.shape[1]
    for local in range(key_ids.shape[0]):
        k = key_ids[local]
        new = bounds[local + 1] - bounds[local]
        keep = min(width, held[k] + new)
        from_old = keep - min(keep, new)  # rows kept from the old history
        for i in range(from_old):
            history[k, i] = history[k, held[k] - from_old + i]
        for i in range(keep - from_old):
            history[k, from_old + i] = order[bounds[local + 1] - (keep - from_old) + i]
        held[k] = keep
        position[k] += new
