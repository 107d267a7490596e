"""Exact number of distinct values over each key's last N items (SAL ``countdistinct``).

``countdistinct(DestPort, 1000)`` on ``STREAM Netflows BY SourceIp`` counts, per source, the
distinct destination ports among its last 1000 netflows -- a port-scan signal (Goodman &
Grunwald 2019 list it among SAL's operators; SAM also offers HyperLogLog, not needed here).

The classic exact method: a ring of each key's last N values and a counter per (key, value);
a value entering with count 0 adds one distinct, a value leaving with count 1 removes one.
Values are interned to dense ids (recycled once no window holds them, so memory stays
bounded by the windows), and the counters live in one open-addressing hash table keyed by
``slot << 32 | value id``, all updated in one compiled loop over the batch.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numba as nb
import numpy as np
import pandas as pd

from graphcep.features.base import (
    DEFAULT_MAX_KEYS,
    KeyedNumericFeature,
    RingPool,
    reject_nulls,
)
from graphcep.hashing import GOLDEN_GAMMA

_EMPTY = np.int64(-1)
_MULT = GOLDEN_GAMMA  # Fibonacci hashing (graphcep.hashing)


@nb.njit(cache=True)
def _home(key, mask):
    # Fibonacci hashing: the multiply spreads the packed (slot, id) bits over the high bits.
    return np.int64((np.uint64(key) * _MULT) >> np.uint64(24)) & mask


@nb.njit(cache=True)
def _table_add(keys, vals, key, delta):
    """Add ``delta`` to ``key``'s counter (inserting it), return the new count.

    A counter reaching 0 is deleted by backward shifting, so lookups never meet tombstones.
    """
    mask = keys.shape[0] - 1
    i = _home(key, mask)
    while keys[i] != key:
        if keys[i] == _EMPTY:
            keys[i] = key
            vals[i] = 0
            break
        i = (i + 1) & mask
    vals[i] += delta
    c = vals[i]
    if c == 0:
        j = i
        while True:
            j = (j + 1) & mask
            if keys[j] == _EMPTY:
                break
            h = _home(keys[j], mask)
            # keys[j] may move back to the hole at i unless its home lies in (i, j].
            if (i < j and i < h <= j) or (i > j and (h > i or h <= j)):
                continue
            keys[i] = keys[j]
            vals[i] = vals[j]
            i = j
        keys[i] = _EMPTY
        vals[i] = 0
    return c


@nb.njit(cache=True)
def _table_rehash(keys, vals, new_size):
    nk = np.full(new_size, _EMPTY, dtype=np.int64)
    nv = np.zeros(new_size, dtype=np.int64)
    mask = new_size - 1
    for i in range(keys.shape[0]):
        if keys[i] != _EMPTY:
            j = _home(keys[i], mask)
            while nk[j] != _EMPTY:
                j = (j + 1) & mask
            nk[j] = keys[i]
            nv[j] = vals[i]
    return nk, nv


@nb.njit(cache=True)
def _distinct_kernel(
    slots, vids, window, count, distinct, off, ring, keys, vals, current, before, evicted
):
    """One pass over the batch; returns the change in hash-table entries."""
    entries = 0
    for j in range(slots.shape[0]):
        s = slots[j]
        v = vids[j]
        i = count[s]
        at = off[s] + i % window
        d = distinct[s]
        evicted[j] = -1
        if i >= window:  # item i - N leaves the window first
            old = ring[at]
            evicted[j] = old
            if _table_add(keys, vals, (s << 32) | old, -1) == 0:
                d -= 1
                entries -= 1
        if _table_add(keys, vals, (s << 32) | v, 1) == 1:
            d += 1
            entries += 1
        ring[at] = v
        count[s] = i + 1
        distinct[s] = d
        before[j] = current[s]
        current[s] = d
    return entries


class CountDistinct(KeyedNumericFeature):
    """Number of distinct values of a field over each key's last N items (exact).

    Parameters
    ----------
    field
        Edge column whose distinct values are counted (any hashable type, no nulls).
    window
        N: each key's last N items (the stream's, when unkeyed).
    key_fields
        Columns keying the stream; empty for one count over the whole stream.
    name
        SAL feature name, used in messages.
    max_keys
        Most keys held before :class:`FeatureStateError`.

    Notes
    -----
    Exact and integer-valued, so identical however the stream is batched. ``values_at``
    returns floats (NaN before a key's first item).

    Examples
    --------
    >>> cd = CountDistinct("DestPort", window=3, key_fields=("SrcIp",), name="Ports")
    >>> cd.update(np.array([22, 80, 22, 443, 22]), keys=np.array(list("aaaaa"), dtype=object))
    >>> cd.last_values()
    array([1., 2., 2., 3., 2.])
    """

    def __init__(
        self,
        field: str,
        window: int,
        *,
        key_fields: tuple[str, ...] = (),
        name: str = "countdistinct",
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        super().__init__(name, field, window, key_fields, max_keys)
        self._pool = RingPool(self.window, [np.int64])
        self._count = np.zeros(0, dtype=np.int64)
        self._distinct = np.zeros(0, dtype=np.int64)
        self._keys = np.full(64, _EMPTY, dtype=np.int64)  # hash table: (slot, id) -> count
        self._vals = np.zeros(64, dtype=np.int64)
        self._entries = 0
        self._vid_of: dict[Hashable, int] = {}  # value -> id
        self._value_of: list[Hashable | None] = []  # id -> value
        self._refs = np.zeros(0, dtype=np.int64)  # id -> ring entries holding it
        self._free: list[int] = []

    def _prepare(self, values: np.ndarray) -> np.ndarray:
        reject_nulls(self.name, "values", values)
        return values

    def _grow(self, n_slots: int) -> None:
        self._pool.grow_slots(n_slots)
        extra = n_slots - len(self._count)
        self._count = np.concatenate([self._count, np.zeros(extra, dtype=np.int64)])
        self._distinct = np.concatenate([self._distinct, np.zeros(extra, dtype=np.int64)])

    def _intern(self, values: np.ndarray) -> np.ndarray:
        codes, uniques = pd.factorize(values)
        get = self._vid_of.get
        ids = []
        for u in np.asarray(uniques).tolist():
            vid = get(u)
            if vid is None:
                vid = self._free.pop() if self._free else len(self._value_of)
                if vid == len(self._value_of):
                    self._value_of.append(u)
                else:
                    self._value_of[vid] = u
                self._vid_of[u] = vid
            ids.append(vid)
        if len(self._value_of) > len(self._refs):
            grown = np.zeros(max(len(self._value_of), 2 * len(self._refs)), dtype=np.int64)
            grown[: len(self._refs)] = self._refs
            self._refs = grown
        return np.asarray(ids, dtype=np.int64)[codes]

    def _consume(self, slots: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        vids = self._intern(values)
        uniq, per_slot = np.unique(slots, return_counts=True)
        self._pool.reserve(uniq, np.minimum(self.window, self._count[uniq] + per_slot))
        need = 2 * (self._entries + len(slots))  # load factor stays <= 1/2
        if need > len(self._keys):
            size = 1 << max(6, (need - 1).bit_length())
            self._keys, self._vals = _table_rehash(self._keys, self._vals, size)
        before = np.empty(len(slots))
        evicted = np.empty(len(slots), dtype=np.int64)
        self._entries += _distinct_kernel(
            slots, vids, self.window, self._count, self._distinct, self._pool.off,
            self._pool.data[0], self._keys, self._vals, self._current, before, evicted,
        )  # fmt: skip
        self._release(vids, evicted[evicted >= 0])
        return before, self._after(slots, before)

    def _release(self, added: np.ndarray, evicted: np.ndarray) -> None:
        # Ids no ring holds any more go back to the free list, and their values are forgotten.
        np.add.at(self._refs, added, 1)
        np.subtract.at(self._refs, evicted, 1)
        touched = np.unique(evicted)
        for vid in touched[self._refs[touched] == 0].tolist():
            del self._vid_of[self._value_of[vid]]
            self._value_of[vid] = None
            self._free.append(vid)

    @property
    def distinct_values_held(self) -> int:
        """Distinct values interned (held by at least one window)."""
        return len(self._vid_of)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pool"] = self._pool.compacted()
        return state
