"""JSON lines built column by column with Arrow, for sinks that write many matches.

A Python loop over rows (``to_pylist``, then one f-string per match) cost about 23 µs a
SAL match; these functions build the same bytes from whole columns: the JSON text of a
string column is ``json.dumps`` of each *distinct* value (a dictionary encoding first,
so a vertex named in a thousand matches is escaped once), times are cut into whole and
fractional seconds with integer arithmetic, and the pieces are joined by Arrow's string
kernels.

Every function returns exactly what its row-by-row counterpart in
:mod:`graphcep.io.sinks` writes (:func:`~graphcep.io.sinks.match_to_json`), or None where a
table holds something that counterpart treats specially (a null time, a map whose keys
are not sorted): the caller then writes row by row.

Example
-------
>>> import pyarrow as pa
>>> seconds_text(pa.array([9_840_000, -1, 0, 5_000_000])).to_pylist()
['9.84', '-0.000001', '0', '5']
>>> json_text(pa.array(['a"b', None, 'é'])).to_pylist()
['"a\\\\"b"', 'null', '"\\\\u00e9"']
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import US_PER_SECOND, format_seconds


def json_text(strings: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``json.dumps`` of every value (``null`` for a null), each distinct value once."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    encoded = pc.dictionary_encode(strings)
    texts = pa.array([json.dumps(v) for v in encoded.dictionary.to_pylist()], pa.string())
    return pc.fill_null(texts.take(encoded.indices), "null")


def seconds_text(us: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Integer microseconds as exact decimal seconds, trailing zeros trimmed, as
    :func:`graphcep.events.format_seconds` writes them (no nulls)."""
    values = np.asarray(us.to_numpy(zero_copy_only=False), dtype=np.int64)
    magnitude = np.abs(values)
    whole = pc.cast(pa.array(magnitude // US_PER_SECOND), pa.string())
    fraction = magnitude % US_PER_SECOND
    digits = pc.utf8_rtrim(pc.utf8_lpad(pc.cast(pa.array(fraction), pa.string()), 6, "0"),
                           "0")
    text = pc.if_else(pa.array(fraction == 0), whole,
                      pc.binary_join_element_wise(whole, digits, "."))
    return pc.if_else(pa.array(values < 0), pc.binary_join_element_wise("-", text, ""), text)


def _join(*parts: pa.Array | str) -> pa.Array:
    """Element-wise concatenation (plain strings are repeated on every row)."""
    return pc.binary_join_element_wise(*parts, "")


def _per_row(items: pa.Array, offsets: pa.Array, separator: str) -> pa.Array:
    """The ``items`` of each row (``offsets``, a list layout) joined by ``separator``."""
    return pc.binary_join(pa.ListArray.from_arrays(offsets, items), separator)


def _keys_sorted(keys: pa.Array, offsets: np.ndarray) -> bool:
    """Whether every row's keys are strictly increasing (the row writer sorts them)."""
    if len(keys) < 2:
        return True
    increasing = pc.less(keys.slice(0, len(keys) - 1), keys.slice(1)).to_numpy(
        zero_copy_only=False)
    row_starts = np.zeros(len(keys), dtype=bool)
    row_starts[offsets[1:-1][offsets[1:-1] < len(keys)]] = True
    return bool(np.all(increasing | row_starts[1:]))


def sal_json_lines(table: pa.Table) -> list[str] | None:
    """The JSON line of every SAL match (:data:`graphcep.events.MATCH_SCHEMA`), or None
    when the table holds a null time, sequence number, map key or a map whose keys are
    not sorted (write those row by row)."""
    table = table.combine_chunks()
    if table.num_rows == 0:
        return []
    bindings = _bindings_json(table.column("bindings").chunk(0))
    edges = _edges_json(table.column("edges").chunk(0))
    if bindings is None or edges is None or any(
            table.column(name).null_count for name in ("first_t", "last_t")):
        return None
    lines = _join('{"query":', json_text(table.column("query")),
                  ',"match_id":', json_text(table.column("match_id")),
                  ',"first_t":', seconds_text(table.column("first_t")),
                  ',"last_t":', seconds_text(table.column("last_t")),
                  ',"bindings":', bindings, ',"edges":[', edges, "]}")
    return lines.to_pylist()


def _bindings_json(maps: pa.MapArray) -> pa.Array | None:
    """``json.dumps(dict(sorted(pairs)))`` of every map (None: a null map, a null key, or
    keys out of order)."""
    if maps.null_count:
        return None
    start, stop = maps.offsets[0].as_py(), maps.offsets[-1].as_py()
    offsets = pc.subtract(maps.offsets, start)
    keys, items = maps.keys.slice(start, stop - start), maps.items.slice(start, stop - start)
    if keys.null_count or not _keys_sorted(keys, offsets.to_numpy()):
        return None
    pairs = _join(json_text(keys), ": ", json_text(items))
    return _join("{", _per_row(pairs, offsets, ", "), "}")


def _edges_json(lists: pa.ListArray) -> pa.Array | None:
    """The matched edges of every match as JSON objects joined by commas (None: a null
    list, edge, time, duration or sequence number)."""
    if lists.null_count:
        return None
    start, stop = lists.offsets[0].as_py(), lists.offsets[-1].as_py()
    edges = lists.values.slice(start, stop - start)
    offsets = pc.subtract(lists.offsets, start)
    field = {name: edges.field(name) for name in ("var", "t", "src", "dst", "dur", "seq")}
    if edges.null_count or any(field[n].null_count for n in ("t", "dur", "seq")):
        return None
    objects = _join('{"var":', json_text(field["var"]), ',"t":', seconds_text(field["t"]),
                    ',"src":', json_text(field["src"]), ',"dst":', json_text(field["dst"]),
                    ',"dur":', seconds_text(field["dur"]),
                    ',"seq":', pc.cast(field["seq"], pa.string()), "}")
    return _per_row(objects, offsets, ",")


#: The columns of a late edge or a rejected line written as seconds.
RECORD_TIME_COLUMNS = ("t", "dur")


def record_lines(table: pa.Table) -> Iterator[str]:
    """Each row of ``table`` (late edges, rejected lines) as the JSON object a JSONL part
    holds (the Kafka sink's record value too)."""
    for row in table.to_pylist():
        yield "{" + ", ".join(f"{json.dumps(name)}: {_json_value(name, value)}"
                              for name, value in row.items()) + "}"


def _json_value(name: str, value: Any) -> str:
    """A JSONL value; times as exact decimal seconds (a JSON number; json would print
    microseconds, or a rounded float)."""
    if name in RECORD_TIME_COLUMNS and isinstance(value, int):
        return format_seconds(value)
    return json.dumps(value, default=str)
