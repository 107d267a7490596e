"""The compiled trie's arrays (:mod:`~graphcep.engines.sequences.trie`), grown a few rows
per change so that no subscribe or unsubscribe pays for a whole copy.

Doubling an array when it is full costs one change the copy of everything (and, for the
hash table, a rehash of every entry): milliseconds with 10,000 subscriptions. Here the
larger arrays are built while the trie keeps working in the current ones:

- once the node rows, the table's used entries or the subscription slots pass half their
  arrays, larger arrays are allocated (their memory provided page by page as it is first
  written, in small pages: see :func:`_untouched`) -- twice the rows where they ran short, a table four times the node rows, so
  that rebuilding it also drops its tombstones;
- each later change first does its work in the current arrays, then copies again the rows
  it wrote that were copied already (:func:`~graphcep.engines.sequences.trie.sync_rows`,
  moving their table entries), then advances the copy by a step proportional to its
  pattern's length: the new table is cleared, then node rows are copied
  (:func:`~graphcep.engines.sequences.trie.copy_rows`, each live constant node entered in
  the new table) and subscription rows;
- when every row is copied the larger arrays replace the current ones, whose memory
  is given back to the system a few pages per change (:func:`_release`).

A step clears eight times as many table rows as it copies node rows, ``8 * max(m, 8)``
node rows for a change adding ``m`` nodes: since the copy starts with half the room
left, it ends long before the current arrays fill (after adding about a fifth of their
rows at most), so a change never waits for it. Should one still need more room than is
left (a pattern longer than half the rows), the copy is finished at once.

:func:`~graphcep.engines.sequences.trie.match` reads only the current arrays, which
always hold the whole trie. A checkpoint stores the current arrays alone; the copy starts
again after a restore.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

from graphcep.engines.sequences import trie as kernel
from graphcep.engines.sequences.trie import M_LIVE, M_NODES, M_USED

#: Node rows at first; the table has ``TABLE_PER_NODE`` times as many rows.
FIRST_NODES, FIRST_SLOTS, TABLE_PER_NODE = 1024, 256, 4
#: Table rows cleared per node row copied; node rows copied per node added (at least).
CLEAR_PER_ROW, STEP_PER_NODE, MIN_STEP = 8, 8, 64
#: Bytes of replaced arrays given back to the system per change.
RELEASE_BYTES = 1 << 16


class Trie:
    """A trie's arrays, grown as subscriptions come (see the module docstring).

    >>> trie, symbols = Trie(), {}
    >>> a = trie.add(kernel.tokens(("a", 0, 0), symbols), 0)
    >>> b = trie.add(kernel.tokens(("a", 0, "b"), symbols), 0)
    >>> int(trie.meta[M_NODES]), trie.live_nodes()
    (5, 5)
    >>> trie.remove(a); trie.live_nodes()
    4
    """

    def __init__(self) -> None:
        self.nodes, self.cold = kernel.new_nodes(FIRST_NODES)
        self.root = np.full(256, -1, dtype=np.int32)  # symbol -> the root's CONST child
        self.table = kernel.new_table(TABLE_PER_NODE * FIRST_NODES)
        self.meta = kernel.new_meta()
        self.subs = np.full((FIRST_SLOTS, kernel.SUB_FIELDS), -1, dtype=np.int64)
        self.free_slots: list[int] = []
        self.slots = 0  # slots ever handed out
        self.touched = np.empty(64, dtype=np.int64)  # node rows the last change wrote
        self.larger: _Larger | None = None  # the arrays being built, if any
        # the memory of replaced arrays, and how many bytes of each are given back
        self.retired: list[list[Any]] = []

    def add(self, toks: np.ndarray, added: int) -> int:
        """Subscribe the path ``toks`` from arrival ``added`` on; its slot number."""
        m = len(toks)
        if 2 * m + 2 > len(self.touched):
            self.touched = np.empty(4 * m + 4, dtype=np.int64)
        self._room(m)
        if self.free_slots:
            slot = self.free_slots.pop()
        else:
            slot, self.slots = self.slots, self.slots + 1
        consts = toks[toks[:, 0] == kernel.CONST, 1]
        if len(consts) and consts.max() >= len(self.root):
            grown = np.full(max(2 * len(self.root), int(consts.max()) + 1), -1, np.int32)
            grown[:len(self.root)] = self.root
            self.root = grown
        n = kernel.add(self.nodes, self.cold, self.table, self.meta, self.root, self.subs,
                       slot, toks, added, self.touched)
        self._grow(m, n, slot, -1)
        return slot

    def remove(self, slot: int) -> None:
        """Unsubscribe ``slot`` (its number may be handed out again)."""
        n, other = kernel.remove(self.nodes, self.cold, self.table, self.meta, self.root,
                                 self.subs, slot, self.touched)
        self.free_slots.append(slot)
        self._grow(0, n, slot, other)

    def live_nodes(self) -> int:
        """Nodes some subscription's path passes, the root included."""
        return int(np.count_nonzero(self.cold[:self.meta[M_NODES], kernel.C_COUNT])) + \
            int(self.cold[0, kernel.C_COUNT] == 0)

    def shape(self, alphabet: int = 16) -> dict[str, float]:
        """Live nodes (the root included) by the kind of token reaching them, the depth,
        and ``steps``: the nodes a walk from one start position visits on average, symbols
        uniform over ``alphabet`` -- the sum over nodes of ``alphabet ** -k``, ``k`` the
        constants and back-references on the node's path (each holds with probability
        ``1 / alphabet``; a variable's first occurrence always does)."""
        level: dict[int, tuple[int, int]] = {0: (0, 0)}  # node -> (depth, constrained)

        def climb(row: int) -> tuple[int, int]:
            path, up = [], row
            while up not in level:
                path.append(up)
                up = int(self.cold[up, kernel.C_PARENT])
            depth, k = level[up]
            for r in reversed(path):
                depth, k = depth + 1, k + int(self.cold[r, kernel.C_KIND] != kernel.FRESH)
                level[r] = (depth, k)
            return level[row]

        live = np.flatnonzero(self.cold[:self.meta[M_NODES], kernel.C_COUNT] > 0)
        rows = [climb(int(r)) for r in live if r != 0]
        kinds = np.bincount(self.cold[live[live != 0], kernel.C_KIND], minlength=3)
        return {"nodes": len(rows) + 1, "constants": int(kinds[kernel.CONST]),
                "variables": int(kinds[kernel.FRESH]), "back_references": int(kinds[kernel.BACK]),
                "depth": max((d for d, _ in rows), default=0),
                "steps": 1.0 + sum(float(alphabet) ** -k for _, k in rows)}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "larger": None, "retired": []}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"touched": np.empty(64, dtype=np.int64), "larger": None,
                              "retired": [], **state})

    # -- growth ---------------------------------------------------------------------------

    def _due(self, m: int) -> bool:
        """Whether the arrays are past half full (with ``m`` more nodes)."""
        return (2 * (self.meta[M_NODES] + m) > len(self.nodes)
                or 2 * (self.meta[M_USED] + m) > len(self.table)
                or 2 * (self.slots + 1) > len(self.subs))

    def _room(self, m: int) -> None:
        """Room in the current arrays for ``m`` new nodes, table entries and a slot: the
        copy under way is finished at once if not (never, in the usual course)."""
        while (self.meta[M_NODES] + m > len(self.nodes)
               or 4 * (self.meta[M_USED] + m) > 3 * len(self.table)
               or (not self.free_slots and self.slots >= len(self.subs))):
            if self.larger is None:
                self.larger = _Larger(self, m)
            self.larger.finish(self)
            self._replace()

    def _grow(self, m: int, n: int, slot: int, other: int) -> None:
        """After a change: keep the arrays being built up to date, and build on."""
        if self.retired:
            _release(self.retired, RELEASE_BYTES)
        if self.larger is None:
            if not self._due(0):
                return
            self.larger = _Larger(self, 0)
        self.larger.sync(self, self.touched[:n], slot, other)
        self.larger.step(self, STEP_PER_NODE * max(m, MIN_STEP // STEP_PER_NODE))
        self._replace()

    def _replace(self) -> None:
        larger = self.larger
        if larger is None or not larger.done(self):
            return
        self.retired += [[m, 0] for a in (self.nodes, self.cold, self.subs, self.table)
                         if (m := _mapping(a)) is not None]
        self.nodes, self.cold, self.subs = larger.nodes, larger.cold, larger.subs
        self.table = larger.table
        self.meta[M_LIVE], self.meta[M_USED] = larger.meta[M_LIVE], larger.meta[M_USED]
        self.larger = None


class _Larger:
    """Larger arrays being filled from a trie's current ones (module docstring)."""

    def __init__(self, trie: Trie, m: int) -> None:
        nodes = len(trie.nodes)
        while 2 * (trie.meta[M_NODES] + m) > nodes:
            nodes *= 2
        slots = len(trie.subs)
        while 2 * (trie.slots + 1) > slots:
            slots *= 2
        self.nodes = _untouched((nodes, kernel.NODE_FIELDS), np.int32)
        self.cold = _untouched((nodes, kernel.COLD_FIELDS), np.int32)
        self.subs = _untouched((slots, kernel.SUB_FIELDS), np.int64)
        self.table = _untouched((TABLE_PER_NODE * nodes, 2), np.int64)
        self.meta = np.zeros(4, dtype=np.int64)  # M_LIVE, M_USED of the new table
        self.cleared = self.copied = self.subs_copied = 0

    def done(self, trie: Trie) -> bool:
        return (self.cleared == len(self.table) and self.copied >= trie.meta[M_NODES]
                and self.subs_copied >= trie.slots)

    def sync(self, trie: Trie, rows: np.ndarray, slot: int, other: int) -> None:
        """Copy again what a change wrote where it was copied already."""
        kernel.sync_rows(trie.nodes, trie.cold, self.nodes, self.cold, self.table,
                         self.meta, rows, self.copied)
        for s in (slot, other):
            if 0 <= s < self.subs_copied:
                self.subs[s] = trie.subs[s]

    def finish(self, trie: Trie) -> None:
        while not self.done(trie):
            self.step(trie, len(self.table) + len(trie.nodes) + len(trie.subs))

    def step(self, trie: Trie, rows: int) -> None:
        """Clear ``CLEAR_PER_ROW * rows`` table rows, or copy ``rows`` node rows and as
        many subscription rows once the table is clear."""
        if self.cleared < len(self.table):
            hi = min(len(self.table), self.cleared + CLEAR_PER_ROW * rows)
            self.table[self.cleared:hi] = kernel.EMPTY
            self.cleared = hi
            return
        hi = min(int(trie.meta[M_NODES]), self.copied + rows)
        kernel.copy_rows(trie.nodes, trie.cold, self.nodes, self.cold, self.table, self.meta,
                         self.copied, hi)
        self.copied = max(self.copied, hi)
        hi = min(trie.slots, self.subs_copied + rows)
        self.subs[self.subs_copied:hi] = trie.subs[self.subs_copied:hi]
        self.subs_copied = max(self.subs_copied, hi)


def _untouched(shape: tuple[int, int], dtype: type) -> np.ndarray:
    """An array whose memory the system provides page by page as it is first written
    (an anonymous mapping). NumPy asks for huge pages for large arrays, and the first
    write to a huge page clears 2 MiB at once: milliseconds, inside one change."""
    size = shape[0] * shape[1] * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, size), dtype=dtype).reshape(shape)


def _mapping(a: np.ndarray) -> mmap.mmap | None:
    """The anonymous mapping holding ``a``'s memory, if :func:`_untouched` made it."""
    base = a.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def _release(retired: list[list[Any]], size: int) -> None:
    """Give ``size`` more bytes of the first retired mapping back to the system (freeing
    a large mapping at once takes milliseconds); forget it once given back whole."""
    m, done = retired[0]
    if done >= len(m) or not hasattr(mmap, "MADV_DONTNEED"):  # (a system without it)
        retired.pop(0)  # unmapped when no array refers to it any more: nothing left
        return
    m.madvise(mmap.MADV_DONTNEED, done, min(size, len(m) - done))
    retired[0][1] = done + size
