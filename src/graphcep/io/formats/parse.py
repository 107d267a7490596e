"""Entry point of the line formats: :func:`parse_lines` (a chunk of lines to edges and
rejects) and :func:`edge_schema`."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from graphcep.io.formats.decoding import decode, drop_carriage_return, skippable
from graphcep.io.formats.flow_json import parse_flow_json
from graphcep.io.formats.jsonl import parse_jsonl
from graphcep.io.formats.line_parsers import Parsed, parse_netflow5, parse_table_like, parse_vast
from graphcep.io.formats.options import table_layout
from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import (
    ARROW_TYPES,
    FLOW_JSON_FORMATS,
    LINE_FORMATS,
    NETFLOW5_FIELDS,
    VAST_ATTRIBUTES,
    ReaderOptions,
)


def _check_format(fmt: str) -> str:
    if fmt not in LINE_FORMATS:
        raise ValueError(f"unknown line format {fmt!r}; use one of {', '.join(LINE_FORMATS)}")
    return fmt


def edge_schema(fmt: str, options: ReaderOptions | None = None) -> pa.Schema | None:
    """The edge-table schema a format produces (``None`` when it depends on the data).

    Known up front for ``vast``, ``netflow5``, and ``csv``/``tsv``/``snap`` once
    :func:`prepare_options` has set ``column_names``; Spark uses it as the
    ``mapInArrow`` output schema.
    """
    options = options or ReaderOptions()
    core = [
        pa.field(n, t)
        for n, t in (
            ("t", pa.int64()),
            ("src", pa.string()),
            ("dst", pa.string()),
            ("dur", pa.int64()),
            ("seq", pa.int64()),
        )
    ]
    if fmt == "vast":
        attrs = [pa.field(n, ARROW_TYPES[k]) for n, k in VAST_ATTRIBUTES]
    elif fmt == "netflow5":
        attrs = [
            pa.field(n, ARROW_TYPES[k]) for n, k in NETFLOW5_FIELDS if k not in ("src", "dst")
        ]
    elif fmt in ("csv", "tsv", "snap") and options.column_names is not None:
        specs = table_layout(fmt, options.column_names, options)
        attrs = [pa.field(s.column, ARROW_TYPES[s.kind]) for s in specs if s.kind in ARROW_TYPES]
    else:
        return None
    return pa.schema(core + attrs)


def parse_lines(
    lines: pa.Array, line_numbers: np.ndarray, fmt: str, options: ReaderOptions | None = None
) -> tuple[pa.Table, pa.Table]:
    """Parse a chunk of raw lines into edges and rejects.

    Parameters
    ----------
    lines
        The lines without their line terminators (a trailing ``\\r`` is dropped), as a
        ``string`` or ``binary`` array; binary lines are checked for UTF-8 one by one.
    line_numbers
        1-based physical line number of each line in its file (becomes ``seq``).
    fmt
        One of :data:`LINE_FORMATS`.
    options
        Reader options; for ``csv``/``tsv``/``snap`` pass the result of
        :func:`prepare_options` so that every chunk of a file uses the same layout
        (otherwise the layout is inferred from this chunk: a header is recognised only
        when the chunk holds line 1).

    Returns
    -------
    edges, rejects
        Edges in the schema of :mod:`graphcep.events` (core columns, then attributes) in
        line order, and a table with :data:`REJECT_SCHEMA`. Lines in neither were blank,
        comments or headers.
    """
    fmt = _check_format(fmt)
    options = options or ReaderOptions()
    line_numbers = np.asarray(line_numbers, dtype=np.int64)
    if len(line_numbers) != len(lines):
        raise ValueError("lines and line_numbers differ in length")
    rejects = Rejects(len(lines))
    text = drop_carriage_return(decode(lines, options.max_line_bytes, rejects))
    skip = skippable(text, fmt, options, rejects)
    rows = np.flatnonzero(~skip & ~rejects.mask())
    columns, rows = _parse_rows(fmt, text, rows, line_numbers, options, rejects)
    good = ~np.isin(rows, np.fromiter(rejects.reasons, dtype=np.int64, count=len(rejects.reasons)))
    edges = assemble(columns, good, line_numbers[rows[good]])
    return edges, rejects.table(text, line_numbers)


def _parse_rows(
    fmt: str,
    text: pa.Array,
    rows: np.ndarray,
    line_numbers: np.ndarray,
    options: ReaderOptions,
    rejects: Rejects,
) -> Parsed:
    if fmt in ("csv", "tsv", "snap"):
        return parse_table_like(fmt, text, rows, line_numbers, options, rejects)
    if fmt == "vast":
        return parse_vast(text, rows, options, rejects)
    if fmt == "netflow5":
        return parse_netflow5(text, rows, options, rejects)
    if fmt in FLOW_JSON_FORMATS:
        return parse_flow_json(fmt, text, rows, options, rejects)
    return parse_jsonl(text, rows, options, rejects)


def assemble(columns: dict[str, pa.Array], good: np.ndarray, seq: np.ndarray) -> pa.Table:
    """Core columns first (schema order), then attributes in layout order, good rows only."""
    if good.all():  # the usual case: no copy

        def kept(values: pa.Array) -> pa.Array:
            return values
    else:
        mask = pa.array(good)

        def kept(values: pa.Array) -> pa.Array:
            return values.filter(mask)

    names = ["t", "src", "dst", "dur"]
    arrays = [kept(columns[n]) for n in names]
    arrays[1] = arrays[1].cast(pa.string())
    arrays[2] = arrays[2].cast(pa.string())
    names.append("seq")
    arrays.append(pa.array(seq, pa.int64()))
    for name, values in columns.items():
        if name not in ("t", "src", "dst", "dur"):
            names.append(name)
            arrays.append(kept(values))
    return pa.table(arrays, names=names)
