"""Frequent items over a count-based sliding window with basic windows (SAL ``topk``).

SAL's ``topk(DestIp, 100000, 10000, 10000)`` (Goodman & Grunwald 2019, Listing 3) is "the
10000 most frequent ``DestIp`` values over the last 100000 items, with basic windows of 10000
items". Basic windows come from Golab, DeHaan, Demaine, Lopez-Ortiz & Munro, *Identifying
frequent items in sliding windows over on-line packet streams* (IMC 2003): the window is cut
into basic windows and the answer is refreshed each time a basic window fills.

Unlike Golab et al. (who keep only each basic window's most frequent items, an
approximation), this class is exact: at each refresh it recounts the raw values of the last
N items, which it keeps in a ring (memory O(N), recount O(N) per refresh, so O(N / b) per
item amortized, in vectorized code).
"""

from __future__ import annotations

import pickle
from typing import Any, Self

import numpy as np
import pandas as pd

from graphcep.features.base import (
    BEFORE_STREAM,
    DEFAULT_MAX_KEYS,
    FeatureDefinitionError,
    FeatureInputError,
    PositionClock,
    as_array,
    as_positions,
    check_key_bound,
    check_max_keys,
    check_window,
    reject_nulls,
    stale_error,
)


def top_k_values(window_values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` most frequent values, ties at the k-th count going to the smaller values.

    Ranking is by count descending, then value ascending, so the set is a function of the
    window's multiset alone (not of arrival order). Only the values tied at the k-th count
    are sorted.

    >>> sorted(top_k_values(np.array(["b", "a", "c", "c", "b", "d"], dtype=object), 2))
    ['b', 'c']
    >>> sorted(top_k_values(np.array(["d", "b", "a", "c"], dtype=object), 2))
    ['a', 'b']
    """
    codes, uniques = pd.factorize(window_values)
    uniques = np.asarray(uniques)
    if len(uniques) <= k:
        return uniques
    counts = np.bincount(codes)
    d = len(counts)
    kth = np.partition(counts, d - k)[d - k]  # the k-th largest count
    above = np.flatnonzero(counts > kth)
    tied = uniques[counts == kth]
    need = k - len(above)
    if need < len(tied):
        tied = tied[np.argsort(tied, kind="stable")[:need]]
    return np.concatenate([uniques[above], tied])


class TopK:
    """The ``k`` most frequent values of a field over the last ``window`` items (exact).

    Parameters
    ----------
    field
        Edge column whose values are counted (``DestIp``).
    window
        Sliding window N, in items.
    basic_window
        Basic window b, in items; must divide ``window``. The set is recomputed after each
        item at 0-based count ``i`` with ``(i + 1) % b == 0``, from exact counts over the
        last N / b complete basic windows (= the last N items then), and stays constant
        between refreshes. Before the first refresh the set is empty.
    k
        Set size. Ties at the k-th count go to the smaller values (count descending, then
        value ascending), so values must be mutually comparable (one column type).
    name
        SAL feature name, used in messages.
    max_keys
        Most distinct values a window may hold; checked at each refresh, raising
        :class:`FeatureStateError` (the window already holds at most ``window`` values, so
        this only bites when ``max_keys < window``; the feature is spent after the error).

    Notes
    -----
    Golab et al. (IMC 2003) refresh frequent items per basic window; Goodman & Grunwald
    (2019) use that structure for SAL's ``topk``. Membership at a stream position maps the
    position to the set active then, so matching does not depend on how the stream is cut
    into batches. Unkeyed only (one set for the stream).

    Examples
    --------
    >>> top = TopK("DestIp", window=4, basic_window=2, k=1, name="Top1")
    >>> top.update(np.array(["a", "b", "a", "c", "c", "c"], dtype=object))
    >>> top.membership(np.array(["a"] * 6 + ["c"], dtype=object), np.array([0, 1, 2, 3, 4, 5, 5]))
    array([False,  True,  True,  True,  True, False,  True])

    After item 1 the window is ``a b`` (tie, ``a`` wins); after item 3 it is ``a b a c``;
    after item 5 it is ``a c c c``.
    """

    def __init__(
        self,
        field: str,
        window: int,
        basic_window: int,
        k: int,
        *,
        name: str = "topk",
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        self.name = name
        self.field = field
        self.key_fields: tuple[str, ...] = ()
        self.window = check_window(name, "window", window)
        self.basic_window = check_window(name, "basic window", basic_window)
        self.k = check_window(name, "k", k)
        self.max_keys = check_max_keys(name, max_keys)
        if self.window % self.basic_window:
            raise FeatureDefinitionError(
                f"feature {name}: topk basic window {self.basic_window} does not divide the "
                f"window {self.window}; choose a basic window size that divides it"
            )
        self._ring: np.ndarray | None = None  # last N values; grows (doubling) to N
        self._consumed = 0
        self._clock = PositionClock()
        # Sets active in the last update: set i applies from position _starts[i] on.
        self._starts = np.array([BEFORE_STREAM], dtype=np.int64)
        self._sets: list[np.ndarray] = [np.zeros(0, dtype=object)]
        self._indexes: dict[int, pd.Index] = {}

    @property
    def current(self) -> np.ndarray:
        """The set in force now (unordered array of values)."""
        return self._sets[-1]

    def update(self, values: Any, keys: Any = None, positions: Any = None) -> None:
        """Consume a batch of field values in stream order (``keys`` must be ``None``)."""
        if keys is not None:
            raise FeatureInputError(f"feature {self.name} (topk) is not keyed: pass keys=None")
        vals = as_array(values)
        pos = self._clock.plan(self.name, len(vals), positions)
        if len(vals) == 0:
            return
        reject_nulls(self.name, "values", vals)
        if self._ring is None:
            self._ring = np.empty(min(self.window, 64), dtype=_ring_dtype(vals))
        # Only the set in force at the batch start is still needed from earlier updates.
        self._starts, self._sets, self._indexes = self._starts[-1:], self._sets[-1:], {}
        done = 0
        b = self.basic_window
        for end in range(b - self._consumed % b, len(vals) + 1, b):  # refresh after vals[end-1]
            self._append(vals[done:end])
            done = end
            self._refresh(int(pos[end - 1]))
        self._append(vals[done:])
        self._clock.commit(pos)

    def _append(self, chunk: np.ndarray) -> None:
        # Chunks are at most b <= N items, so they wrap around the ring at most once.
        n = len(chunk)
        if n == 0:
            return
        assert self._ring is not None
        if self._consumed + n > len(self._ring) and len(self._ring) < self.window:
            size = min(self.window, max(2 * len(self._ring), self._consumed + n))
            grown = np.empty(size, dtype=self._ring.dtype)
            grown[: self._consumed] = self._ring[: self._consumed]
            self._ring = grown
        at = self._consumed % self.window
        first = min(n, self.window - at)
        self._ring[at : at + first] = chunk[:first]
        self._ring[: n - first] = chunk[first:]
        self._consumed += n

    def _refresh(self, position: int) -> None:
        assert self._ring is not None
        held = self._ring[: min(self._consumed, self.window)]
        if self.max_keys < len(held):  # otherwise the window cannot hold too many values
            check_key_bound(self.name, len(pd.unique(held)), self.max_keys)
        members = top_k_values(held, self.k)
        self._starts = np.append(self._starts, np.int64(position))
        self._sets.append(members)

    def membership(self, vertices: Any, positions: Any) -> np.ndarray:
        """``out[i]``: is ``vertices[i]`` in the set at stream position ``positions[i]``.

        Positions may come in any order, from the start of the set in force when the last
        update began through the end of the stream so far.
        """
        verts = as_array(vertices)
        pos = as_positions(positions)
        if len(verts) != len(pos):
            raise FeatureInputError(
                f"feature {self.name}: {len(verts)} vertices but {len(pos)} positions"
            )
        out = np.zeros(len(pos), dtype=bool)
        if len(pos) == 0:
            return out
        if int(pos.min()) < self._starts[0]:
            raise stale_error(self.name, int(pos.min()), int(self._starts[0]))
        which = np.searchsorted(self._starts, pos, side="right") - 1
        for w in np.unique(which).tolist():
            mask = which == w
            out[mask] = self._index(w).get_indexer(verts[mask]) >= 0
        return out

    def _index(self, w: int) -> pd.Index:
        # A hash index per set, built on first use: membership is a hash probe per vertex.
        index = self._indexes.get(w)
        if index is None:
            index = self._indexes[w] = pd.Index(self._sets[w])
        return index

    def snapshot(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, blob: bytes) -> Self:
        """Rebuild from :meth:`snapshot` (trusted checkpoint data: it is a pickle)."""
        obj = pickle.loads(blob)
        if not isinstance(obj, cls):
            raise FeatureInputError(f"snapshot holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_indexes"] = {}  # rebuilt on demand
        return state


def _ring_dtype(values: np.ndarray) -> np.dtype:
    # Numbers keep their type (exact counts of ints); strings and the rest are objects.
    return values.dtype if values.dtype.kind in "biuf" else np.dtype(object)
