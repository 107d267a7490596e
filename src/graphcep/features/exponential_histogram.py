"""Sliding-window sum, average and variance per key (SAL ``ehsum``, ``ehave``, ``ehvar``).

``Sums = FOREACH VertsByDest GENERATE ehsum(SrcTotalBytes, 1000);`` over
``VertsByDest = STREAM Netflows BY DestIp;`` is, for each ``DestIp``, the sum of
``SrcTotalBytes`` over that key's last 1000 items (Goodman & Grunwald 2019). SAM
approximates these with exponential histograms (Datar, Gionis, Indyk & Motwani, *Maintaining
stream statistics over sliding windows*, SIAM J. Comput. 2002). Two modes here:

``mode="exact"`` (default)
    Exact per-key window statistics in a compiled per-item loop, with each key's window kept
    in a ring. To stay exact and identical however the stream is batched, it uses *blocked
    prefix sums*: a key's items are cut into aligned blocks of N (by the key's own item
    count); ``F[i]`` is the running sum since the start of ``i``'s block and ``T`` the total of
    the previous block, so the sum of items ``i-N+1 .. i`` is ``F[i] + (T - F[i-N])``. Every
    number is a fixed expression of the stream, so batching never changes a bit, and float
    rounding stays that of sums over 2N items (no drift over the stream's life). Integer
    fields are summed in int64 (exact); values are shifted by the key's first value before
    the second moment so the variance does not cancel catastrophically. Variance is the
    population variance (divide by n).
``mode="eh"``
    :class:`ExponentialHistogram`, the Datar et al. approximation: relative error at most
    ``epsilon`` on the sum and average, for non-negative values; a per-item Python loop
    (SAM fidelity, not the fast path). ``ehvar`` in this mode combines histograms of ``x``
    and ``x**2`` and guarantees ``|error| <= (3 eps + eps**2) * mean(x**2)`` -- an absolute
    bound, not a relative one (Babcock et al.'s variance histogram is not implemented).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

import numba as nb
import numpy as np

from graphcep.features.base import (
    DEFAULT_MAX_KEYS,
    FeatureDefinitionError,
    FeatureInputError,
    KeyedNumericFeature,
    RingPool,
    reject_nulls,
)

Stat = Literal["sum", "mean", "var"]
STATS: dict[str, int] = {"sum": 0, "mean": 1, "var": 2}
#: SAL operator -> statistic.
OPERATOR_STATS: dict[str, Stat] = {"ehsum": "sum", "ehave": "mean", "ehvar": "var"}


class ExponentialHistogram:
    """Sum of the last ``window`` non-negative items within relative error ``epsilon``.

    Datar, Gionis, Indyk & Motwani (2002). Buckets, oldest first, each hold the total of a
    run of consecutive items and the run's first and last item numbers. Only the oldest
    bucket may straddle the window's edge; the estimate counts half of it, so the error is
    at most half its total. Datar et al.'s invariant bounds that: a bucket of more than one
    item totals at most ``2 * epsilon`` times everything newer, hence the error is at most
    ``epsilon`` times the true sum. Datar et al. keep power-of-two sizes for 0/1 streams;
    for real weights this class merges greedily instead (two neighbours merge when the
    result still satisfies the invariant), scanning only when the bucket count has doubled
    since the last scan, so updates cost O(1) amortized and the bucket count stays
    O((1 / epsilon) log(total / smallest item)).

    Parameters
    ----------
    window
        Items in the window (count based).
    epsilon
        Relative error bound, in (0, 1].

    Examples
    --------
    >>> eh = ExponentialHistogram(window=100, epsilon=0.1)
    >>> for x in range(1, 301):
    ...     eh.update(x)
    >>> true = sum(range(201, 301))
    >>> abs(eh.estimate() - true) <= 0.1 * true, eh.count, len(eh) < 100
    (True, 100, True)
    """

    def __init__(self, window: int, epsilon: float) -> None:
        if not 0 < epsilon <= 1:
            raise FeatureDefinitionError(f"epsilon must be in (0, 1], got {epsilon!r}")
        self.window = window
        self.epsilon = epsilon
        self.seen = 0  # items ever inserted
        self.total: float = 0  # sum of all buckets' totals
        self._buckets: deque[list] = deque()  # [first item, last item, total], oldest first
        self._scan_at = 16

    def __len__(self) -> int:
        return len(self._buckets)

    @property
    def count(self) -> int:
        """Items in the window (exact: the window is count based)."""
        return min(self.seen, self.window)

    def update(self, x: float) -> None:
        if x < 0:
            raise FeatureInputError(f"exponential histograms need non-negative values, got {x}")
        i = self.seen
        self.seen += 1
        self._buckets.append([i, i, x])
        self.total += x
        edge = i - self.window  # items at or before edge have left the window
        while self._buckets[0][1] <= edge:
            self.total -= self._buckets.popleft()[2]
        if len(self._buckets) > self._scan_at:
            self._merge()
            self._scan_at = max(16, 2 * len(self._buckets))

    def _merge(self) -> None:
        merged: list[list] = []  # newest first
        mass = 0.0  # total of the buckets scanned so far
        for b in reversed(self._buckets):
            if merged:
                last = merged[-1]
                newer = mass - last[2]
                if last[2] + b[2] <= 2 * self.epsilon * newer:
                    last[0] = b[0]
                    last[2] += b[2]
                    mass += b[2]
                    continue
            merged.append(list(b))
            mass += b[2]
        self._buckets = deque(reversed(merged))

    def estimate(self) -> float:
        """The window's sum, within ``epsilon`` of the truth (relative)."""
        if not self._buckets:
            return 0.0
        first, _, oldest = self._buckets[0]
        if first <= self.seen - 1 - self.window:  # the oldest bucket straddles the edge
            return self.total - oldest / 2
        return float(self.total)


@nb.njit(cache=True)
def _moments_kernel(
    slots, x, window, stat, is_int, count, ref, fcur1, fcur2, tail1, tail2, off, data1, data2,
    current, before,
):  # fmt: skip
    """Exact window statistics, item by item, with blocked prefix sums (see module doc)."""
    with_sq = stat == 2
    for j in range(slots.shape[0]):
        s = slots[j]
        i = count[s]
        r = i % window
        if i == 0:
            ref[s] = x[j]
        y = x[j] - ref[s]
        yf = np.float64(y)
        y2 = yf * yf
        if r == 0:  # a new block starts its running sums from nothing
            f1 = y
            f2 = y2
        else:
            f1 = fcur1[s] + y
            f2 = fcur2[s] + y2
        at = off[s] + r  # ring slot of item i, holding F[i - N] until overwritten
        if i < window or r == window - 1:  # the window is whole blocks from a block start
            w1 = f1
            w2 = f2
        else:
            w1 = f1 + (tail1[s] - data1[at])
            w2 = f2 + (tail2[s] - data2[at]) if with_sq else 0.0
        data1[at] = f1
        fcur1[s] = f1
        if with_sq:
            data2[at] = f2
            fcur2[s] = f2
        if r == window - 1:
            tail1[s] = f1
            tail2[s] = f2
        count[s] = i + 1
        n = i + 1 if i < window else window
        if stat == 0:
            v = np.float64(w1 + n * ref[s])
        elif stat == 1:
            v = np.float64(w1 + n * ref[s]) / n if is_int else ref[s] + w1 / n
        else:
            m = np.float64(w1) / n
            v = max(w2 / n - m * m, 0.0)
        before[j] = current[s]
        current[s] = v


class SlidingStat(KeyedNumericFeature):
    """Sum, average or population variance of a field over each key's last N items.

    Parameters
    ----------
    stat
        ``"sum"`` (``ehsum``), ``"mean"`` (``ehave``) or ``"var"`` (``ehvar``).
    field
        Edge column whose values are aggregated (numeric, no nulls).
    window
        N: each key's last N items (the stream's, when unkeyed).
    key_fields
        Columns keying the stream (``STREAM Netflows BY DestIp``); empty for one value.
    mode
        ``"exact"`` (default) or ``"eh"`` (Datar et al. exponential histograms, relative
        error ``epsilon``, non-negative values only). See the module docstring.
    epsilon
        Error bound for ``mode="eh"``.
    name
        SAL feature name, used in messages.
    max_keys
        Most keys held before :class:`FeatureStateError`.

    Notes
    -----
    Integer fields are exact (int64 sums); float fields are summed in float64 in a fixed
    order, so results are bit-identical however the stream is batched. The value of key x
    at position p is over x's last N items at or before p; NaN before x's first item.

    Examples
    --------
    >>> sums = SlidingStat("sum", "bytes", window=2, key_fields=("DestIp",), name="Sums")
    >>> sums.update(np.array([5, 1, 7, 2]), keys=np.array(["a", "b", "a", "a"], dtype=object))
    >>> sums.last_values()
    array([ 5.,  1., 12.,  9.])
    >>> sums.values_at(np.array(["a", "a", "b", "z"], dtype=object), np.array([1, 3, 3, 3]))
    array([ 5.,  9.,  1., nan])
    """

    def __init__(
        self,
        stat: Stat,
        field: str,
        window: int,
        *,
        key_fields: tuple[str, ...] = (),
        mode: Literal["exact", "eh"] = "exact",
        epsilon: float = 0.01,
        name: str = "",
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        if stat not in STATS:
            raise FeatureDefinitionError(f"feature {name}: stat must be one of {list(STATS)}")
        if mode not in ("exact", "eh"):
            raise FeatureDefinitionError(f"feature {name}: mode must be 'exact' or 'eh'")
        if mode == "eh" and not 0 < epsilon <= 1:
            raise FeatureDefinitionError(f"feature {name}: epsilon must be in (0, 1]")
        super().__init__(name or f"eh{stat}", field, window, key_fields, max_keys)
        self.stat: Stat = stat
        self.mode = mode
        self.epsilon = epsilon
        self._dtype: np.dtype | None = None  # int64 or float64, fixed by the first batch
        self._pool: RingPool | None = None
        self._state: dict[str, np.ndarray] = {}
        self._histograms: list[list[ExponentialHistogram]] = []

    def _prepare(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.kind not in "biuf":
            raise FeatureInputError(
                f"feature {self.name}: {self.field} must be numeric, got {values.dtype}"
            )
        reject_nulls(self.name, "values", values)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            raise FeatureInputError(f"feature {self.name}: values must be finite")
        if self.mode == "eh" and (values < 0).any():
            raise FeatureInputError(
                f"feature {self.name}: mode='eh' needs non-negative values; use mode='exact'"
            )
        if self._dtype is None:
            self._dtype = np.dtype(np.int64 if values.dtype.kind in "biu" else np.float64)
        fractional = values.dtype.kind == "f" and not (values == np.floor(values)).all()
        if self._dtype == np.int64 and fractional:
            raise FeatureInputError(
                f"feature {self.name}: got fractional values after integer ones"
            )
        return values.astype(self._dtype, copy=False)

    def _grow(self, n_slots: int) -> None:
        if self.mode == "eh":
            parts = 2 if self.stat == "var" else 1
            missing = n_slots - len(self._histograms)
            self._histograms += [
                [ExponentialHistogram(self.window, self.epsilon) for _ in range(parts)]
                for _ in range(missing)
            ]
            return
        assert self._dtype is not None
        if self._pool is None:
            dtypes = [self._dtype] + ([np.float64] if self.stat == "var" else [])
            self._pool = RingPool(self.window, dtypes)
        self._pool.grow_slots(n_slots)
        spec = {"count": np.int64, "ref": self._dtype, "fcur1": self._dtype, "tail1": self._dtype}
        spec |= {"fcur2": np.float64, "tail2": np.float64}
        for key, dt in spec.items():
            old = self._state.get(key, np.zeros(0, dtype=dt))
            self._state[key] = np.concatenate([old, np.zeros(n_slots - len(old), dtype=dt)])

    def _consume(self, slots: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.mode == "eh":
            return self._consume_eh(slots, values)
        assert self._pool is not None
        st = self._state
        uniq, per_slot = np.unique(slots, return_counts=True)
        self._pool.reserve(uniq, np.minimum(self.window, st["count"][uniq] + per_slot))
        data1 = self._pool.data[0]
        data2 = self._pool.data[1] if self.stat == "var" else np.zeros(1)
        before = np.empty(len(slots))
        _moments_kernel(
            slots, values, self.window, STATS[self.stat], self._dtype == np.int64,
            st["count"], st["ref"], st["fcur1"], st["fcur2"], st["tail1"], st["tail2"],
            self._pool.off, data1, data2, self._current, before,
        )  # fmt: skip
        return before, self._after(slots, before)

    def _consume_eh(self, slots: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        before = np.empty(len(slots))
        after = np.empty(len(slots))
        current = self._current
        for j, (s, x) in enumerate(zip(slots.tolist(), values.tolist(), strict=True)):
            hists = self._histograms[s]
            hists[0].update(x)
            if len(hists) > 1:
                hists[1].update(x * x)
            before[j] = current[s]
            current[s] = after[j] = self._estimate(hists)
        return before, after

    def _estimate(self, hists: list[ExponentialHistogram]) -> float:
        n = hists[0].count
        total = hists[0].estimate()
        if self.stat == "sum":
            return float(total)
        if self.stat == "mean":
            return total / n
        mean = total / n
        return max(hists[1].estimate() / n - mean * mean, 0.0)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._pool is not None:
            state["_pool"] = self._pool.compacted()
        return state
