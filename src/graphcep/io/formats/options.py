"""Options resolution per file: whether line 1 is a header, the number and names of the
columns (:func:`prepare_options`), and the field layout they give (:func:`table_layout`)."""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa

from graphcep.io.formats.decoding import comment_prefixes
from graphcep.io.formats.fields import FieldSpec, attribute_type
from graphcep.io.formats.flow_json import LAYOUTS, time_guess
from graphcep.io.formats.quoting import quoting_problem, split_quoted
from graphcep.io.formats.schema import (
    FORMAT_FIELD_ALIASES,
    InputError,
    InputNote,
    ReaderOptions,
    SchemaError,
    placed_index,
)
from graphcep.io.formats.times import decimal_to_us, implausible_time_unit, time_to_us


def _split_one(fmt: str, line: str, options: ReaderOptions) -> list[str]:
    """Split one line the way :func:`parse_lines` would (for headers and layout sniffing)."""
    if fmt == "snap":
        return line.split()
    delimiter = field_delimiter(fmt, options)
    if fmt == "csv" and '"' in line and quoting_problem(line, delimiter) is None:
        return split_quoted(line, delimiter)
    return line.split(delimiter)


def field_delimiter(fmt: str, options: ReaderOptions) -> str:
    if options.delimiter is not None:
        return options.delimiter
    return "\t" if fmt == "tsv" else ","


def _is_time_field(values: Sequence[str], options: ReaderOptions) -> np.ndarray:
    """Which values read as a time under ``options`` (one vectorized conversion)."""
    if not values:
        return np.zeros(0, dtype=bool)
    _, errors = time_to_us(pa.array(list(values), pa.string()), options)
    ok = np.ones(len(values), dtype=bool)
    ok[list(errors)] = False
    return ok


def _head_line(line: str) -> str:
    """A head line as :func:`parse_lines` sees it: no ``\\n``, no ``\\r`` of a ``\\r\\n``."""
    line = line.removesuffix("\n")
    return line.removesuffix("\r")


#: Formats whose columns ``options.columns`` places (the others' fields are fixed).
COLUMN_FORMATS = ("csv", "tsv", "snap", "parquet", "jsonl")


def check_columns_format(fmt: str, options: ReaderOptions) -> None:
    """Refuse ``options.columns`` for a format whose fields are fixed, and positions for
    JSON lines (whose keys have no order)."""
    if not options.columns:
        return
    if fmt not in COLUMN_FORMATS:
        raise SchemaError(f"--columns places the columns of {', '.join(COLUMN_FORMATS)} "
                          f"input, not of {fmt} input (its fields are fixed)")
    if fmt == "jsonl" and any(isinstance(v, int) for v in options.columns.values()):
        raise SchemaError("--columns names the keys of JSON lines (t=time), not positions: "
                          "a JSON object's keys have no order")


def prepare_options(
    fmt: str, head: Sequence[str], options: ReaderOptions | None = None,
    name: str | None = None,
) -> ReaderOptions:
    """Fix the per-file layout from the first lines of a file, so all its chunks agree;
    a column ``options.columns`` names that the header lacks is a :class:`SchemaError`
    (its message opening with the file's ``name``, when given).

    Parameters
    ----------
    fmt
        Format name.
    head
        The first lines of the file, ``head[0]`` being physical line 1 (a few dozen is
        plenty; blank and comment lines are passed over).
    options
        Options to complete.

    Returns
    -------
    ReaderOptions
        With ``header`` and ``column_names`` set for ``csv``/``tsv``/``snap``; unchanged
        for other formats.

    Notes
    -----
    ``csv``/``tsv`` decide from the whole sample, so that one bad line cannot spoil a
    file. The number of columns is the most common field count among the sample's lines
    that read as data (time field a time; the earliest count wins a tie). Line 1 is a
    header (``options.header=None``) when it does not read as data, its non-empty fields
    are distinct names (not numbers), its quoting is well formed, and it has that many
    fields, at least the three (src, dst, t) edges need; ``options.columns`` naming
    columns implies a header. Otherwise line 1 is data, and a bad one is a counted reject
    like any other line. ``options.header`` ``True``/``False`` overrides the detection (a
    header given that way with fewer than three names is completed with positional ones,
    so lines lacking the fields are rejects, "missing fields").
    """
    options = options or ReaderOptions()
    if fmt == "jsonl" and options.column_names is None:
        _check_json_head_times(head, options, name)
    if fmt == "vast":
        _check_vast_head_times(head, options, name)
    if fmt in LAYOUTS and (guess := time_guess(fmt, head)) is not None:
        warnings.warn(InputNote(f"{name}: {guess}" if name else guess), stacklevel=2)
    if fmt not in ("csv", "tsv", "snap") or options.column_names is not None:
        return options
    prefixes = comment_prefixes(fmt, options)
    lines = [_head_line(ln) for ln in head]
    data = [
        (i, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.strip().startswith(prefixes)
    ]
    if fmt == "snap":
        count = _common_field_count(fmt, [ln for _, ln in data], options)
        prepared = replace(options, column_names=_positional_names(count, options),
                           header=False)
        _check_head_times(fmt, [ln for _, ln in data], prepared, name)
        return prepared
    first = _split_one(fmt, lines[0], options) if data and data[0][0] == 0 else None
    rest_count = _common_field_count(fmt, [ln for i, ln in data if i > 0], options)
    header = options.header
    if header is None:
        header = first is not None and _first_line_is_header(fmt, lines[0], rest_count, options)
    if header and first is not None:
        # a header (given by --header) too narrow for the columns edges read: the missing
        # ones are positional, so each line lacking them is a reject ("missing fields")
        width = len(_positional_names(None, options))
        names = (*first, *(f"c{i}" for i in range(len(first), width)))
        options = _header_columns(names, options, name, forced=options.header is True)
        _check_named_columns(names, options, name)
        prepared = replace(options, header=True, column_names=names)
        _check_head_times(fmt, [ln for i, ln in data if i > 0], prepared, name)
        return prepared
    if options.header is False and first is not None and not options.columns \
            and _first_line_is_header(fmt, lines[0], rest_count, options):
        _refuse_reordering_header(first, name)
    count = _common_field_count(fmt, [ln for _, ln in data], options)
    prepared = replace(options, header=False, column_names=_positional_names(count, options))
    _check_head_times(fmt, [ln for _, ln in data], prepared, name)
    return prepared


#: Header names (lower case) read as the edge fields when the header lacks ``t``, ``src``
#: and ``dst`` themselves, beside the formats' native names (``TimeSeconds``, ``SourceIp``
#: ...). Each field must be named by exactly one column for the header to be read by name.
HEADER_SYNONYMS: dict[str, frozenset[str]] = {
    "t": frozenset({"t", "time", "timestamp", "ts", "when", "datetime", "date", "epoch",
                    "unix_time", "unixtime", "starttime", "start_time"}),
    "src": frozenset({"src", "source", "from", "sender", "u", "src_id", "source_id",
                      "from_id", "src_ip", "srcip", "source_ip"}),
    "dst": frozenset({"dst", "target", "to", "receiver", "recipient", "v", "dest",
                      "destination", "dst_id", "target_id", "to_id", "dst_ip", "dstip",
                      "dest_ip", "destination_ip"}),
    "dur": frozenset({"dur", "duration"}),
}


def _synonyms(core: str) -> frozenset[str]:
    native = {n.lower() for table in FORMAT_FIELD_ALIASES.values()
              for n, target in table.items() if target == core}
    return HEADER_SYNONYMS[core] | native


def _header_columns(names: Sequence[str], options: ReaderOptions, name: str | None,
                    forced: bool = False) -> ReaderOptions:
    """The columns of a header that does not name ``t``, ``src`` and ``dst``: read by the
    names :data:`HEADER_SYNONYMS` knows, said in one :class:`InputNote`, when each edge
    field has exactly one such column; otherwise a :class:`SchemaError` naming the file's
    columns and ``--columns``. Positions are never guessed under a header: a header says
    what its columns hold, and ``timestamp,sender,receiver`` read as ``src,dst,t`` (the
    positions of a headerless file) would match nothing, silently. Except under a header
    the user declared (``forced``: ``--header``, which says that line 1 is no data, not
    what its columns hold): its columns are read by position, said in a note."""
    if options.columns or {"t", "src", "dst"} <= set(names):
        return options
    found: dict[str, list[str]] = {
        core: [n for n in names if n.strip().lower() in _synonyms(core)]
        for core in ("t", "src", "dst", "dur")
    }
    unclear = [core for core in ("t", "src", "dst") if len(found[core]) != 1]
    where = f"{name}: " if name else ""
    listed = ", ".join(map(repr, names))
    if unclear and forced:
        warnings.warn(InputNote(f"{where}the header ({listed}) does not name t, src and dst: "
                                "its columns are read by position as in a file without "
                                "one, src, dst, t (--columns places them otherwise)"),
                      stacklevel=2)
        return options
    if unclear:
        why = "; ".join(f"no column for {core}" if not found[core] else
                        f"{core} could be {' or '.join(map(repr, found[core]))}"
                        for core in unclear)
        raise SchemaError(f"{where}the header does not say which columns hold t, src and "
                          f"dst ({why}); the file's columns are {listed}: pass --columns "
                          "t=COL,src=COL,dst=COL")
    columns = {core: found[core][0] for core in ("t", "src", "dst", "dur")
               if len(found[core]) == 1}
    mapped = ",".join(f"{core}={col}" for core, col in columns.items())
    warnings.warn(InputNote(f"{where}header read by its names as --columns {mapped} "
                            f"(the file's columns are {listed})"), stacklevel=2)
    return replace(options, columns=columns)


def _refuse_reordering_header(names: Sequence[str], name: str | None) -> None:
    """Refuse ``--no-header`` on a file whose line 1 is a header naming t, src and dst
    (:data:`HEADER_SYNONYMS`) in other places than the positions a headerless file has
    (src, dst, t): each line would be read with its fields swapped, silently. Line 1
    naming them in those places is only a reject."""
    found = {core: [i for i, n in enumerate(names) if n.strip().lower() in _synonyms(core)]
             for core in ("src", "dst", "t")}
    places = {core: spots[0] for core, spots in found.items() if len(spots) == 1}
    if len(places) < 3 or places == {"src": 0, "dst": 1, "t": 2}:
        return
    where = f"{name}: " if name else ""
    listed = ", ".join(map(repr, names))
    mapped = ",".join(f"{core}={names[i].strip()}" for core, i in places.items())
    raise SchemaError(f"{where}line 1 ({listed}) is a header placing t, src and dst "
                      "otherwise than --no-header reads them (src, dst, t): drop "
                      f"--no-header, or pass --columns {mapped}")


def _check_head_times(fmt: str, lines: Sequence[str], options: ReaderOptions,
                      name: str | None) -> None:
    """Refuse a file whose first lines' times cannot be in the unit assumed for them
    (seconds: no ``--time-unit`` given), see :func:`implausible_time_unit`; an
    :class:`InputError` naming the file and the likely ``--time-unit``."""
    if options.time_unit is not None or options.time_format == "iso" or not lines:
        return
    try:
        index = _core_indices(options.column_names or (), options)["t"]
    except SchemaError:  # the read itself says what is wrong
        return
    fields = [_split_one(fmt, ln, options) for ln in lines]
    _refuse_implausible([f[index] for f in fields if index < len(f)], name)


def _check_json_head_times(head: Sequence[str], options: ReaderOptions,
                           name: str | None) -> None:
    """:func:`_check_head_times` for JSON lines: the numbers of the time key."""
    if options.time_unit is not None or options.time_format == "iso":
        return
    key = (options.columns or {}).get("t", "t")
    texts = []
    for line in head:
        try:
            value = json.loads(line).get(key)
        except (ValueError, AttributeError, RecursionError):  # no object: the read rejects it
            continue
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            texts.append(str(value))
    _refuse_implausible(texts, name)


def _check_vast_head_times(head: Sequence[str], options: ReaderOptions,
                           name: str | None) -> None:
    """:func:`_check_head_times` for VAST lines: ``TimeSeconds``, the first field, or the
    second after a leading ``Label`` (a line of 20 fields). The format says seconds; epoch
    milliseconds written there would otherwise read as times past the year 9999."""
    if options.time_unit is not None:
        return
    texts = []
    for line in head:
        fields = line.split(",")
        if len(fields) in (19, 20):
            texts.append(fields[len(fields) - 19].strip())
    _refuse_implausible(texts, name)


def _refuse_implausible(texts: list[str], name: str | None) -> None:
    """An :class:`InputError` naming the file when the numbers among ``texts`` cannot be
    seconds (:func:`implausible_time_unit`); texts that are no numbers are left out."""
    if not texts:
        return
    ticks, errors = decimal_to_us(pa.array(texts, pa.string()), "us")  # numbers as written
    keep = np.ones(len(ticks), dtype=bool)
    keep[list(errors)] = False
    message = implausible_time_unit(ticks[keep], "s")
    if message is not None:
        raise InputError(f"{name}: {message}" if name else message)


def _check_named_columns(names: Sequence[str], options: ReaderOptions,
                         name: str | None) -> None:
    """Refuse a header lacking a column ``options.columns`` names (before any line is
    read: every line would be a reject otherwise)."""
    try:
        _core_indices(names, options)
    except SchemaError as exc:
        raise SchemaError(f"{name}: {exc}" if name else str(exc)) from None


def _common_field_count(fmt: str, lines: Sequence[str], options: ReaderOptions) -> int | None:
    """Most common field count of the lines that read as data (all lines when none do);
    the earliest wins a tie. ``None`` without lines."""
    if fmt == "csv":
        lines = [ln for ln in lines if quoting_problem(ln, field_delimiter(fmt, options)) is None]
    fields = [_split_one(fmt, ln, options) for ln in lines]
    if not fields:
        return None
    t_index = _time_index(options)
    times = [f[t_index] if t_index < len(f) else "" for f in fields]
    is_data = _is_time_field(times, options)
    counts = [len(f) for f, ok in zip(fields, is_data, strict=True) if ok]
    counts = counts or [len(f) for f in fields]
    tally = Counter(counts)
    return max(tally, key=lambda c: (tally[c], -counts.index(c)))


def _time_index(options: ReaderOptions) -> int:
    """Field index of the time in a headerless line (``options.columns`` or SNAP's 2)."""
    ref = (options.columns or {}).get("t", 2)
    return ref if isinstance(ref, int) else 2


def _positional_names(count: int | None, options: ReaderOptions) -> tuple[str, ...]:
    """``c0, c1, ...`` for a file without header: at least enough for the mapped columns."""
    indices = [v for v in (options.columns or {}).values() if isinstance(v, int)]
    needed = max(indices) + 1 if indices else 3
    return tuple(f"c{i}" for i in range(max(count or 0, needed)))


_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _first_line_is_header(
    fmt: str, line: str, rest_count: int | None, options: ReaderOptions
) -> bool:
    """Line 1 names the columns (see :func:`prepare_options`)."""
    if any(isinstance(v, str) for v in (options.columns or {}).values()):
        return True
    if fmt == "csv" and quoting_problem(line, field_delimiter(fmt, options)) is not None:
        return False
    fields = _split_one(fmt, line, options)
    if len(fields) < len(_positional_names(None, options)):
        # too few names for src, dst and t: no header of edges (a 2-column file, a binary
        # one read as CSV); line 1 is data, and a reject like the others
        return False
    # Empty names are allowed (a header ending in a delimiter); the others must differ.
    names = [f.strip() for f in fields if f.strip()]
    if not names or len(set(names)) < len(names):
        return False
    if any(_NUMBER_RE.match(name) for name in names):
        return False
    t_index = _time_index(options)
    if t_index < len(fields) and _is_time_field([fields[t_index]], options).all():
        return False
    return rest_count is None or rest_count == len(fields)


def table_layout(fmt: str, names: Sequence[str], options: ReaderOptions) -> list[FieldSpec]:
    """Field specs for ``csv``/``tsv``/``snap`` files whose columns are ``names``."""
    index = _core_indices(names, options)
    # Headerless files have positional names; reasons then say "field 3 (t)".
    specs = [
        FieldSpec(i, core if names[i] == f"c{i}" else names[i], core, core)
        for core, i in index.items()
    ]
    used = set(index.values())
    taken = {"t", "src", "dst", "dur", "seq"}
    for i, name in enumerate(names):
        if i in used:
            continue
        # Attribute names must not clash with the core columns or each other.
        column = name or f"c{i}"
        while column in taken:
            column = f"{column}_"
        taken.add(column)
        specs.append(FieldSpec(i, name, column, attribute_type(column, options)))
    order = {"t": 0, "src": 1, "dst": 2, "dur": 3}
    return sorted(specs, key=lambda s: (order.get(s.kind, 4), s.position))


def _core_indices(names: Sequence[str], options: ReaderOptions) -> dict[str, int]:
    """Schema name -> field index, from ``options.columns`` or the defaults."""
    mapping = dict(options.columns or {})
    if not mapping:
        if {"t", "src", "dst"} <= set(names):
            mapping = {k: k for k in ("t", "src", "dst", "dur") if k in names}
        else:
            mapping = {"src": 0, "dst": 1, "t": 2}
    index: dict[str, int] = {}
    for core, ref in mapping.items():
        if core not in ("t", "src", "dst", "dur"):
            raise SchemaError(f"columns maps unknown schema field {core!r}")
        index[core] = placed_index(core, ref, names)
    missing = {"t", "src", "dst"} - set(index)
    if missing:
        raise SchemaError(f"columns lacks {sorted(missing)}")
    return index
