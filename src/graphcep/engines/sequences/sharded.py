"""A mapping split over many small dicts, so that no insertion rebuilds a large one.

A ``dict`` grows by rebuilding its whole table, the insertion that crosses the threshold
paying for every entry already there: 0.3 ms at 11,000 entries, 6 ms at 175,000 on the
machine of ``bench/RESULTS.md`` -- longer than a subscription change may take. A
:class:`ShardedDict` keeps ``SHARDS`` dicts and puts each key in the one its hash picks:
an insertion rebuilds at most one of them, a ``SHARDS``-th of the entries. Iteration goes
shard by shard (not in insertion order).

>>> d = ShardedDict({"b": 2})
>>> d["a"] = 1
>>> sorted(d.items()), len(d), "a" in d, d == {"a": 1, "b": 2}
([('a', 1), ('b', 2)], 2, True, True)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")
SHARDS = 256


class ShardedDict(MutableMapping[K, V]):
    """A mutable mapping over ``SHARDS`` dicts (module docstring)."""

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._shards: list[dict[K, V]] = [{} for _ in range(SHARDS)]
        self._size = 0
        self.update(items or {})

    def _shard(self, key: K) -> dict[K, V]:
        return self._shards[hash(key) % SHARDS]

    def __getitem__(self, key: K) -> V:
        return self._shard(key)[key]

    def __setitem__(self, key: K, value: V) -> None:
        shard = self._shard(key)
        self._size += key not in shard
        shard[key] = value

    def __delitem__(self, key: K) -> None:
        del self._shard(key)[key]
        self._size -= 1

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) % SHARDS]

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"ShardedDict({dict(self.items())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return ShardedDict, (dict(self.items()),)
