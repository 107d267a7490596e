"""What every streaming feature shares: the protocols the matcher uses, errors, positions,
key slots, per-key ring storage and the history that answers point-in-stream queries.

Features are **count based over stream positions**. Every item a feature consumes has a
position (by default 0, 1, 2, ... in the order items arrive; a caller feeding a sub-stream
may pass the items' positions in the whole stream instead). A feature's value *at position
p* is its state after consuming every item at or before ``p``. Windows count items of the
feature's own stream ("the last N items"), never time.

Two query shapes serve vertex constraints, both vectorized over a batch:

* set features (``topk``): :meth:`SetFeature.membership` -- is vertex ``v`` in the set at
  position ``p``;
* keyed numeric features (``ehsum``, ``ehave``, ``ehvar``, ``countdistinct``):
  :meth:`NumericFeature.values_at` -- the value for key ``x`` at position ``p`` (NaN while
  ``x`` has no item at or before ``p``).

Queries may ask about any position from the end of the previous update on (the state there
is what the last update started from) through the last update's items; an engine calls
``update(batch)`` and then asks about the batch's edges. Older positions raise
:class:`FeatureStateError` because their history is no longer kept. Positions after the
last consumed item get the current state: the caller promises it fed every item up to them.
Results never depend on how the stream is cut into updates.
"""

from __future__ import annotations

import pickle
from collections.abc import Hashable, Sequence
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import pandas as pd
import pyarrow as pa

#: Default bound on the keys (or distinct values) one feature may hold.
DEFAULT_MAX_KEYS = 1_000_000

#: Slots are packed with value ids into one int64 in the hash tables, so they stay below 2**31.
MAX_SLOTS = 2**31 - 1

#: Position before every stream position: the state there is the empty initial one.
BEFORE_STREAM = np.iinfo(np.int64).min


class FeatureError(Exception):
    """Base class of the errors features raise."""


class FeatureDefinitionError(FeatureError, ValueError):
    """A feature definition that cannot be built (bad operator, parameters or keying)."""


class FeatureInputError(FeatureError, ValueError):
    """An update or query whose input is malformed (lengths, order, nulls, types)."""


class FeatureStateError(FeatureError, RuntimeError):
    """The feature's state bound was reached, or a query asks for history no longer kept."""


@runtime_checkable
class Feature(Protocol):
    """A streaming feature: consumes items in stream order, in batches of any size."""

    name: str  #: the SAL name (``Top1000``)
    field: str  #: the edge column whose values it consumes (``DestIp``)
    key_fields: tuple[str, ...]  #: the columns keying it (empty: one value for the stream)

    def update(
        self, values: Any, keys: Any = None, positions: Any = None
    ) -> None:  # pragma: no cover - protocol
        """Consume a batch of items (field values; keys for keyed features) in stream order."""
        ...

    def snapshot(self) -> bytes:  # pragma: no cover - protocol
        """The whole state as bytes; ``type(feature).restore(blob)`` rebuilds it."""
        ...


@runtime_checkable
class SetFeature(Feature, Protocol):
    """A feature whose value is a set of field values (``topk``)."""

    def membership(self, vertices: Any, positions: Any) -> np.ndarray:  # pragma: no cover
        """``out[i]``: is ``vertices[i]`` in the set at stream position ``positions[i]``."""
        ...


@runtime_checkable
class NumericFeature(Feature, Protocol):
    """A feature with one number per key (``ehsum``, ``ehave``, ``ehvar``, ``countdistinct``)."""

    def values_at(self, keys: Any, positions: Any) -> np.ndarray:  # pragma: no cover
        """``out[i]``: the value for ``keys[i]`` at ``positions[i]`` (NaN: key not seen yet)."""
        ...


# ---------------------------------------------------------------------------- inputs


def as_array(values: Any) -> np.ndarray:
    """A 1-D NumPy array from a NumPy array, Arrow array, or sequence."""
    if isinstance(values, pa.ChunkedArray | pa.Array):
        return values.to_numpy(zero_copy_only=False)
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise FeatureInputError(f"expected a 1-D array of values, got shape {arr.shape}")
    return arr


def reject_nulls(feature: str, what: str, arr: np.ndarray) -> None:
    """Nulls have no place in a window (a NaN sum never recovers), so refuse them early."""
    if arr.dtype.kind in "iub":
        return
    if pd.isna(arr).any():
        raise FeatureInputError(
            f"feature {feature}: {what} contain nulls/NaN; fill or filter them before the feature"
        )


def check_window(feature: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise FeatureDefinitionError(
            f"feature {feature}: {name} must be a positive integer, got {value!r}"
        )
    return int(value)


def is_multi_key(keys: Any) -> bool:
    """A tuple/list of arrays is one array per key field; anything else is one key column."""
    return isinstance(keys, tuple | list) and any(
        isinstance(k, np.ndarray | pa.Array | pa.ChunkedArray) for k in keys
    )


def factorize_keys(feature: str, keys: Any) -> tuple[np.ndarray, list[Hashable]]:
    """Dense codes for a batch of keys and the distinct keys (tuples when multi-field)."""
    if is_multi_key(keys):
        columns = [as_array(k) for k in keys]
        for c in columns:
            reject_nulls(feature, "keys", c)
        index = pd.MultiIndex.from_arrays(columns)
        codes, uniques = index.factorize()
        return np.asarray(codes, dtype=np.int64), list(uniques)
    arr = as_array(keys)
    reject_nulls(feature, "keys", arr)
    codes, uniques = pd.factorize(arr)
    return np.asarray(codes, dtype=np.int64), np.asarray(uniques).tolist()


class PositionClock:
    """Assigns stream positions to consumed items and checks given ones are increasing."""

    def __init__(self) -> None:
        self.next = 0  #: smallest position the next item may have
        self.last = BEFORE_STREAM  #: position of the last consumed item

    def plan(self, feature: str, n: int, positions: Any) -> np.ndarray:
        """Positions for the next ``n`` items, without committing them."""
        if positions is None:
            return np.arange(self.next, self.next + n, dtype=np.int64)
        pos = np.asarray(as_array(positions), dtype=np.int64)
        if len(pos) != n:
            raise FeatureInputError(f"feature {feature}: {n} values but {len(pos)} positions")
        if n and (pos[0] < self.next or (n > 1 and bool((np.diff(pos) <= 0).any()))):
            raise FeatureInputError(
                f"feature {feature}: positions must strictly increase from {self.next} on"
            )
        return pos

    def commit(self, pos: np.ndarray) -> None:
        if len(pos):
            self.last = int(pos[-1])
            self.next = self.last + 1


def as_positions(positions: Any) -> np.ndarray:
    return np.asarray(as_array(positions), dtype=np.int64)


def stale_error(feature: str, oldest: int, kept_from: int) -> FeatureStateError:
    return FeatureStateError(
        f"feature {feature}: position {oldest} is older than the history kept "
        f"(positions >= {kept_from}); ask right after the update that consumed it"
    )


# ----------------------------------------------------------------------------- keys


class KeySlots:
    """Maps keys to dense slot numbers, refusing to hold more than ``max_keys`` of them.

    Keys are never forgotten: a key's window is its own last N items, which no later item
    of another key expires. Hence the bound, with an error that says how to lift it.
    """

    def __init__(self, feature: str, max_keys: int) -> None:
        self.feature = feature
        self.max_keys = max_keys
        self.slot_of: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return len(self.slot_of)

    def assign(self, keys: Any) -> np.ndarray:
        """Slots of a batch of keys, giving new keys new slots (all or none)."""
        codes, uniques = factorize_keys(self.feature, keys)
        get = self.slot_of.get
        found = [get(u, -1) for u in uniques]
        new = [u for u, s in zip(uniques, found, strict=True) if s < 0]
        check_key_bound(self.feature, len(self.slot_of) + len(new), self.max_keys)
        start = len(self.slot_of)
        self.slot_of.update(zip(new, range(start, start + len(new)), strict=True))
        slots = np.asarray([get(u) for u in uniques], dtype=np.int64)
        return slots[codes]

    def lookup(self, keys: Any) -> np.ndarray:
        """Slots of keys, -1 for keys never seen."""
        codes, uniques = factorize_keys(self.feature, keys)
        get = self.slot_of.get
        slots = np.asarray([get(u, -1) for u in uniques], dtype=np.int64)
        return slots[codes]


def check_key_bound(feature: str, held: int, max_keys: int) -> None:
    if held > max_keys:
        raise FeatureStateError(
            f"feature {feature} holds {held} keys, above max_keys={max_keys}; raise it with "
            f"make_feature(..., max_keys=N) (or the feature's max_keys argument), or key the "
            f"stream by fewer distinct values"
        )


def check_max_keys(feature: str, max_keys: Any) -> int:
    if (
        isinstance(max_keys, bool)
        or not isinstance(max_keys, int)
        or not 1 <= max_keys <= MAX_SLOTS
    ):
        raise FeatureDefinitionError(
            f"feature {feature}: max_keys must be an integer in [1, {MAX_SLOTS}], got {max_keys!r}"
        )
    return max_keys


# ----------------------------------------------------------------------- ring storage


def segment_offsets(lengths: np.ndarray) -> np.ndarray:
    """``0..len-1`` for each segment, concatenated: index inside each segment."""
    total = int(lengths.sum())
    starts = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)


class RingPool:
    """One ring buffer per slot, all carved out of shared flat arrays.

    A slot's ring starts small and doubles up to ``window`` entries, so a key with few items
    costs little. While a ring is smaller than ``window`` the slot has fewer items than its
    capacity and item ``i`` sits at ``i % window == i``; once it reaches ``window`` the same
    formula wraps. Outgrown rings are abandoned in place: each is smaller than its
    successor, so the waste stays below the live size; :meth:`compacted` drops it for
    snapshots. ``data`` holds one array per stored quantity (same offsets for all).
    """

    MIN_CAPACITY = 8

    def __init__(self, window: int, dtypes: Sequence[np.dtype | type]) -> None:
        self.window = window
        self.off = np.zeros(0, dtype=np.int64)
        self.cap = np.zeros(0, dtype=np.int64)
        self.data = [np.zeros(64, dtype=dt) for dt in dtypes]
        self.top = 0

    def grow_slots(self, n_slots: int) -> None:
        extra = n_slots - len(self.off)
        if extra > 0:
            self.off = np.concatenate([self.off, np.zeros(extra, dtype=np.int64)])
            self.cap = np.concatenate([self.cap, np.zeros(extra, dtype=np.int64)])

    def reserve(self, slots: np.ndarray, need: np.ndarray) -> None:
        """Make each ``slots[i]``'s ring hold at least ``need[i]`` (<= window) entries."""
        short = self.cap[slots] < need
        if not short.any():
            return
        s = slots[short]
        old_cap = self.cap[s]
        floor = min(self.window, self.MIN_CAPACITY)
        new_cap = np.minimum(self.window, np.maximum(np.maximum(need[short], 2 * old_cap), floor))
        new_off = self.top + np.cumsum(new_cap) - new_cap
        self._ensure_room(self.top + int(new_cap.sum()))
        # Rings below full size have not wrapped, so copying them whole keeps item i at i.
        within = segment_offsets(old_cap)
        src = np.repeat(self.off[s], old_cap) + within
        dst = np.repeat(new_off, old_cap) + within
        for arr in self.data:
            arr[dst] = arr[src]
        self.off[s] = new_off
        self.cap[s] = new_cap
        self.top += int(new_cap.sum())

    def _ensure_room(self, size: int) -> None:
        if size <= len(self.data[0]):
            return
        new_size = max(size, 2 * len(self.data[0]))
        for i, arr in enumerate(self.data):
            grown = np.zeros(new_size, dtype=arr.dtype)
            grown[: self.top] = arr[: self.top]
            self.data[i] = grown

    def compacted(self) -> RingPool:
        """A copy holding only the live rings, for snapshots."""
        out = RingPool(self.window, [a.dtype for a in self.data])
        live = self.cap > 0
        lens = self.cap[live]
        within = segment_offsets(lens)
        src = np.repeat(self.off[live], lens) + within
        out.off = np.zeros_like(self.off)
        out.cap = self.cap.copy()
        out.off[live] = np.cumsum(lens) - lens
        out.data = [arr[src] if len(src) else np.zeros(64, arr.dtype) for arr in self.data]
        out.top = int(lens.sum())
        return out


# ------------------------------------------------------------------- numeric history


class NumericHistory:
    """What the last update did, enough to answer ``values_at`` for any position in it.

    For each consumed item: its position, its slot and ``before`` -- the slot's value just
    before the item. The value of key x at position p is then ``before`` of x's first item
    after p in the batch, or x's current value when it has none.
    """

    def __init__(self) -> None:
        self.kept_from = BEFORE_STREAM
        self.pos = np.zeros(0, dtype=np.int64)
        self.slots = np.zeros(0, dtype=np.int64)
        self.before = np.zeros(0, dtype=np.float64)
        self.after = np.zeros(0, dtype=np.float64)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def record(
        self,
        kept_from: int,
        pos: np.ndarray,
        slots: np.ndarray,
        before: np.ndarray,
        after: np.ndarray,
    ) -> None:
        self.kept_from = kept_from
        self.pos, self.slots, self.before, self.after = pos, slots, before, after
        self._sorted = None

    def _by_slot(self) -> tuple[np.ndarray, np.ndarray]:
        # Composite key slot * (L + 1) + index: sorted, it finds "x's first item at or after
        # index i" with one searchsorted for the whole query batch.
        if self._sorted is None:
            order = np.argsort(self.slots, kind="stable")
            comp = self.slots[order] * (len(self.slots) + 1) + order
            self._sorted = (comp, order)
        return self._sorted

    def query(
        self, feature: str, slots: np.ndarray, positions: np.ndarray, current: np.ndarray
    ) -> np.ndarray:
        out = np.full(len(slots), np.nan)
        if len(positions) and int(positions.min()) < self.kept_from:
            raise stale_error(feature, int(positions.min()), self.kept_from)
        known = slots >= 0
        s, p = slots[known], positions[known]
        res = current[s].copy()
        if len(self.pos):
            comp, order = self._by_slot()
            first_after = np.searchsorted(self.pos, p, side="right")
            span = len(self.slots) + 1
            j = np.searchsorted(comp, s * span + first_after, side="left")
            inside = j < len(comp)
            hit = np.zeros(len(s), dtype=bool)
            hit[inside] = comp[j[inside]] // span == s[inside]
            res[hit] = self.before[order[j[hit]]]
        out[known] = res
        return out


class KeyedNumericFeature:
    """Shared update/query plumbing of the keyed numeric features.

    Subclasses implement :meth:`_prepare` (check and convert a batch's values, before any
    state changes), :meth:`_grow` (size per-slot state) and :meth:`_consume` (run the
    algorithm over a batch, returning each item's key value before and after the item).
    """

    name: str
    field: str
    key_fields: tuple[str, ...]

    def __init__(
        self, name: str, field: str, window: int, key_fields: tuple[str, ...], max_keys: int
    ) -> None:
        self.name = name
        self.field = field
        self.window = check_window(name, "window", window)
        self.key_fields = tuple(key_fields)
        self.max_keys = check_max_keys(name, max_keys)
        self._slots = KeySlots(name, self.max_keys) if self.key_fields else None
        self._clock = PositionClock()
        self._current = np.zeros(0, dtype=np.float64)  # per slot; NaN until its first item
        self._history = NumericHistory()

    @property
    def keyed(self) -> bool:
        return self._slots is not None

    @property
    def n_keys(self) -> int:
        """Keys held (1 for an unkeyed feature that has seen an item)."""
        return len(self._current)

    def update(self, values: Any, keys: Any = None, positions: Any = None) -> None:
        """Consume a batch of items in stream order (``keys`` only for keyed features)."""
        vals = as_array(values)
        n = len(vals)
        self._check_keys_given(keys, n)
        pos = self._clock.plan(self.name, n, positions)
        if n == 0:
            return
        vals = self._prepare(vals)
        slots = self._slots.assign(keys) if self._slots is not None else np.zeros(n, np.int64)
        n_slots = len(self._slots) if self._slots is not None else 1
        if n_slots > len(self._current):
            extra = np.full(n_slots - len(self._current), np.nan)
            self._current = np.concatenate([self._current, extra])
            self._grow(n_slots)
        kept_from = self._clock.last
        before, after = self._consume(slots, vals)
        self._clock.commit(pos)
        self._history.record(kept_from, pos, slots, before, after)

    def _check_keys_given(self, keys: Any, n: int) -> None:
        if self.keyed and keys is None:
            raise FeatureInputError(f"feature {self.name} is keyed by {self.key_fields}: pass keys")
        if not self.keyed and keys is not None:
            raise FeatureInputError(f"feature {self.name} is not keyed: pass keys=None")
        if keys is not None:
            lengths = [len(k) for k in keys] if is_multi_key(keys) else [len(keys)]
            if any(m != n for m in lengths):
                raise FeatureInputError(f"feature {self.name}: {n} values but keys of {lengths}")

    def values_at(self, keys: Any, positions: Any) -> np.ndarray:
        """Value for ``keys[i]`` at stream position ``positions[i]``; NaN while unseen.

        ``keys`` is ``None`` for an unkeyed feature. Positions may be unsorted; they must
        not be older than the end of the update before the last one.
        """
        pos = as_positions(positions)
        if self._slots is None:
            if keys is not None:
                raise FeatureInputError(f"feature {self.name} is not keyed: pass keys=None")
            slots = np.zeros(len(pos), dtype=np.int64)
            if len(self._current) == 0:
                slots -= 1
        else:
            self._check_keys_given(keys, len(pos))
            slots = self._slots.lookup(keys)
        return self._history.query(self.name, slots, pos, self._current)

    def last_values(self) -> np.ndarray:
        """Each item of the last update: its key's value right after the item."""
        return self._history.after.copy()

    def snapshot(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, blob: bytes) -> Self:
        """Rebuild a feature from :meth:`snapshot` (trusted checkpoint data: it is a pickle)."""
        obj = pickle.loads(blob)
        if not isinstance(obj, cls):
            raise FeatureInputError(f"snapshot holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    def _after(self, slots: np.ndarray, before: np.ndarray) -> np.ndarray:
        # An item's "after" is the next same-key item's "before", or the key's current value.
        after = self._current[slots]
        order = np.argsort(slots, kind="stable")
        same = slots[order][1:] == slots[order][:-1]
        after[order[:-1][same]] = before[order[1:][same]]
        return after

    # Subclass hooks ---------------------------------------------------------------

    def _prepare(self, values: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _grow(self, n_slots: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _consume(
        self, slots: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError
