"""Column-based input (Parquet and other Arrow tables): :func:`parse_table` and the exact
conversion of any Arrow time column (:func:`column_to_us`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats.decoding import decode
from graphcep.io.formats.parse import assemble
from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import (
    FORMAT_FIELD_ALIASES,
    MAX_ABS_US,
    ReaderOptions,
    SchemaError,
    placed_index,
)
from graphcep.io.formats.times import bool_np, decimal_to_us, strings, time_to_us, unit_digits


def _find_column(table: pa.Table, core: str, options: ReaderOptions) -> str | None:
    mapping = options.columns or {}
    if core in mapping:
        return table.column_names[placed_index(core, mapping[core], table.column_names)]
    if core in table.column_names:
        return core
    for aliases in FORMAT_FIELD_ALIASES.values():
        for native, target in aliases.items():
            if target == core and native in table.column_names:
                return native
    return None


def core_columns(schema: pa.Schema, options: ReaderOptions) -> dict[str, str]:
    """The file column each core field (``t``, ``src``, ``dst``, ``dur``) is read from, as
    :func:`parse_table` finds it, by name; fields without one are left out."""
    table = schema.empty_table()
    found = {core: _find_column(table, core, options) for core in ("t", "src", "dst", "dur")}
    return {core: name for core, name in found.items() if name is not None}


def check_core_columns(schema: pa.Schema, options: ReaderOptions) -> None:
    """Refuse a schema without the core columns, or with one of a type no edge field
    comes from, naming its columns (before any projection leaves some out)."""
    table = schema.empty_table()
    _check_core_columns(schema, {core: _find_column(table, core, options)
                                 for core in ("t", "src", "dst", "dur")})


#: What a time column of a column-based file may be, for :class:`SchemaError` messages.
TIME_TYPES = "expected an integer, float, decimal, string, timestamp or date column"
#: The same for a vertex column.
VERTEX_TYPES = "expected a string or integer column"


def column_to_us(
    column: pa.Array, options: ReaderOptions, unit: str | None = None
) -> tuple[np.ndarray, dict[int, str]]:
    """Any Arrow time/duration column -> exact microseconds (see :func:`parse_table`)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    typ = column.type
    unit = unit or options.time_unit or "s"
    if pa.types.is_timestamp(typ) or pa.types.is_duration(typ):
        values, errors = _ticks_to_us(
            column.cast(pa.int64()), {"s": 6, "ms": 3, "us": 0, "ns": -3}[typ.unit]
        )
    elif pa.types.is_date(typ):
        days = column.cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
        values, errors = _scaled_ticks(days, 86_400_000_000)
    elif pa.types.is_integer(typ):
        values, errors = _ticks_to_us(column.cast(pa.int64()), unit_digits(unit))
    elif pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        values, errors = decimal_to_us(column.cast(pa.string()), unit)
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
        values, errors = time_to_us(column, replace(options, time_unit=unit))
    else:
        raise SchemaError(f"cannot read a time from a column of type {typ}; {TIME_TYPES}")
    for row in np.flatnonzero(~bool_np(column.is_valid())):
        errors[int(row)] = "missing value"
    return values, errors


def _ticks_to_us(ticks: pa.Array, digits: int) -> tuple[np.ndarray, dict[int, str]]:
    """Integers counting 10**-(6 - digits) s -> microseconds (half-even for ns)."""
    if digits >= 0:
        return _scaled_ticks(ticks, 10**digits)
    raw = pc.fill_null(ticks, 0).to_numpy().astype(np.int64)
    q, r = np.divmod(raw, 10**-digits)
    half = 10**-digits // 2
    return q + ((r > half) | ((r == half) & (q % 2 == 1))), {}


def _scaled_ticks(ticks: pa.Array, factor: int) -> tuple[np.ndarray, dict[int, str]]:
    """Integers times ``factor`` -> microseconds; ``|ticks * factor| >= 2**62`` is an error.

    The bound is checked on the ticks themselves, before scaling, and without ``abs``:
    ``abs(INT64_MIN)`` overflows to itself and the product would wrap (to 0 in seconds).
    """
    raw = pc.fill_null(ticks, 0).to_numpy().astype(np.int64)
    limit = MAX_ABS_US // factor
    outside = (raw >= limit) | (raw <= -limit)
    errors = {int(row): f"out of range: {raw[row]}" for row in np.flatnonzero(outside)}
    return np.where(outside, 0, raw) * factor, errors


def parse_table(
    table: pa.Table | pa.RecordBatch, options: ReaderOptions | None = None, row_offset: int = 0
) -> tuple[pa.Table, pa.Table]:
    """Convert a column-based table (a Parquet batch) to edges and rejects.

    Core columns come from ``options.columns``, else the schema names, else a
    format-native alias (``TimeSeconds``, ``SourceIp`` ...). The time column may be an
    integer in ``options.time_unit``, a float or decimal of that unit (exact through its
    shortest decimal text), a string (number or ISO-8601), a timestamp or a date. With
    ``options.time_unit=None``, integer columns named exactly ``t``/``dur`` are taken as
    microseconds (a table already in the edge schema, as :func:`write_parquet
    <graphcep.io.generator.write_parquet>` writes it) and other numbers as seconds. An
    existing integer ``seq`` column is kept; otherwise ``seq`` is the 1-based row number
    (plus ``row_offset``). Rejected rows report that row number as ``line``.
    """
    options = options or ReaderOptions()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    table = table.combine_chunks()
    n = table.num_rows
    rejects = Rejects(n)
    names = {core: _find_column(table, core, options) for core in ("t", "src", "dst", "dur")}
    _check_core_columns(table.schema, names)
    columns: dict[str, pa.Array] = {}
    for core in ("t", "dur"):
        if names[core] is None:
            columns[core] = pa.array(np.zeros(n, np.int64))
            continue
        column = table.column(names[core])
        values, errors = column_to_us(
            column, options, _table_unit(core, names[core], column, options)
        )
        if core == "dur":
            for row in np.flatnonzero(values < 0):
                errors.setdefault(int(row), "negative duration")
        rows = np.array(sorted(errors), dtype=np.int64)
        rejects.add(rows, [f"field {names[core]} ({core}): {errors[int(r)]}" for r in rows])
        columns[core] = pa.array(values, pa.int64())
    for core in ("src", "dst"):
        label = f"field {names[core]} ({core})"
        values = _vertex_strings(table.column(names[core]), label, rejects)
        bad = np.flatnonzero(~bool_np(pc.fill_null(pc.not_equal(values, ""), False)))
        rejects.add(bad, f"{label}: missing or empty vertex id")
        columns[core] = pc.fill_null(values, "")
    seq = _table_seq(table, n, row_offset)
    used = {v for v in names.values() if v is not None} | {"seq"}
    for name in table.column_names:
        if name not in used:
            columns[name] = table.column(name).combine_chunks()
    row_numbers = np.arange(1, n + 1, dtype=np.int64) + row_offset
    good = ~rejects.mask()
    edges = assemble(columns, good, seq[good])
    for row in rejects.reasons:
        rejects.texts[row] = _row_text(table, row)
    return edges, rejects.table(pa.nulls(n, pa.string()), row_numbers)


def _is_time_type(typ: pa.DataType) -> bool:
    return any(
        check(typ)
        for check in (
            pa.types.is_timestamp,
            pa.types.is_duration,
            pa.types.is_date,
            pa.types.is_integer,
            pa.types.is_floating,
            pa.types.is_decimal,
            pa.types.is_string,
            pa.types.is_large_string,
        )
    )


def _is_vertex_type(typ: pa.DataType) -> bool:
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return any(
        check(typ)
        for check in (
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_binary,
            pa.types.is_large_binary,
            pa.types.is_integer,
        )
    )


def _check_core_columns(schema: pa.Schema, names: Mapping[str, str | None]) -> None:
    """Refuse a table whose core columns are missing or of a type no edge field comes from
    (a bool or list time, a struct vertex ...): one :class:`SchemaError` naming the column."""
    for core, name in names.items():
        expected = TIME_TYPES if core in ("t", "dur") else VERTEX_TYPES
        if name is None:
            if core == "dur":
                continue
            native = {"t": "TimeSeconds", "src": "SourceIp", "dst": "DestIp"}[core]
            raise SchemaError(
                f"no column for {core!r}: {expected} named {core!r} or {native!r}; "
                f"the columns are {schema.names}"
            )
        typ = schema.field(name).type
        ok = _is_time_type(typ) if core in ("t", "dur") else _is_vertex_type(typ)
        if not ok:
            raise SchemaError(f"column {name!r} ({core}) has type {typ}; {expected}")


def _vertex_strings(column: pa.ChunkedArray | pa.Array, label: str, rejects: Rejects) -> pa.Array:
    """A vertex column as strings; binary values that are not UTF-8 become rejects."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        local = Rejects(len(column))
        column = decode(column, MAX_ABS_US, local)
        for row, why in local.reasons.items():
            rejects.add(np.array([row]), f"{label}: {why}")
    return strings(column.cast(pa.string()))


def _table_unit(core: str, name: str, column: pa.ChunkedArray, options: ReaderOptions) -> str:
    """Unit of a numeric time column: an integer column already named ``t``/``dur`` is in
    the edge schema, so microseconds; anything else follows ``options.time_unit``."""
    if options.time_unit is None and name == core and pa.types.is_integer(column.type):
        return "us"
    return options.time_unit or "s"


def _table_seq(table: pa.Table, n: int, row_offset: int) -> np.ndarray:
    if (
        "seq" in table.column_names
        and pa.types.is_integer(table.schema.field("seq").type)
        and table.column("seq").null_count == 0
    ):
        return table.column("seq").to_numpy().astype(np.int64)
    return np.arange(1, n + 1, dtype=np.int64) + row_offset


def _row_text(table: pa.Table, row: int) -> str:
    one = table.slice(row, 1)
    return json.dumps({n: _cell(one.column(n)) for n in one.column_names}, default=str)


def _cell(column: pa.ChunkedArray) -> object:
    """The value of a one-row column; Arrow's text for values Python cannot hold (a date
    millions of years away is a reject, and its row must still be shown)."""
    try:
        return column.to_pylist()[0]
    except (OverflowError, ValueError, pa.ArrowException):
        try:
            return column.cast(pa.string()).to_pylist()[0]
        except pa.ArrowException:
            return f"<{column.type}>"
