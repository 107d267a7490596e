"""Field layouts: where each column of a split line comes from (:class:`FieldSpec`), and
the vectorized conversion and field-count checks of split lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import ARROW_TYPES, ATTRIBUTE_TYPES, ReaderOptions
from graphcep.io.formats.times import bool_np, decimal_to_us, short, strings, time_to_us


@dataclass(frozen=True)
class FieldSpec:
    """Where a column comes from in a split line and how it is converted.

    ``kind`` is ``t``, ``dur``, ``src``, ``dst`` (core columns) or an attribute type.
    """

    position: int  #: 0-based field index (before any per-row shift)
    label: str  #: name used in reject reasons (the file's name)
    column: str  #: output column
    kind: str


@dataclass
class _Split:
    """Lines of a chunk split into fields: flat values with per-row start and count."""

    values: pa.Array
    starts: np.ndarray
    counts: np.ndarray
    shift: np.ndarray

    def field(self, position: int) -> tuple[pa.Array, np.ndarray]:
        """Field ``position`` of every row (null where the row is too short)."""
        pos = position + self.shift
        present = (pos >= 0) & (pos < self.counts)
        index = self.starts + np.where(present, pos, 0)
        if present.all():
            return self.values.take(pa.array(index)), present
        return self.values.take(pa.array(index, mask=~present)), present


def split_fields(lists: pa.Array) -> _Split:
    offsets = lists.offsets.to_numpy()
    starts = (offsets[:-1] - offsets[0]).astype(np.int64)
    counts = np.diff(offsets).astype(np.int64)
    return _Split(strings(lists.flatten()), starts, counts, np.zeros(len(counts), np.int64))


def attribute_type(name: str, options: ReaderOptions, default: str = "string") -> str:
    declared = (options.attribute_types or {}).get(name, default)
    try:
        return ATTRIBUTE_TYPES[declared]
    except KeyError:
        raise ValueError(f"unknown attribute type {declared!r} for {name!r}") from None


def convert(
    split: _Split,
    specs: Sequence[FieldSpec],
    options: ReaderOptions,
    rows: np.ndarray,
    rejects: Rejects,
) -> dict[str, pa.Array]:
    """Convert every spec'd field; record the first failing field of each row."""
    columns: dict[str, pa.Array] = {}
    for spec in specs:
        raw, present = split.field(spec.position)
        values, bad, reasons = convert_one(raw, present, spec, options)
        if len(bad):
            numbers = spec.position + split.shift[bad] + 1
            rejects.add(
                rows[bad],
                [
                    f"field {no} ({spec.label}): {why}"
                    for no, why in zip(numbers, reasons, strict=True)
                ],
            )
        columns[spec.column] = values
    return columns


def convert_one(
    raw: pa.Array, present: np.ndarray, spec: FieldSpec, options: ReaderOptions
) -> tuple[pa.Array, np.ndarray, list[str]]:
    """One column: (converted values, rows that failed, reasons)."""
    if spec.kind in ("t", "dur"):
        # a duration is a number of seconds (or --time-unit) whatever form times take
        values, errors = (time_to_us(raw, options) if spec.kind == "t"
                          else decimal_to_us(raw, options.time_unit))
        out = pa.array(values, pa.int64())
        if spec.kind == "dur":
            for row in np.flatnonzero(values < 0):
                errors.setdefault(int(row), f"negative duration: {short(str(raw[int(row)]))}")
        rows = np.array(sorted(errors), dtype=np.int64)
        return out, rows, [errors[int(r)] for r in rows]
    if spec.kind in ("src", "dst"):
        # "1 , 2 , 5": the spaces around a comma are no part of an id (kept, "1 " as src
        # and " 1 " as dst would be two vertices, and nothing would ever match)
        raw = pc.utf8_trim(raw, " \t")  # a bare "\r" is text, as a line end is "\n"
        bad = np.flatnonzero(bool_np(pc.equal(raw, "")) & present)
        return pc.fill_null(raw, ""), bad, ["empty vertex id"] * len(bad)
    if spec.kind == "string":
        return raw, np.zeros(0, np.int64), []
    return convert_number(raw, spec.kind)


_INT_RE = r"^[+-]?\d{1,18}$"
_FLOAT_RE = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def convert_number(raw: pa.Array, kind: str) -> tuple[pa.Array, np.ndarray, list[str]]:
    """int64 / float64 attribute: empty or missing -> null, malformed -> reject."""
    fast = _try_cast_number(raw, kind)
    if fast is not None:
        return fast, np.zeros(0, np.int64), []
    trimmed = pc.ascii_trim_whitespace(raw)
    pattern, what = (_INT_RE, "not an integer") if kind == "int64" else (_FLOAT_RE, "not a number")
    ok = pc.fill_null(pc.match_substring_regex(trimmed, pattern), False)
    empty = bool_np(pc.equal(trimmed, ""))
    bad = np.flatnonzero(~bool_np(ok) & ~empty & bool_np(raw.is_valid()))
    usable = pc.if_else(ok, pc.utf8_ltrim(trimmed, "+"), pa.scalar(None, pa.string()))
    values = pc.cast(usable, ARROW_TYPES[kind])
    return values, bad, [f"{what}: {short(raw[int(r)].as_py())}" for r in bad]


def _try_cast_number(raw: pa.Array, kind: str) -> pa.Array | None:
    """Cast a clean column in one go (the common case); ``None`` when anything is odd."""
    try:
        values = pc.cast(raw, ARROW_TYPES[kind])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if kind == "float64" and not np.isfinite(pc.fill_null(values, 0.0).to_numpy()).all():
        return None  # Arrow reads "nan"/"inf"; attributes must be finite numbers
    return values


def check_counts(
    split: _Split, lo: int, hi: int, rows: np.ndarray, rejects: Rejects
) -> np.ndarray:
    """Reject rows whose field count is outside ``[lo, hi]``; return the rows kept (mask)."""
    counts = split.counts
    expected = f"{lo}" if lo == hi else (f"{lo} or {hi}" if hi == lo + 1 else f"{lo} to {hi}")
    short = np.flatnonzero(counts < lo)
    long = np.flatnonzero(counts > hi)
    rejects.add(
        rows[short], [f"missing fields: expected {expected} fields, got {c}" for c in counts[short]]
    )
    rejects.add(
        rows[long], [f"too many fields: expected {expected} fields, got {c}" for c in counts[long]]
    )
    return (counts >= lo) & (counts <= hi)


def subset(split: _Split, keep: np.ndarray) -> _Split:
    return _Split(split.values, split.starts[keep], split.counts[keep], split.shift[keep])
