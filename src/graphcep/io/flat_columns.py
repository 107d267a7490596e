"""Flat columns of match records: one per query vertex and per field of a query edge, so
that pandas, Polars and Spark users filter and join matches without unnesting a map.

The JSONL and Parquet sinks write them beside the nested record (``bindings``,
``edges``, ``vertices``), which stays as it is. What each kind of query gets:

================  ===============================================================
SAL               ``x1`` (the stream vertex bound to query vertex ``x1``), and per
                  query edge ``e1``: ``e1_t``, ``e1_src``, ``e1_dst``, ``e1_dur``,
                  ``e1_seq``
ν-expression      one column per variable (``X``): the node it binds; a match's
                  links are a path of any length, so they stay in ``edges``
DDST              per query vertex ``A`` the list of stream vertices it matches,
                  per query edge ``x`` the list of matched stream edges' ``x_seq``
subscriptions     none: the key and positions are columns of the record already
================  ===============================================================

A flat name that equals a fixed column of the record (``query``, ``match_id``,
``first_t``...) or of the Python API's frames (``first_time``, ``last_time``,
``record``), a field a reader tells record kinds by (``vertices``,
``subscription``) or reads as a time (``t``, ``dur``, ``start_t``...), or a name taken
before it, is prefixed with ``q_`` (a vertex called
``query`` is ``q_query``). A run of several queries writes the union of their columns, a
query's row null where it has no such vertex or edge.

Example
-------
>>> from graphcep.events import Match, MatchedEdge, MATCH_SCHEMA, matches_to_table
>>> flat = FlatColumns("sal", ("x", "query"), ("e",))
>>> flat.names(MATCH_SCHEMA.names)
['x', 'q_query', 'e_t', 'e_src', 'e_dst', 'e_dur', 'e_seq']
>>> m = Match("q", (("query", "b"), ("x", "a")), (MatchedEdge("e", 5, "a", "b", 0, 7),), 5, 5)
>>> [c.to_pylist() for c in flat.columns(matches_to_table([m]))]
[['a'], ['b'], [5], ['a'], ['b'], [0], [7]]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.json_lines import json_text
from graphcep.io.time_text import SECONDS, Clock

#: The fields of a SAL query edge's flat columns, with their types; ``t`` is a time.
SAL_EDGE_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("t", pa.int64()), ("src", pa.string()), ("dst", pa.string()), ("dur", pa.int64()),
    ("seq", pa.int64()))

#: Top-level fields of the match records that hold times (µs since the epoch), and the
#: nested field that does in every kind's edges.
TIME_FIELDS = frozenset({"first_t", "last_t", "window_start", "window_end", "start_t",
                         "end_t", "pww_report_t"})
NESTED_TIME_FIELD = "t"

#: The column of the Python API's frames of matches that holds the whole record, a struct
#: (:func:`graphcep.frame_matches.match_table`; read back by :mod:`graphcep.pictures.records`).
RECORD_COLUMN = "record"

#: The columns the Python API's frames of matches add to the record's: no flat column
#: takes them either.
API_FIELDS = frozenset({"first_time", "last_time", RECORD_COLUMN})

#: Names a reader tells record kinds by or reads as times wherever they are
#: (:mod:`graphcep.pictures.records`), and the fields progressive window widening adds:
#: no flat column takes them.
RESERVED = frozenset({"vertices", "subscription", "pww_level", "pww_report_t", "pww_delay",
                      "pww_delay_us", NESTED_TIME_FIELD, "dur"}) | TIME_FIELDS | API_FIELDS


@dataclass(frozen=True)
class FlatColumns:
    """The flat columns of one kind of record (``"sal"``: a ``bindings`` map and edges
    with ``var``, which ν-expressions share with ``edges=()``; ``"ddst"``: ``vertices``
    and ``edges`` with ``qvar`` and ``qedge``), for these query vertices and edges."""

    kind: str
    vertices: tuple[str, ...]
    edges: tuple[str, ...]

    def union(self, other: FlatColumns | None) -> FlatColumns:
        """The columns of both (a run of several queries), each name once."""
        if other is None:
            return self
        if other.kind != self.kind:
            raise ValueError(f"flat columns of {self.kind} and {other.kind} records")
        return FlatColumns(self.kind, tuple(dict.fromkeys(self.vertices + other.vertices)),
                           tuple(dict.fromkeys(self.edges + other.edges)))

    def _parts(self) -> list[tuple[str, str | None, pa.DataType]]:
        """``(variable, edge field or None, type)`` of every column, in order."""
        if self.kind == "ddst":
            return [(v, None, pa.list_(pa.string())) for v in self.vertices] + \
                [(e, "seq", pa.list_(pa.int64())) for e in self.edges]
        return [(v, None, pa.string()) for v in self.vertices] + \
            [(e, name, kind) for e in self.edges for name, kind in SAL_EDGE_FIELDS]

    def names(self, fixed: Iterable[str]) -> list[str]:
        """The column names, clear of the record's ``fixed`` ones (module docstring)."""
        taken = set(fixed) | RESERVED
        names = []
        for var, part, _ in self._parts():
            name = var if part is None else f"{var}_{part}"
            while name in taken:
                name = f"q_{name}"
            taken.add(name)
            names.append(name)
        return names

    def fields(self, fixed: Iterable[str], timestamps: bool = False) -> list[pa.Field]:
        """The columns as Arrow fields; ``timestamps``: times as ``timestamp[us, UTC]``
        (Parquet), else int64 µs."""
        return [pa.field(name, TIMESTAMP if timestamps and part == NESTED_TIME_FIELD
                         and self.kind == "sal" else kind)
                for name, (_, part, kind) in zip(self.names(fixed), self._parts(),
                                                 strict=True)]

    def columns(self, table: pa.Table) -> list[pa.Array]:
        """The flat columns of a match table (times int64 µs), in :meth:`names` order."""
        if self.kind == "ddst":
            return [_ddst_lists(table, "vertices", "qvar", v, "vertex") for v in self.vertices] \
                + [_ddst_lists(table, "edges", "qedge", e, "seq") for e in self.edges]
        bindings = table.column("bindings").combine_chunks()
        out = [pc.map_lookup(bindings, pa.scalar(v, pa.string()), "first")
               if len(bindings) else pa.array([], pa.string()) for v in self.vertices]
        edges = table.column("edges").combine_chunks()
        for e in self.edges:
            rows = _first_of(edges, "var", e)
            values = edges.flatten()
            out += [values.field(name).cast(kind).take(rows) for name, kind in SAL_EDGE_FIELDS]
        return out

    def json_members(self, table: pa.Table, fixed: Iterable[str], clock: Clock = SECONDS
                     ) -> pa.Array:
        """Each row's flat columns as JSON object members (``"x1":"a","e1_t":12.5``),
        times as ``clock`` writes them; an empty text where there are none."""
        names = self.names(fixed)
        if not names:
            return pa.array([""] * table.num_rows, pa.string())
        pieces = []
        for name, (_, part, _), column in zip(names, self._parts(), self.columns(table),
                                              strict=True):
            pieces += [json.dumps(name) + ":", _json_values(column, part, clock), ","]
        return pc.binary_join_element_wise(*pieces[:-1], "")


#: Parquet's type of match times.
TIMESTAMP = pa.timestamp("us", tz="UTC")


def _first_of(lists: pa.ListArray, key: str, value: str) -> pa.Array:
    """For each row of ``lists`` (a list of structs), the flat index of its first item
    whose ``key`` field is ``value`` (null where none is)."""
    items = lists.flatten()
    hits = np.flatnonzero(pc.fill_null(pc.equal(items.field(key), value), False)
                          .to_numpy(zero_copy_only=False))
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)[hits]
    index = np.full(len(lists), -1, dtype=np.int64)
    index[parents[::-1]] = hits[::-1]  # the first hit of a row is written last
    return pa.array(index, mask=index < 0)


def _ddst_lists(table: pa.Table, column: str, key: str, value: str, field: str) -> pa.Array:
    """Per row, the ``field`` of the items of ``column`` whose ``key`` is ``value``."""
    lists = table.column(column).combine_chunks()
    items = lists.flatten()
    keep = pc.fill_null(pc.equal(items.field(key), value), False).to_numpy(
        zero_copy_only=False)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)[keep]
    counts = np.bincount(parents, minlength=len(lists)) if len(lists) else np.zeros(0, int)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    values = items.field(field).filter(pa.array(keep))
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _json_values(column: pa.Array, part: str | None, clock: Clock) -> pa.Array:
    """JSON text of a flat column's values."""
    if pa.types.is_list(column.type):
        return pa.array([json.dumps(v, separators=(",", ":")) for v in column.to_pylist()],
                        pa.string())
    if part == NESTED_TIME_FIELD:
        return clock.json_column(column)
    if part == "dur":
        return SECONDS.json_column(column)
    if pa.types.is_integer(column.type):
        return pc.fill_null(column.cast(pa.string()), "null")
    return json_text(column)


def timestamp_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its times (:data:`TIME_FIELDS`, and ``t`` inside lists of structs)
    as ``timestamp[us, UTC]``: what Parquet match files hold."""
    return pa.schema([_retimed(f, TIMESTAMP) for f in schema], metadata=schema.metadata)


def integer_times(table: pa.Table) -> pa.Table:
    """A match table read back with its timestamps as int64 µs (as the engines write
    them); a table without timestamps is returned as it is."""
    schema = pa.schema([_retimed(f, pa.int64()) for f in table.schema],
                       metadata=table.schema.metadata)
    return table if schema == table.schema else table.cast(schema)


def _retimed(f: pa.Field, kind: pa.DataType) -> pa.Field:
    if f.name in TIME_FIELDS and _is_time(f.type):
        return f.with_type(kind)
    if pa.types.is_list(f.type) and pa.types.is_struct(f.type.value_type):
        struct = f.type.value_type
        inner = [g.with_type(kind) if g.name == NESTED_TIME_FIELD and _is_time(g.type)
                 else g for g in struct]
        return f.with_type(pa.list_(pa.field(f.type.value_field.name, pa.struct(inner))))
    return f.with_type(kind) if _is_time(f.type) and pa.types.is_timestamp(f.type) else f


def _is_time(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_timestamp(kind)
