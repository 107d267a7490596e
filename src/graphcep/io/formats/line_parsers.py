"""Per-format line parsers: ``csv``/``tsv``/``snap``, ``vast`` and ``netflow5`` chunks to
converted columns."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats.fields import FieldSpec, check_counts, convert, split_fields, subset
from graphcep.io.formats.options import field_delimiter, prepare_options, table_layout
from graphcep.io.formats.quoting import reject_bad_quoting, split_csv
from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import NETFLOW5_FIELDS, VAST_FIELDS, ReaderOptions
from graphcep.io.formats.times import bool_np

#: What a per-format parser returns: converted columns and the chunk rows they belong to.
Parsed = tuple[dict[str, pa.Array], np.ndarray]


def parse_table_like(
    fmt: str,
    text: pa.Array,
    rows: np.ndarray,
    line_numbers: np.ndarray,
    options: ReaderOptions,
    rejects: Rejects,
) -> Parsed:
    """``csv``/``tsv``/``snap``: returns (columns, kept rows)."""
    if options.column_names is None:
        # No layout from the caller: infer it from this chunk. Only a chunk holding line 1
        # can see a header.
        if len(line_numbers) and line_numbers[0] == 1:
            head = text.slice(0, 64).to_pylist()
        else:
            head = [""] + text.take(pa.array(rows[:64])).to_pylist()
            options = replace(options, header=False)
        options = prepare_options(fmt, head, options)
    names = options.column_names or ()
    if options.header:
        is_header = line_numbers[rows] == 1
        rows = rows[~is_header]
    sub = text.take(pa.array(rows))
    if fmt == "csv":
        rows, sub = reject_bad_quoting(sub, rows, field_delimiter(fmt, options), rejects)
    if fmt == "snap":
        lists = pc.ascii_split_whitespace(pc.ascii_trim_whitespace(sub))
    else:
        lists = split_csv(sub, field_delimiter(fmt, options), quoting=fmt == "csv")
    split = split_fields(lists)
    specs = table_layout(fmt, names, options)
    needed = max(s.position for s in specs if s.kind in ("t", "src", "dst", "dur")) + 1
    lo = needed if fmt == "snap" else len(names)
    keep = check_counts(split, lo, max(len(names), lo), rows, rejects)
    rows, split = rows[keep], subset(split, keep)
    columns = convert(split, specs, options, rows, rejects)
    if "dur" not in columns:
        columns["dur"] = pa.array(np.zeros(len(rows), np.int64))
    return columns, rows


def _fixed_csv(
    text: pa.Array, rows: np.ndarray, header: str, lo: int, hi: int, rejects: Rejects
) -> tuple[np.ndarray, Any]:
    """A fixed-layout CSV's lines, header lines dropped, split on commas: those with
    ``lo``..``hi`` fields and their row numbers (the rest become counted rejects)."""
    sub = text.take(pa.array(rows))
    is_header = bool_np(pc.match_substring_regex(sub, header, ignore_case=True))
    rows, sub = rows[~is_header], sub.filter(pa.array(~is_header))
    split = split_fields(pc.split_pattern(sub, ","))
    keep = check_counts(split, lo, hi, rows, rejects)
    return rows[keep], subset(split, keep)


def parse_vast(
    text: pa.Array, rows: np.ndarray, options: ReaderOptions, rejects: Rejects
) -> Parsed:
    rows, split = _fixed_csv(text, rows, r"^(label,)?timeseconds,", 19, 20, rejects)
    split.shift = (split.counts == 20).astype(np.int64)
    specs = [
        FieldSpec(i, name, _vast_column(name, kind), kind)
        for i, (name, kind) in enumerate(VAST_FIELDS)
    ]
    specs.append(FieldSpec(-1, "Label", "Label", "int64"))
    # Seconds, as the format says, unless --time-unit says otherwise (an export that
    # writes epoch milliseconds in the VAST layout; the first lines are checked for it)
    columns = convert(
        split, specs, replace(options, time_unit=options.time_unit or "s", time_format="number"),
        rows, rejects,
    )
    return columns, rows


def _vast_column(name: str, kind: str) -> str:
    return kind if kind in ("t", "src", "dst", "dur") else name


_U32 = 2**32


def parse_netflow5(
    text: pa.Array, rows: np.ndarray, options: ReaderOptions, rejects: Rejects
) -> Parsed:
    rows, split = _fixed_csv(text, rows, r"^unix_?secs,", 24, 24, rejects)
    specs = [
        FieldSpec(i, name, _vast_column(name, kind), kind)
        for i, (name, kind) in enumerate(NETFLOW5_FIELDS)
    ]
    columns = convert(split, specs, options, rows, rejects)
    _netflow5_times(columns, rows, rejects)
    return columns, rows


def _netflow5_times(columns: dict[str, pa.Array], rows: np.ndarray, rejects: Rejects) -> None:
    """Absolute start and duration from the router clock fields (see the package docstring)."""
    get = {
        k: pc.fill_null(columns[k], 0).to_numpy()
        for k in ("unix_secs", "unix_nsecs", "sysuptime", "First", "Last")
    }
    limits = {
        "unix_secs": _U32,
        "unix_nsecs": 1_000_000_000,
        "sysuptime": _U32,
        "First": _U32,
        "Last": _U32,
    }
    for name, limit in limits.items():
        values = get[name]
        bad = np.flatnonzero((values < 0) | (values >= limit) | ~bool_np(columns[name].is_valid()))
        no = [f[0] for f in NETFLOW5_FIELDS].index(name) + 1
        rejects.add(
            rows[bad],
            [f"field {no} ({name}): out of range: {values[b]} not in [0, {limit})" for b in bad],
        )
        get[name] = np.where((values < 0) | (values >= limit), 0, values)
    since_first_ms = (get["sysuptime"] - get["First"]) % _U32
    ns = get["unix_secs"] * 1_000_000_000 + get["unix_nsecs"] - since_first_ms * 1_000_000
    us, rem = np.divmod(ns, 1000)
    us = us + ((rem > 500) | ((rem == 500) & (us % 2 == 1)))
    columns["t"] = pa.array(us.astype(np.int64))
    columns["dur"] = pa.array(((get["Last"] - get["First"]) % _U32) * 1000, pa.int64())
