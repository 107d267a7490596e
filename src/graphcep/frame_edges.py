"""A frame's columns as edges: the one conversion of :meth:`graphcep.api.Query.match`
(a frame) and :meth:`graphcep.api.Query.stream` (each micro-batch of a streaming
DataFrame), with its checks.

The frame's columns named ``src``, ``dst``, ``time`` (and ``dur``) are checked -- each
exists, no other column has an edge field's name, its type can hold what it is mapped to,
numbers without a unit read as epoch seconds -- and converted by the function that reads
Parquet files (:func:`~graphcep.io.formats.columns.parse_table`), so a frame and the
Parquet file written from it give the same edges. Every refusal is one
:class:`ValueError` or :class:`TypeError` naming the column, the argument and the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

#: The units numeric times may count.
TIME_UNITS = ("s", "ms", "us")


@dataclass(frozen=True)
class ColumnMapping:
    """The frame's columns of the edges' core fields (``dur`` may be None)."""

    src: str
    dst: str
    time: str
    dur: str | None

    def core(self) -> dict[str, str]:
        """Edge field -> the frame's column (``t``, ``src``, ``dst``, ``dur``)."""
        found = {"t": self.time, "src": self.src, "dst": self.dst, "dur": self.dur}
        return {core: name for core, name in found.items() if name is not None}

    def parameter(self, core: str) -> str:
        """The argument of :meth:`Query.match` naming the column of ``core``."""
        return {"t": "time"}.get(core, core)


def checked_unit(time_unit: str | None) -> str | None:
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise ValueError(f"time_unit={time_unit!r}: numeric times count 's', 'ms' or 'us' "
                         "(give datetimes as timestamps: they carry their own unit)")
    return time_unit


def edge_table(table: pa.Table, mapping: ColumnMapping, time_unit: str | None,
               keep: Sequence[str] | None, row_offset: int = 0) -> pa.Table:
    """The frame's rows as edges (:func:`edge_rows`, rows numbered from ``row_offset + 1``:
    a Spark partition's rows follow those before it); a row that cannot be an edge raises
    :class:`ValueError` (a frame has no rejects file)."""
    edges, rejects = edge_rows(table, mapping, time_unit, keep, row_offset)
    if rejects.num_rows:
        first = rejects.slice(0, 1).to_pylist()[0]
        raise ValueError(f"{rejects.num_rows:,} row(s) cannot be edges; the first, at "
                         f"position {first['line'] - 1}: {first['reason']} (drop or fill "
                         "them first, e.g. df.dropna(subset=[...]))")
    return edges


def edge_rows(table: pa.Table, mapping: ColumnMapping, time_unit: str | None,
               keep: Sequence[str] | None, row_offset: int = 0) -> tuple[pa.Table, pa.Table]:
    """The frame's rows as edges and rejects (:func:`~graphcep.io.formats.columns.parse_table`,
    the Parquet reader's conversion), after checking its columns: rows without a ``seq``
    column are numbered from ``row_offset + 1`` (a stream's micro-batches go on from the
    rows before)."""
    from graphcep.io.formats.columns import parse_table
    from graphcep.io.formats.schema import ReaderOptions, SchemaError

    table = plain_types(table)
    core = mapping.core()
    if mapping.dur is None and "dur" in table.column_names:
        core["dur"] = "dur"
    check_names(table, mapping, core, keep)
    check_types(table, mapping, core, time_unit)
    unit = time_unit or checked_seconds(table.column(core["t"]), core["t"])
    wanted = {*core.values(), *(table.column_names if keep is None else keep)}
    table = table.select([name for name in table.column_names if name in wanted])
    try:
        return parse_table(table, ReaderOptions(time_unit=unit, columns=core), row_offset)
    except SchemaError as err:
        raise TypeError(str(err)) from None


def check_names(table: pa.Table, mapping: ColumnMapping, core: Mapping[str, str],
                 keep: Sequence[str] | None) -> None:
    """Every column named exists, and no other column has an edge field's name (it would
    shadow the field read from the column named)."""
    names = table.column_names
    for field_name, column in core.items():
        if column not in names:
            parameter = mapping.parameter(field_name)
            close = difflib.get_close_matches(column, names, n=1)
            hint = f"; did you mean {parameter}={close[0]!r}?" if close else ""
            raise ValueError(f"no column {column!r} ({parameter}={column!r}, the edges' "
                             f"{_ROLE[field_name]}): the columns are {names}{hint}")
    for column in keep or ():
        if column not in names:
            raise ValueError(f"columns=: no column {column!r}; the columns are {names}")
    for field_name in ("t", "src", "dst", "dur"):
        if field_name in names and core.get(field_name) not in (None, field_name) and (
                keep is None or field_name in keep):
            parameter = mapping.parameter(field_name)
            raise ValueError(f"column {field_name!r} has the name of the edges' "
                             f"{_ROLE[field_name]}, which {parameter}={core[field_name]!r} "
                             f"reads from column {core[field_name]!r}: rename or drop "
                             f"column {field_name!r}, or leave it out of columns=")


_ROLE = {"t": "start times", "src": "source vertices", "dst": "destination vertices",
         "dur": "durations"}


def check_types(table: pa.Table, mapping: ColumnMapping, core: Mapping[str, str],
                 time_unit: str | None) -> None:
    """Refuse a column whose type cannot hold what it is mapped to, and ``time_unit``
    with times that carry their own unit."""
    import pyarrow as pa

    for field_name, column in core.items():
        kind = table.schema.field(column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        parameter = mapping.parameter(field_name)
        if field_name in ("src", "dst"):
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                    or pa.types.is_integer(kind)):
                raise TypeError(f"column {column!r} ({parameter}=) has type {kind}: vertices "
                                f"are strings or integers (convert it, e.g. "
                                f"df[{column!r}].astype(str))")
            continue
        timestamp = pa.types.is_timestamp(kind) or pa.types.is_date(kind)
        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or \
            pa.types.is_decimal(kind)
        if field_name == "dur" and (numeric or pa.types.is_duration(kind)):
            continue
        if field_name == "t" and timestamp:
            if time_unit is not None:
                raise ValueError(f"time_unit={time_unit!r} applies to numeric times; column "
                                 f"{column!r} holds {kind}, which carry their own unit: "
                                 "leave time_unit out")
            continue
        if field_name == "t" and numeric:
            continue
        wanted = ("numbers (in time_unit) or timedeltas" if field_name == "dur" else
                  "timestamps, dates or numbers (with time_unit=)")
        fix = (f"pd.to_datetime(df[{column!r}])" if field_name == "t"
               else f"pd.to_numeric(df[{column!r}])")
        raise TypeError(f"column {column!r} ({parameter}=) has type {kind}: the edges' "
                        f"{_ROLE[field_name]} are {wanted} (convert it, e.g. {fix})")


def checked_seconds(column: Any, name: str) -> str:
    """``"s"``, the unit numeric times are assumed to count, once checked against them as
    the command line checks them; a :class:`ValueError` when they read as epoch times in
    another unit only."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from graphcep.io.formats.times import implausible_time_unit

    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
            or pa.types.is_decimal(column.type)):
        return "s"
    bounds = pc.min_max(column.cast(pa.float64()))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or not np.isfinite([low, high]).all():
        return "s"  # no finite value: the rows are refused one by one
    message = implausible_time_unit(np.array([np.floor(low), np.floor(high)]), "s")
    if message is not None:
        message = re.sub(r"--time-unit (\w+)", r"time_unit='\1'", message)
        raise ValueError(f"column {name!r} (time=): {message}")
    return "s"


def plain_types(table: pa.Table) -> pa.Table:
    """Large strings and string views (Polars' text, pandas' ``string[pyarrow]``) as
    strings, which the readers produce and the engines' fields read."""
    import pyarrow as pa

    fields = [f.with_type(pa.string()) if _is_other_text(f.type) else f
              for f in table.schema]
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table if schema == table.schema else table.cast(schema)


def _is_other_text(kind: pa.DataType) -> bool:
    import pyarrow as pa

    is_view = getattr(pa.types, "is_string_view", lambda _: False)  # pyarrow >= 16
    return pa.types.is_large_string(kind) or is_view(kind)
