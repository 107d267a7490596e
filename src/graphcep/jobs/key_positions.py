"""A keyed sequence's positions, numbered over the whole stream, for detectors that see
part of it.

A subscription occurs at consecutive positions of one key's sequence. A detector that
reads a window of the stream sees each key's records of that window only; when the window
is whole (a span of time) they are a stretch of the key's sequence, but progressive window
widening also builds windows whose middle was dropped (Algorithm 2), and there two records
of a key may look adjacent with records of the same key dropped between them. Counting
positions from the window's start would also report positions of the window, not of the
stream.

:class:`KeyPositions` numbers every record with its position in its key's sequence as
the stream arrives (column :data:`KEY_POSITION`; a record with a null key or symbol
belongs to no sequence and gets none) -- one counter per key, held with the widening's
state as two arrays. :meth:`KeyPositions.window` then lets a detector read a window as
the stream defines it: each key's records are cut into runs of consecutive positions,
each run read as a sequence of its own (a key of its own, :data:`RUN_KEY`), and the
notifications' keys and positions are mapped back to the stream's.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.jobs import as_job
>>> from graphcep.lang.sequences import parse_subscriptions
>>> job = as_job(parse_subscriptions("twice: @x.@x", "s"))
>>> positions = KeyPositions(job.key, job.symbol)
>>> stream = positions.number(pa.table({"t": [0, 1, 2, 3], "seq": [0, 1, 2, 3],
...     "src": ["h", "h", "h", "h"], "dst": ["a", "b", "b", "c"]}))
>>> stream.column(KEY_POSITION).to_pylist()
[0, 1, 2, 3]
>>> dropped_middle = stream.take([0, 3])   # positions 0 and 3: not adjacent
>>> window_job, records, restore = positions.window(job, dropped_middle)
>>> restore(window_job.new_engine().push(records)).num_rows
0
>>> window_job, records, restore = positions.window(job, stream.take([1, 2]))
>>> restore(window_job.new_engine().push(records)).select(["key", "start", "end"]).to_pylist()
[{'key': 'h', 'start': 1, 'end': 2}]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.sequences.engine import as_text
from graphcep.engines.vertex_ids import VertexIds

#: The column holding each record's position in its key's sequence.
KEY_POSITION = "_key_pos"
#: The column a window's detector reads as its key: the key and the run's number.
RUN_KEY = "_key_run"
_RUN_MARK = "\x1f"  # between a key and its run's number (the text after the last one)


def _array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _text(column: pa.ChunkedArray | pa.Array, field: str) -> pa.Array:
    """The key column as the subscription engines read it (text)."""
    return _array(as_text(column, "--key", field))


def _groups(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each row's key code (-1 for none) and the rows in key order (stable: stream order
    within a key)."""
    encoded = pc.dictionary_encode(keys)
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, np.argsort(codes, kind="stable")


class KeyPositions:
    """Counts each key's records over the stream. Keys are interned to dense ids as
    vertices are (:class:`~graphcep.engines.vertex_ids.VertexIds`), and the position of
    each one's next record is one NumPy array; a checkpoint pickles the keys as one Arrow
    array and the counters as one array, no Python object per key.

    Parameters
    ----------
    key, symbol
        The columns of a record's key and symbol (a record lacking either belongs to no
        sequence, as in the subscription engines).
    """

    def __init__(self, key: str, symbol: str) -> None:
        self.key, self.symbol = key, symbol
        self._ids = VertexIds()
        self._next = np.zeros(0, np.int64)

    def number(self, batch: pa.Table) -> pa.Table:
        """``batch`` (the stream's next records, in stream order) with :data:`KEY_POSITION`."""
        keys = _text(batch.column(self.key), self.key)
        valid = _array(pc.and_(pc.is_valid(keys), pc.is_valid(batch.column(self.symbol))))
        mask = valid.to_numpy(zero_copy_only=False).astype(bool)
        positions = np.zeros(len(keys), np.int64)
        if mask.any():
            slots = self._ids.encode(keys.filter(valid)).astype(np.int64)
            self._next = np.concatenate(
                [self._next, np.zeros(len(self._ids) - len(self._next), np.int64)])
            order = np.argsort(slots, kind="stable")  # stream order within a key
            ranked = slots[order]
            starts = np.r_[0, np.flatnonzero(np.diff(ranked)) + 1]
            counts = np.diff(np.r_[starts, len(ranked)])
            within = np.empty(len(slots), np.int64)
            within[order] = np.arange(len(slots)) - np.repeat(starts, counts)
            positions[mask] = self._next[slots] + within
            self._next[ranked[starts]] += counts
        column = pa.array(positions, pa.int64(), mask=~mask)
        if KEY_POSITION in batch.column_names:
            batch = batch.drop_columns([KEY_POSITION])
        return batch.append_column(KEY_POSITION, column)

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key, "symbol": self.symbol, "keys": self._ids.known(),
                "next": self._next}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.key, self.symbol = state["key"], state["symbol"]
        self._ids = VertexIds.from_state(state["keys"])
        self._next = state["next"]

    def window(self, job: Any, records: pa.Table
               ) -> tuple[Any, pa.Table, Callable[[pa.Table], pa.Table]]:
        """The job a window's detector runs (reading :data:`RUN_KEY` as its key), the
        records with that column, and the map of its notifications back to the stream's
        keys and positions (module docstring)."""
        if KEY_POSITION not in records.column_names:  # numbered by no widening
            return job, records, lambda matches: matches
        keys = _text(records.column(self.key), self.key)
        positions = _array(records.column(KEY_POSITION))
        keys = pc.if_else(pc.is_valid(positions), keys, pa.scalar(None, pa.string()))
        codes, order = _groups(keys)
        pos = positions.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        sorted_codes, sorted_pos = codes[order], pos[order]
        new_run = np.ones(len(order), bool)
        new_run[1:] = (sorted_codes[1:] != sorted_codes[:-1]) | \
            (sorted_pos[1:] != sorted_pos[:-1] + 1)
        runs = np.empty(len(order), np.int64)
        runs[order] = np.cumsum(new_run) - 1
        run_text = pa.array(runs.astype(str), pa.string())
        # the mark may occur in a key's own text: the run key is then still unique (the
        # run number after the last mark tells runs apart)
        run_keys = pc.binary_join_element_wise(keys, run_text, _RUN_MARK)
        firsts = pa.array(order[new_run])  # by run number: each run's first row
        run_start = sorted_pos[new_run]
        run_name, run_key = keys.take(firsts), run_keys.take(firsts)

        def restore(matches: pa.Table) -> pa.Table:
            if matches.num_rows == 0:
                return matches
            numbers = pc.index_in(matches.column("key"), value_set=run_key)
            shift = pa.array(run_start[numbers.to_numpy(zero_copy_only=False)])
            index = {name: i for i, name in enumerate(matches.column_names)}
            matches = matches.set_column(index["key"], "key", run_name.take(numbers))
            for name in ("start", "end"):
                matches = matches.set_column(index[name], name,
                                             pc.add(matches.column(name), shift))
            return matches

        return replace(job, key=RUN_KEY), records.append_column(RUN_KEY, run_keys), restore
