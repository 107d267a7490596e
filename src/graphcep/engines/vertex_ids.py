"""Dense integer ids for vertex names, assigned batch by batch without a per-edge Python call."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.cores import usable_cores

#: A column's names once encoded: each piece's codes with the map of its codes to the
#: column's (None: the same), and the column's distinct names by first appearance.
Encoded = tuple[list[tuple[np.ndarray, np.ndarray | None]], pa.Array]


def _dictionary(column: pa.Array | pa.ChunkedArray) -> Encoded | None:
    """The codes and the distinct names of a column (None when empty)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0:
        return None
    if pa.types.is_dictionary(column.type):
        codes, remap, names = used_names(column)
        return [(codes, remap)], names
    encoded = pc.dictionary_encode(column if column.type == pa.string()
                                   else column.cast(pa.string()))
    return [(encoded.indices.to_numpy(zero_copy_only=False), None)], encoded.dictionary


def used_names(column: pa.DictionaryArray) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """A dictionary-encoded column (no nulls) as its codes, the map of its codes to
    places among the names its rows use, and those names in dictionary order -- a
    dictionary shared by several columns (a batch's ``src`` and ``dst``), or kept by a
    filter, holds names a column does not use, which must not be numbered. A dictionary
    made by encoding the column (or ``src`` then ``dst``) lists names by first
    appearance, so they are numbered as the encoding of the strings would number them.

    >>> codes, remap, names = used_names(pa.DictionaryArray.from_arrays(
    ...     pa.array([2, 0, 2], pa.int32()), pa.array(["a", "b", "c"])))
    >>> remap[codes].tolist(), names.to_pylist()
    ([1, 0, 1], ['a', 'c'])
    """
    codes = column.indices.to_numpy(zero_copy_only=False)
    size = len(column.dictionary)
    used = np.flatnonzero(np.bincount(codes, minlength=size))
    if len(used) == size:
        return codes, None, column.dictionary
    remap = np.full(size, -1, np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    return codes, remap, column.dictionary.take(pa.array(used))


def distinct_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Per row, the number of its value among the column's distinct values (-1: null),
    and those values by first appearance: hashed here, or for a dictionary-encoded
    column taken from its dictionary (the names its rows use, :func:`used_names`).

    >>> codes, values = distinct_codes(pa.array(["b", None, "a", "b"]))
    >>> codes.tolist(), values.to_pylist()
    ([0, -1, 1, 0], ['b', 'a'])
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type) and not column.null_count:
        codes, remap, names = used_names(column)
        return (codes if remap is None else remap[codes]).astype(np.int64), names
    encoded = pc.dictionary_encode(column)
    indices = encoded.indices
    if indices.null_count:
        indices = indices.fill_null(-1)
    return indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def _unified(parts: list[Encoded | None]) -> Encoded | None:
    """One column's encoding from those of its consecutive pieces: the pieces' names in
    piece order, encoded again, number every name by its first appearance in the column,
    as :func:`_dictionary` of the whole column does; each piece keeps its codes and gets
    the map of them to the column's (no copy of the codes)."""
    parts = [p for p in parts if p is not None]
    if len(parts) <= 1:
        return parts[0] if parts else None
    names = pc.dictionary_encode(pa.concat_arrays([p[1] for p in parts]))
    remap = names.indices.to_numpy(zero_copy_only=False)
    pieces, start = [], 0
    for (((codes, _),), uniques) in parts:
        pieces.append((codes, remap[start:start + len(uniques)]))
        start += len(uniques)
    return pieces, names.dictionary


#: Rows (all columns together) below which encoding runs on the calling thread: starting
#: a pool costs more than encoding a small micro-batch.
THREADED_ROWS = 1 << 16

#: A batch's distinct names are looked up in the dict of known names, not by Arrow's
#: hash lookup (which hashes every known name), when this many times their count is still
#: fewer than the names known.
DICT_LOOKUP_RATIO = 8

#: Rows (all columns together) up to which text columns are interned name by name in
#: Python (:meth:`VertexIds._intern`) rather than through Arrow's encoding.
INTERN_ROWS = 512

#: Rows per piece a long column is encoded in, one thread a piece.
PIECE_ROWS = 1 << 20


def _small_text(columns: list[pa.Array | pa.ChunkedArray]) -> bool:
    """Whether ``columns`` are few rows of text without nulls (Python's names are then
    Arrow's, no cast involved)."""
    return (sum(len(column) for column in columns) <= INTERN_ROWS
            and all(column.type == pa.string() and column.null_count == 0
                    for column in columns))


def _pieces(column: pa.Array | pa.ChunkedArray) -> list[pa.Array | pa.ChunkedArray]:
    """A column cut in consecutive pieces of about :data:`PIECE_ROWS` rows."""
    n = len(column)
    if n <= PIECE_ROWS:
        return [column]
    return [column.slice(start, PIECE_ROWS) for start in range(0, n, PIECE_ROWS)]


def _gathered(pieces: list[tuple[np.ndarray, np.ndarray | None]], ids: np.ndarray
              ) -> np.ndarray:
    """Each row's id: its piece's code, through the piece's map, through ``ids`` (the id
    of each of the column's names) -- one gather a piece, into one array."""
    out = np.empty(sum(len(codes) for codes, _ in pieces), np.int32)
    at = 0
    for codes, remap in pieces:
        np.take(ids if remap is None else ids[remap], codes, out=out[at:at + len(codes)])
        at += len(codes)
    return out


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
        # the names, by id, for Arrow's lookup: in parts, joined when Arrow needs them
        # (joining on every push would copy every known name per push)
        self._known_parts: list[pa.Array] = []

    def __len__(self) -> int:
        return len(self._names)

    def encode(self, column: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if _small_text([column]):
            return self._intern([column])[0]
        return self._assign(_dictionary(column))

    def encode_many(self, columns: list[pa.Array | pa.ChunkedArray],
                    threads: bool = True) -> list[np.ndarray]:
        """Encode several columns; the Arrow encodings (which release the GIL) run in
        parallel threads unless ``threads`` is False -- a long column in pieces of
        :data:`PIECE_ROWS` rows, a thread each, their names unified after -- and the id
        assignment after them, in order. Ids are the same either way: names are numbered
        by their first appearance."""
        if _small_text(columns):
            return self._intern(columns)
        if not threads or sum(len(column) for column in columns) < THREADED_ROWS or \
                any(pa.types.is_dictionary(column.type) for column in columns):
            return [self._assign(_dictionary(column)) for column in columns]
        pieces = [_pieces(column) for column in columns]
        flat = [piece for column in pieces for piece in column]
        with ThreadPoolExecutor(min(len(flat), usable_cores())) as pool:
            encoded = iter(list(pool.map(_dictionary, flat)))
        return [self._assign(_unified([next(encoded) for _ in column])) for column in pieces]

    def _intern(self, columns: list[pa.Array | pa.ChunkedArray]) -> list[np.ndarray]:
        """A few names, one dict lookup each: for a small batch, Arrow's encoding and
        lookup cost more in calls than the names do. Numbers new names by first
        appearance, column by column, as the Arrow path does."""
        index, names, fresh, out = self._index, self._names, [], []
        for column in columns:
            ids = np.empty(len(column), np.int32)
            for i, name in enumerate(column.to_pylist()):
                found = index.get(name)
                if found is None:
                    found = index[name] = len(names)
                    names.append(name)
                    fresh.append(name)
                ids[i] = found
            out.append(ids)
        if fresh:
            self._known_parts.append(pa.array(fresh, pa.string()))
            self._names_array = None
        return out

    def _assign(self, encoded: Encoded | None) -> np.ndarray:
        if encoded is None:
            return np.empty(0, dtype=np.int32)
        pieces, uniques = encoded
        mapping = self._lookup(uniques)
        fresh = mapping < 0
        if fresh.any():
            new = uniques.filter(pa.array(fresh))
            start = len(self._names)
            mapping[fresh] = np.arange(start, start + len(new), dtype=np.int32)
            names = new.to_pylist()
            self._index.update(zip(names, range(start, start + len(names)), strict=True))
            self._names.extend(names)
            self._known_parts.append(new)
            self._names_array = None
        return _gathered(pieces, mapping)

    def _lookup(self, uniques: pa.Array) -> np.ndarray:
        """Each distinct name's id, -1 for a new one. Arrow's lookup hashes every known
        name on each call, so a few names next to many known ones (a stream's small
        micro-batches) are looked up in the dict instead: the cost follows the batch,
        not every name seen so far."""
        if not self._names:
            return np.full(len(uniques), -1, np.int32)
        if len(uniques) * DICT_LOOKUP_RATIO < len(self._names):
            get = self._index.get
            return np.fromiter((get(name, -1) for name in uniques.to_pylist()), np.int32,
                               len(uniques))
        found = pc.index_in(uniques, value_set=self.known())
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)

    def names(self, ids: np.ndarray) -> np.ndarray:
        if self._names_array is None:
            self._names_array = np.array(self._names, dtype=object)
        return self._names_array[ids]

    def lookup(self, name: str) -> int | None:
        return self._index.get(name)

    def state(self) -> list[str]:
        return list(self._names)

    def known(self) -> pa.Array:
        """Every name, by id, as one Arrow array: a state that pickles as buffers, not
        as one Python object a name (:meth:`from_state` takes it back)."""
        if len(self._known_parts) != 1:
            self._known_parts = [pa.concat_arrays(self._known_parts)
                                 if self._known_parts else pa.array([], pa.string())]
        return self._known_parts[0]

    @classmethod
    def from_state(cls, names: list[str] | pa.Array) -> VertexIds:
        ids = cls()
        ids._names = names.to_pylist() if isinstance(names, pa.Array) else list(names)
        ids._index = {n: i for i, n in enumerate(ids._names)}
        ids._known_parts = [pa.array(ids._names, pa.string())]
        return ids
