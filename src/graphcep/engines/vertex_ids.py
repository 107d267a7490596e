"""Dense integer ids for vertex names, assigned batch by batch without a per-edge Python call."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _dictionary(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array] | None:
    """Local codes and the distinct names of a column (None when empty)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0:
        return None
    encoded = pc.dictionary_encode(column.cast(pa.string()))
    local = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return local, encoded.dictionary


class VertexIds:
    """Interns vertex names (strings) to dense ``int32`` ids.

    Only the names never seen before pass through Python; the per-edge work is an Arrow
    dictionary encoding and a numpy gather, the per-name work an Arrow lookup.

    >>> ids = VertexIds()
    >>> ids.encode(pa.array(["a", "b", "a"])).tolist()
    [0, 1, 0]
    >>> ids.names(np.array([1, 0])).tolist()
    ['b', 'a']
    """

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._names: list[str] = []
        self._names_array: np.ndarray | None = None
        self._known = pa.array([], pa.string())  # the names, by id, for Arrow's lookup

    def __len__(self) -> int:
        return len(self._names)

    def encode(self, column: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return self._assign(_dictionary(column))

    def encode_many(self, columns: list[pa.Array | pa.ChunkedArray],
                    threads: bool = True) -> list[np.ndarray]:
        """Encode several columns; the Arrow encodings (which release the GIL) run in
        parallel threads unless ``threads`` is False, the id assignment after them in order."""
        if not threads:
            return [self._assign(_dictionary(column)) for column in columns]
        with ThreadPoolExecutor(len(columns)) as pool:
            encoded = list(pool.map(_dictionary, columns))
        return [self._assign(e) for e in encoded]

    def _assign(self, encoded: tuple[np.ndarray, pa.Array] | None) -> np.ndarray:
        if encoded is None:
            return np.empty(0, dtype=np.int32)
        local, uniques = encoded
        found = pc.index_in(uniques, value_set=self._known)
        mapping = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        fresh = mapping < 0
        if fresh.any():
            new = uniques.filter(pa.array(fresh))
            start = len(self._names)
            mapping[fresh] = np.arange(start, start + len(new), dtype=np.int32)
            names = new.to_pylist()
            self._index.update(zip(names, range(start, start + len(names)), strict=True))
            self._names.extend(names)
            self._known = pa.concat_arrays([self._known, new])
            self._names_array = None
        return mapping[local]

    def names(self, ids: np.ndarray) -> np.ndarray:
        if self._names_array is None:
            self._names_array = np.array(self._names, dtype=object)
        return self._names_array[ids]

    def lookup(self, name: str) -> int | None:
        return self._index.get(name)

    def state(self) -> list[str]:
        return list(self._names)

    @classmethod
    def from_state(cls, names: list[str]) -> VertexIds:
        ids = cls()
        ids._names = list(names)
        ids._index = {n: i for i, n in enumerate(names)}
        ids._known = pa.array(ids._names, pa.string())
        return ids
