"""Edge-stream formats and the vectorized line parser shared by the local and Spark readers.

:func:`parse_lines` turns a chunk of raw text lines into edges in the schema of
:mod:`graphcep.events` plus a table of rejected lines. It is pure (no globals, no I/O), so
the local reader calls it on 8 MiB chunks and Spark calls it inside ``mapInArrow``. All
per-line work is done with :mod:`pyarrow.compute` and NumPy; Python loops only run over
rejected lines (and over every line for ``jsonl``, where :func:`json.loads` is the parser).

Formats
-------
``snap``
    Whitespace-separated ``src dst t [c3 c4 ...]``. Lines starting with ``#`` or ``%`` are
    comments. The number of fields is the most common one among the first data lines of
    the file (the earliest wins a tie; see :func:`prepare_options`): shorter lines (still
    holding src, dst and t) get null attributes, longer lines are rejected.
    Extra columns are string attributes named by their 0-based position (``c3``, ...).
    ``options.columns`` may remap positions, e.g. ``{"t": 0, "src": 1, "dst": 2}`` for
    SocioPatterns ``t i j`` files.
``csv`` / ``tsv``
    Delimiter-separated (``,`` / tab). Whether line 1 is a header is decided from the
    first lines as a whole (:func:`prepare_options`): it is one when it does not read as
    data and names the columns (distinct, non-numeric names, as many as the data lines
    have); a bad line 1 that is no header is a counted reject like any other line.
    ``options.header`` (``True``/``False``) overrides the detection. ``options.columns``
    maps schema names to file column names or 0-based indices; without it the columns
    named ``t``/``src``/``dst``/``dur`` are used, or else positions 0, 1, 2 are ``src``,
    ``dst``, ``t`` as in SNAP files. Every line must have as many fields as the header,
    or, without one, as most of the first data lines. Other columns are attributes, typed
    ``string`` unless ``options.attribute_types`` declares ``int64`` or ``float64``: types
    are declared, never guessed, so all chunks of a file agree. Fields are not trimmed
    (CSV keeps spaces), except numeric ones. ``csv`` fields may be double-quoted (RFC
    4180, quotes doubled inside); a line whose quoting is malformed (an unterminated
    quoted field, text after a closing quote, a quote inside an unquoted field) is
    rejected. A record is one physical line: a quoted field spanning lines is not
    supported, and both of its lines are rejected. ``tsv`` has no quoting (a ``"`` is
    text).
``vast``
    VAST Challenge 2013 MC3 netflow, 19 fields (see :data:`VAST_FIELDS`), or 20 with a
    leading ``Label`` (the SAM project's CTU-13 converter). ``t`` = TimeSeconds,
    ``src`` = SourceIp, ``dst`` = DestIp, ``dur`` = DurationSeconds; the other fields are
    kept under their VAST names with fixed types. In the real files IpLayerProtocol holds
    the number (6/17, int64) and IpLayerProtocolCode the name (tcp/udp, string): kept as
    the files give them. ``Label`` is always the last attribute column (int64, null on
    19-field lines; :func:`graphcep.io.readers.read_edges` drops it when the whole read
    has none). Header lines (first or second field ``TimeSeconds``) are skipped.
``netflow5``
    NetFlow v5 records as 24-field CSV, in the layout of SAM's ``NetflowV5`` tuple
    (header fields first, then the v5 record; see :data:`NETFLOW5_FIELDS`)::

        unix_secs, unix_nsecs, sysuptime, exaddr, dPkts, dOctets, First, Last,
        engine_type, engine_id, srcaddr, dstaddr, nexthop, input, output,
        srcport, dstport, prot, tos, tcp_flags, src_mask, dst_mask, src_as, dst_as

    ``First``/``Last``/``sysuptime`` are router uptimes in ms. Start time is
    ``unix_secs + unix_nsecs/1e9 - (sysuptime - First)/1e3`` seconds, duration
    ``(Last - First)`` ms, both taken modulo 2**32 ms because uptime counters wrap
    (~49.7 days); the start is rounded half-even to the microsecond. All 24 fields are
    kept as attributes except srcaddr/dstaddr (now ``src``/``dst``).
``jsonl``
    One JSON object per line: ``t`` (seconds, number or string), ``src``, ``dst``,
    optional ``dur`` (seconds); other keys are attributes (strings unless declared in
    ``options.attribute_types``). Numbers are parsed as :class:`~decimal.Decimal`, so
    times are exact. Attribute columns are ``options.attributes`` when given, otherwise
    the keys seen in the chunk (chunks may then differ; readers merge with nulls).
``parquet``
    Not line based: :func:`parse_table` converts Arrow record batches.

Decisions
---------
* A line ends at ``\\n``; ``\\r\\n`` is one line end (its ``\\r`` is dropped); a bare
  ``\\r`` is an ordinary character inside a line, for every line format (text in a
  ``csv``/``tsv`` field, whitespace to ``snap`` and JSON, trimmed from numeric fields).
* Times are exact integer microseconds. Decimal strings are split into integer and
  fraction digits and rounded half-even at the microsecond; never through float64.
  Anything unusual (exponents, underscores, non-ASCII digits, very long integer parts)
  goes through an exact :class:`~fractions.Fraction` path. ``time_unit`` (``s``, ``ms``,
  ``us``) says what a plain number means; ``time_format='iso'`` reads ISO-8601 date-times
  (no zone = UTC), ``'auto'`` tries a number first.
* ``seq`` is the 1-based physical line number; readers add ``file_index << 40`` for
  multi-file reads.
* Blank lines and comments are not rejects: they are *skipped*
  (``len(lines) - len(edges) - len(rejects)``). With ``options.strict_empty`` blank lines
  are rejects ("empty line").
* Rejects carry the line number, the first problem found (``"field 3 (t): not a number:
  'abc'"``) and the line text cut to 200 characters. Binary input is validated as UTF-8
  per line; lines over ``options.max_line_bytes`` are rejected before decoding.
* Empty numeric attribute fields become nulls; non-numeric ones are rejects.
* ``jsonl``: a line whose JSON holds a lone surrogate escape (``"\\ud800"``, in a key or a
  value) is rejected: it is no character and cannot be written as UTF-8.
* Integer and date columns of column-based input are range-checked before scaling to
  microseconds, so ``INT64_MIN`` seconds is out of range, not a wrapped ``t = 0``. A
  column of a type no edge field comes from raises :class:`SchemaError`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import TimeFormatError

#: Formats :func:`parse_lines` reads.
LINE_FORMATS: tuple[str, ...] = ("snap", "csv", "tsv", "vast", "netflow5", "jsonl")
#: Every format, including the column-based one.
FORMATS: tuple[str, ...] = (*LINE_FORMATS, "parquet")

#: Schema of the rejects table returned next to the edges.
REJECT_SCHEMA = pa.schema(
    [
        pa.field("line", pa.int64(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
    ]
)
#: Rejected line text is cut to this many characters.
REJECT_TEXT_CHARS = 200
#: Same bound as :func:`graphcep.events.seconds_to_us`: |t| below 2**62 microseconds.
MAX_ABS_US = 2**62

_UNIT_DIGITS = {"s": 6, "ms": 3, "us": 0}
_ATTRIBUTE_TYPES = {
    "string": "string",
    "str": "string",
    "int64": "int64",
    "int": "int64",
    "float64": "float64",
    "float": "float64",
}
_ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}


class InputError(ValueError):
    """Input that cannot be read at all: nothing readable in any file, or a file whose
    columns cannot hold edges. The message names the file; the command line reports it in
    one line (exit status 2)."""


class SchemaError(InputError):
    """A column-based file (Parquet) whose columns cannot hold edges: a core column is
    missing or has a type no edge field can be read from."""


#: VAST 2013 MC3 columns in file order with their kind (core or attribute type).
VAST_FIELDS: tuple[tuple[str, str], ...] = (
    ("TimeSeconds", "t"),
    ("ParseDate", "string"),
    ("DateTime", "string"),
    ("IpLayerProtocol", "int64"),
    ("IpLayerProtocolCode", "string"),
    ("SourceIp", "src"),
    ("DestIp", "dst"),
    ("SourcePort", "int64"),
    ("DestPort", "int64"),
    ("MoreFragments", "int64"),
    ("CountFragments", "int64"),
    ("DurationSeconds", "dur"),
    ("SrcPayloadBytes", "int64"),
    ("DestPayloadBytes", "int64"),
    ("SrcTotalBytes", "int64"),
    ("DestTotalBytes", "int64"),
    ("FirstSeenSrcPacketCount", "int64"),
    ("FirstSeenDestPacketCount", "int64"),
    ("RecordForceOut", "int64"),
)
#: Attribute columns of a ``vast`` edge table, in order (``Label`` last, nullable).
VAST_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    *((n, k) for n, k in VAST_FIELDS if k not in ("t", "src", "dst", "dur")),
    ("Label", "int64"),
)

#: NetFlow v5 CSV layout (SAM's ``NetflowV5`` order): header fields, then the record.
NETFLOW5_FIELDS: tuple[tuple[str, str], ...] = (
    ("unix_secs", "int64"),
    ("unix_nsecs", "int64"),
    ("sysuptime", "int64"),
    ("exaddr", "string"),
    ("dPkts", "int64"),
    ("dOctets", "int64"),
    ("First", "int64"),
    ("Last", "int64"),
    ("engine_type", "int64"),
    ("engine_id", "int64"),
    ("srcaddr", "src"),
    ("dstaddr", "dst"),
    ("nexthop", "string"),
    ("input", "int64"),
    ("output", "int64"),
    ("srcport", "int64"),
    ("dstport", "int64"),
    ("prot", "int64"),
    ("tos", "int64"),
    ("tcp_flags", "int64"),
    ("src_mask", "int64"),
    ("dst_mask", "int64"),
    ("src_as", "int64"),
    ("dst_as", "int64"),
)

#: Format-native field names -> column names of the edge table (queries may say
#: ``source(SourceIp)`` or ``e1.SourcePort``). Core names map to the schema names.
FORMAT_FIELD_ALIASES: dict[str, dict[str, str]] = {
    "vast": {
        "TimeSeconds": "t",
        "SourceIp": "src",
        "DestIp": "dst",
        "DurationSeconds": "dur",
    },
    "netflow5": {
        "srcaddr": "src",
        "dstaddr": "dst",
        # SAM's NetflowV5 tuple names, so SAL written for SAM resolves too.
        "SourceIp": "src",
        "DestIp": "dst",
        "SourcePort": "srcport",
        "DestPort": "dstport",
        "Protocol": "prot",
        "UnixSecs": "unix_secs",
        "UnixNsecs": "unix_nsecs",
        "SysUptime": "sysuptime",
        "Dpkts": "dPkts",
        "Doctets": "dOctets",
        "TcpFlags": "tcp_flags",
    },
}


def resolve_field(fmt: str | None, name: str) -> str:
    """Map a format-native field name to the edge-table column holding it.

    Parameters
    ----------
    fmt
        Format name, or ``None`` to accept the native names of every format (they do not
        clash).
    name
        Field name as a query writes it, e.g. ``"SourceIp"``.

    Returns
    -------
    str
        The column name (``"src"``), or ``name`` unchanged when it is no alias. An exact
        match wins; otherwise aliases match case-insensitively.
    """
    if fmt is None:
        aliases: dict[str, str] = {}
        for table in FORMAT_FIELD_ALIASES.values():
            aliases.update(table)
    else:
        aliases = FORMAT_FIELD_ALIASES.get(fmt, {})
    if name in aliases:
        return aliases[name]
    lowered = {k.lower(): v for k, v in aliases.items()}
    return lowered.get(name.lower(), name)


@dataclass(frozen=True)
class ReaderOptions:
    """How to read a stream. Every field has a per-format default.

    Attributes
    ----------
    time_unit
        Unit of plain numbers in the time (and duration) column: ``"s"``, ``"ms"`` or
        ``"us"``. ``None`` = seconds, except for Parquet/Arrow input, where integer
        columns named ``t``/``dur`` are microseconds and a file's
        ``graphcep.time_unit`` metadata is honoured.
    time_format
        ``"number"``, ``"iso"`` (ISO-8601 date-time, UTC when no zone) or ``"auto"``.
    delimiter
        Field separator for ``csv``/``tsv`` (default ``,`` / tab).
    header
        Whether line 1 of a ``csv``/``tsv`` file is a header; ``None`` detects it from
        the first lines as a whole (see :func:`prepare_options`).
    columns
        Schema name -> file column name or 0-based index (``csv``/``tsv``/``snap``/
        ``parquet``).
    column_names
        Names of the file's columns (set by :func:`prepare_options` from the header or the
        first data line, so that all chunks agree).
    attribute_types
        Attribute column -> ``"string"``, ``"int64"`` or ``"float64"``.
    attributes
        ``jsonl``: the attribute keys to keep (all others dropped).
    comment_prefixes
        Lines starting with these are skipped; ``None`` = ``("#", "%")`` for ``snap``,
        none for other formats.
    strict_empty
        Count blank lines as rejects ("empty line") instead of skipping them.
    max_line_bytes
        Longer lines are rejected (default 1 MiB).
    chunk_bytes
        Bytes read per chunk by the local reader (default 8 MiB).
    """

    time_unit: str | None = None
    time_format: str = "number"
    delimiter: str | None = None
    header: bool | None = None
    columns: Mapping[str, str | int] | None = None
    column_names: tuple[str, ...] | None = None
    attribute_types: Mapping[str, str] | None = None
    attributes: tuple[str, ...] | None = None
    comment_prefixes: tuple[str, ...] | None = None
    strict_empty: bool = False
    max_line_bytes: int = 1 << 20
    chunk_bytes: int = 8 << 20


# ---------------------------------------------------------------------------------------
# Exact time conversion, vectorized
# ---------------------------------------------------------------------------------------

_DECIMAL_RE = r"^(?P<sign>[+-]?)(?P<int>\d*)(?:\.(?P<frac>\d*))?$"
_ISO_RE = (
    r"^(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[T ](?P<hm>\d{2}:\d{2})(?::(?P<sec>\d{2})(?:[.,](?P<frac>\d+))?)?)?"
    r"\s*(?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?$"
)


def _short(text: str, limit: int = 40) -> str:
    """``repr`` of a value for a reject reason, cut so reasons stay one short line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _unit_digits(unit: str | None) -> int:
    try:
        return _UNIT_DIGITS[unit or "s"]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}; use one of s, ms, us") from None


def scalar_to_us(text: str, unit: str = "s") -> int:
    """Exact slow path: one decimal string in ``unit`` -> integer microseconds.

    Rounds half-even, like :func:`graphcep.events.seconds_to_us`, but through
    :class:`~fractions.Fraction`, so it stays exact for any number of digits.

    Raises
    ------
    TimeFormatError
        Not a number, not finite, or ``|t| >= 2**62`` microseconds.
    """
    digits = _unit_digits(unit)
    try:
        dec = Decimal(text.strip())
    except InvalidOperation:
        raise TimeFormatError(f"not a number: {_short(text)}") from None
    if not dec.is_finite():
        raise TimeFormatError(f"not a finite number: {_short(text)}")
    if dec.is_zero():
        return 0
    # Bounds before Fraction: "1e999999999" must not build a billion-digit integer.
    magnitude = dec.adjusted() + digits
    if magnitude >= 19:
        raise TimeFormatError(f"out of range: {_short(text)}")
    if magnitude <= -2:
        return 0
    us = round(Fraction(dec) * 10**digits)  # round() on a Fraction is half-even
    if abs(us) >= MAX_ABS_US:
        raise TimeFormatError(f"out of range: {_short(text)}")
    return us


def _strings(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A plain ``string`` array (chunks combined, large types narrowed)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    return arr


def _bool_np(arr: pa.Array) -> np.ndarray:
    """Boolean Arrow array -> NumPy bool, nulls as False."""
    return pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(bool)


def decimal_to_us(texts: pa.Array, unit: str | None = "s") -> tuple[np.ndarray, dict[int, str]]:
    """Convert decimal strings to exact integer microseconds.

    Parameters
    ----------
    texts
        String array of numbers in ``unit`` (``"1312964022.93089"``, ``"-3"``, ``".5"``).
    unit
        ``"s"``, ``"ms"`` or ``"us"``.

    Returns
    -------
    values, errors
        int64 microseconds (0 where invalid) and ``{row: message}`` for invalid rows.

    Notes
    -----
    Fast path, all vectorized: ``sign, int, frac`` are split off with a regular
    expression; the result is ``int * 10**k + frac[:k]`` plus one when the dropped digits
    are above one half, or exactly one half and the kept value is odd (half-even).
    """
    k = _unit_digits(unit)
    texts = _strings(texts)
    parts = pc.extract_regex(pc.ascii_trim_whitespace(texts), _DECIMAL_RE)
    sign = pc.fill_null(parts.field("sign"), "")
    ipart = pc.fill_null(parts.field("int"), "")
    fpart = pc.fill_null(parts.field("frac"), "")
    ilen = pc.utf8_length(ipart).to_numpy(zero_copy_only=False)
    flen = pc.utf8_length(fpart).to_numpy(zero_copy_only=False)
    # Integer parts up to 18 - k digits keep |us| < 10**18 < 2**62: no overflow possible.
    fast = _bool_np(parts.is_valid()) & (ilen + flen > 0) & (ilen <= 18 - k)
    fast_arr = pa.array(fast)
    ints = pc.cast(pc.if_else(pc.and_(fast_arr, pa.array(ilen > 0)), ipart, "0"), pa.int64())
    mag = ints.to_numpy(zero_copy_only=False) * (10**k)
    if k:
        head = pc.utf8_rpad(pc.utf8_slice_codeunits(fpart, 0, k), k, "0")
        head = pc.cast(pc.if_else(fast_arr, head, "0" * k), pa.int64())
        mag = mag + head.to_numpy(zero_copy_only=False)
    mag = mag + _round_up(fpart, k, flen, mag, fast)
    values = np.where(sign.to_numpy(zero_copy_only=False) == "-", -mag, mag)
    values[~fast] = 0
    errors: dict[int, str] = {}
    for row in np.flatnonzero(~fast):
        text = texts[int(row)].as_py()
        if text is None:
            errors[int(row)] = "missing value"
            continue
        try:
            values[row] = scalar_to_us(text, unit or "s")
        except TimeFormatError as exc:
            errors[int(row)] = str(exc)
    return values.astype(np.int64, copy=False), errors


def _round_up(
    fpart: pa.Array, k: int, flen: np.ndarray, mag: np.ndarray, fast: np.ndarray
) -> np.ndarray:
    """1 where the fraction digits after position ``k`` round the magnitude up (half-even)."""
    up = np.zeros(len(mag), dtype=np.int64)
    rows = np.flatnonzero(fast & (flen > k))
    if len(rows) == 0:
        return up
    sub = fpart.take(pa.array(rows))
    digit = pc.cast(pc.utf8_slice_codeunits(sub, k, k + 1), pa.int64()).to_numpy()
    ties = digit == 5
    more = np.zeros(len(rows), dtype=bool)
    if ties.any():
        tie_rows = np.flatnonzero(ties)
        rest = pc.utf8_slice_codeunits(sub.take(pa.array(tie_rows)), k + 1)
        more[tie_rows] = _bool_np(pc.match_substring_regex(rest, "[1-9]"))
    odd = (mag[rows] & 1) == 1
    up[rows] = ((digit > 5) | (ties & (more | odd))).astype(np.int64)
    return up


def iso_to_us(texts: pa.Array) -> tuple[np.ndarray, dict[int, str]]:
    """Convert ISO-8601 date-times to exact integer microseconds since the Unix epoch (UTC).

    Accepts ``YYYY-MM-DD``, ``YYYY-MM-DD[T ]HH:MM[:SS[.fff...]]`` with an optional ``Z`` or
    ``+HH[:MM]`` zone; no zone means UTC. Fractions beyond microseconds round half-even.
    Other spellings go through :meth:`datetime.fromisoformat` one by one.

    Returns
    -------
    values, errors
        As :func:`decimal_to_us`.
    """
    texts = _strings(texts)
    parts = pc.extract_regex(pc.ascii_trim_whitespace(texts), _ISO_RE)
    matched = _bool_np(parts.is_valid())
    hm = pc.fill_null(parts.field("hm"), "")
    hm = pc.if_else(pc.equal(hm, ""), "00:00", hm)
    sec = pc.fill_null(parts.field("sec"), "")
    sec = pc.if_else(pc.equal(sec, ""), "00", sec)
    date = pc.fill_null(parts.field("date"), "1970-01-01")
    base = pc.binary_join_element_wise(date, "T", hm, ":", sec, "")
    stamp = pc.strptime(base, format="%Y-%m-%dT%H:%M:%S", unit="s", error_is_null=True)
    # strptime rolls 02-30 over to 03-02; a date that does not print back is invalid.
    printed = pc.strftime(stamp, format="%Y-%m-%dT%H:%M:%S")
    ok = matched & _bool_np(pc.equal(printed, base))
    seconds = pc.fill_null(stamp.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    frac = pc.fill_null(parts.field("frac"), "")
    frac_us, _ = decimal_to_us(pc.binary_join_element_wise("0.", frac, ""), "s")
    offset = _zone_offsets(pc.fill_null(parts.field("tz"), ""))
    values = (seconds - offset) * 1_000_000 + frac_us
    values[~ok] = 0
    errors: dict[int, str] = {}
    for row in np.flatnonzero(~ok):
        text = texts[int(row)].as_py()
        try:
            values[row] = _scalar_iso_us(text)
        except TimeFormatError as exc:
            errors[int(row)] = str(exc)
    return values.astype(np.int64, copy=False), errors


def _zone_offsets(tz: pa.Array) -> np.ndarray:
    """Seconds east of UTC for ``Z`` / ``+HH`` / ``+HH:MM`` / ``+HHMM`` strings."""
    digits = pc.replace_substring_regex(tz, r"[^0-9]", "")
    digits = pc.utf8_rpad(digits, 4, "0")
    hours = pc.cast(pc.utf8_slice_codeunits(digits, 0, 2), pa.int64()).to_numpy()
    minutes = pc.cast(pc.utf8_slice_codeunits(digits, 2, 4), pa.int64()).to_numpy()
    negative = _bool_np(pc.starts_with(tz, "-"))
    offset = hours * 3600 + minutes * 60
    return np.where(negative, -offset, offset)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _scalar_iso_us(text: str | None) -> int:
    """Slow path of :func:`iso_to_us` for spellings the regular expression does not cover."""
    if text is None:
        raise TimeFormatError("missing value")
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TimeFormatError(f"not an ISO-8601 date-time: {_short(text)}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    delta = stamp - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def time_to_us(texts: pa.Array, options: ReaderOptions) -> tuple[np.ndarray, dict[int, str]]:
    """Convert a time column following ``options.time_format`` and ``options.time_unit``."""
    fmt = options.time_format
    if fmt == "number":
        return decimal_to_us(texts, options.time_unit)
    if fmt == "iso":
        return iso_to_us(texts)
    if fmt != "auto":
        raise ValueError(f"unknown time_format {fmt!r}; use number, iso or auto")
    values, errors = decimal_to_us(texts, options.time_unit)
    if errors:
        rows = np.fromiter(errors, dtype=np.int64)
        iso_values, iso_errors = iso_to_us(_strings(texts).take(pa.array(rows)))
        for j, row in enumerate(rows):
            if j in iso_errors:
                text = _strings(texts)[int(row)].as_py() or ""
                errors[int(row)] = f"neither a number nor an ISO-8601 date-time: {_short(text)}"
            else:
                values[row] = iso_values[j]
                del errors[int(row)]
    return values, errors


def format_seconds_array(us: pa.Array | np.ndarray) -> pa.Array:
    """Vectorized :func:`graphcep.events.format_seconds`: microseconds -> exact seconds text.

    >>> format_seconds_array(np.array([9_840_000, -1, 5_000_000])).to_pylist()
    ['9.84', '-0.000001', '5']
    """
    values = np.asarray(us, dtype=np.int64)
    whole, frac = np.divmod(np.abs(values), 1_000_000)
    whole_s = pa.array(whole).cast(pa.string())
    frac_s = pc.utf8_rtrim(pc.utf8_lpad(pa.array(frac).cast(pa.string()), 6, "0"), "0")
    text = pc.if_else(
        pa.array(frac == 0), whole_s, pc.binary_join_element_wise(whole_s, frac_s, ".")
    )
    signed = pc.binary_join_element_wise("-", text, "")
    return pc.if_else(pa.array(values < 0), signed, text)


# ---------------------------------------------------------------------------------------
# Reject bookkeeping
# ---------------------------------------------------------------------------------------


class _Rejects:
    """Reasons for rejected rows of one chunk; the first reason found for a row wins."""

    def __init__(self, n: int) -> None:
        self.reasons: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.n = n

    def add(self, rows: np.ndarray, reason: str | Sequence[str]) -> None:
        if isinstance(reason, str):
            for row in rows:
                self.reasons.setdefault(int(row), reason)
        else:
            for row, why in zip(rows, reason, strict=True):
                self.reasons.setdefault(int(row), why)

    def mask(self) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if self.reasons:
            out[np.fromiter(self.reasons, dtype=np.int64)] = True
        return out

    def table(self, text: pa.Array, line_numbers: np.ndarray) -> pa.Table:
        rows = np.array(sorted(self.reasons), dtype=np.int64)
        texts = []
        for row in rows:
            value = self.texts.get(int(row))
            if value is None:
                value = text[int(row)].as_py() or ""
            texts.append(value[:REJECT_TEXT_CHARS])
        return pa.table(
            {
                "line": pa.array(line_numbers[rows], pa.int64()),
                "reason": pa.array([self.reasons[int(r)] for r in rows], pa.string()),
                "text": pa.array(texts, pa.string()),
            },
            schema=REJECT_SCHEMA,
        )


def empty_rejects() -> pa.Table:
    """An empty rejects table."""
    return REJECT_SCHEMA.empty_table()


# ---------------------------------------------------------------------------------------
# Decoding and line classification
# ---------------------------------------------------------------------------------------


def _decode(lines: pa.Array, max_line_bytes: int, rejects: _Rejects) -> pa.Array:
    """Validate lengths and UTF-8; return a ``string`` array with bad lines emptied."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if pa.types.is_string(lines.type) or pa.types.is_large_string(lines.type):
        view = lines  # Arrow strings are valid UTF-8 already
        binary = False
    elif pa.types.is_binary(lines.type) or pa.types.is_large_binary(lines.type):
        binary = True
        target = pa.large_string() if pa.types.is_large_binary(lines.type) else pa.string()
        view = lines.view(target)
    else:
        raise TypeError(f"lines must be a string or binary array, not {lines.type}")
    view = pc.fill_null(view, "")
    bad = np.zeros(len(view), dtype=bool)
    lengths = pc.binary_length(view).to_numpy(zero_copy_only=False)
    too_long = np.flatnonzero(lengths > max_line_bytes)
    for row in too_long:
        rejects.add(np.array([row]), too_long_reason(int(lengths[row]), max_line_bytes))
        rejects.texts[int(row)] = _lossy(view, int(row))
    bad[too_long] = True
    if binary:
        for row in _invalid_utf8_rows(view, bad):
            raw = _raw_bytes(view, row)
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                where = exc.start
            rejects.add(np.array([row]), f"invalid UTF-8 (at byte {where + 1})")
            rejects.texts[row] = raw[: REJECT_TEXT_CHARS * 4].decode("utf-8", "backslashreplace")
            bad[row] = True
    if bad.any():
        view = pc.if_else(pa.array(bad), "", view)
    return _strings(view)


def too_long_reason(length: int | None, max_line_bytes: int) -> str:
    """Reject reason of a line over ``max_line_bytes``; ``length=None`` when unknown."""
    size = f"{length} > {max_line_bytes}" if length is not None else f"over {max_line_bytes}"
    return f"line longer than max_line_bytes ({size} bytes)"


def _raw_bytes(view: pa.Array, row: int) -> bytes:
    return (
        view.slice(row, 1)
        .view(pa.large_binary() if pa.types.is_large_string(view.type) else pa.binary())[0]
        .as_py()
    )


def _lossy(view: pa.Array, row: int) -> str:
    """The start of a line as text, whatever its bytes."""
    raw = _raw_bytes(view, row)[: REJECT_TEXT_CHARS * 4]
    return raw.decode("utf-8", "backslashreplace")


def _invalid_utf8_rows(view: pa.Array, skip: np.ndarray) -> list[int]:
    """Rows whose bytes are not UTF-8, found by bisecting full validation (no per-line loop)."""
    found: list[int] = []

    def search(lo: int, hi: int) -> None:
        try:
            view.slice(lo, hi - lo).validate(full=True)
            return
        except pa.ArrowInvalid:
            pass
        if hi - lo == 1:
            if not skip[lo]:
                found.append(lo)
            return
        mid = (lo + hi) // 2
        search(lo, mid)
        search(mid, hi)

    if len(view):
        try:
            view.validate(full=True)
        except pa.ArrowInvalid:
            search(0, len(view))
    return found


def _drop_carriage_return(text: pa.Array) -> pa.Array:
    """Drop the one ``\\r`` of a ``\\r\\n`` line end; other ``\\r`` are text (see module doc)."""
    ends_cr = pc.ends_with(text, "\r")
    return pc.if_else(ends_cr, pc.utf8_slice_codeunits(text, 0, -1), text)


def _comment_prefixes(fmt: str, options: ReaderOptions) -> tuple[str, ...]:
    if options.comment_prefixes is not None:
        return options.comment_prefixes
    return ("#", "%") if fmt == "snap" else ()


def _skippable(text: pa.Array, fmt: str, options: ReaderOptions, rejects: _Rejects) -> np.ndarray:
    """Blank and comment lines (blank ones become rejects under ``strict_empty``)."""
    trimmed = pc.ascii_trim_whitespace(text)
    blank = _bool_np(pc.equal(trimmed, ""))
    blank &= ~rejects.mask()
    if options.strict_empty:
        rejects.add(np.flatnonzero(blank), "empty line")
        skip = np.zeros(len(text), dtype=bool)
    else:
        skip = blank
    for prefix in _comment_prefixes(fmt, options):
        skip |= _bool_np(pc.starts_with(trimmed, prefix))
    return skip


# ---------------------------------------------------------------------------------------
# Field layouts
# ---------------------------------------------------------------------------------------


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


def _split(lists: pa.Array) -> _Split:
    offsets = lists.offsets.to_numpy()
    starts = (offsets[:-1] - offsets[0]).astype(np.int64)
    counts = np.diff(offsets).astype(np.int64)
    return _Split(_strings(lists.flatten()), starts, counts, np.zeros(len(counts), np.int64))


def _attribute_type(name: str, options: ReaderOptions, default: str = "string") -> str:
    declared = (options.attribute_types or {}).get(name, default)
    try:
        return _ATTRIBUTE_TYPES[declared]
    except KeyError:
        raise ValueError(f"unknown attribute type {declared!r} for {name!r}") from None


def _convert(
    split: _Split,
    specs: Sequence[FieldSpec],
    options: ReaderOptions,
    rows: np.ndarray,
    rejects: _Rejects,
) -> dict[str, pa.Array]:
    """Convert every spec'd field; record the first failing field of each row."""
    columns: dict[str, pa.Array] = {}
    for spec in specs:
        raw, present = split.field(spec.position)
        values, bad, reasons = _convert_one(raw, present, spec, options)
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


def _convert_one(
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
                errors.setdefault(int(row), f"negative duration: {_short(str(raw[int(row)]))}")
        rows = np.array(sorted(errors), dtype=np.int64)
        return out, rows, [errors[int(r)] for r in rows]
    if spec.kind in ("src", "dst"):
        bad = np.flatnonzero(_bool_np(pc.equal(raw, "")) & present)
        return pc.fill_null(raw, ""), bad, ["empty vertex id"] * len(bad)
    if spec.kind == "string":
        return raw, np.zeros(0, np.int64), []
    return _convert_number(raw, spec.kind)


_INT_RE = r"^[+-]?\d{1,18}$"
_FLOAT_RE = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def _convert_number(raw: pa.Array, kind: str) -> tuple[pa.Array, np.ndarray, list[str]]:
    """int64 / float64 attribute: empty or missing -> null, malformed -> reject."""
    fast = _try_cast_number(raw, kind)
    if fast is not None:
        return fast, np.zeros(0, np.int64), []
    trimmed = pc.ascii_trim_whitespace(raw)
    pattern, what = (_INT_RE, "not an integer") if kind == "int64" else (_FLOAT_RE, "not a number")
    ok = pc.fill_null(pc.match_substring_regex(trimmed, pattern), False)
    empty = _bool_np(pc.equal(trimmed, ""))
    bad = np.flatnonzero(~_bool_np(ok) & ~empty & _bool_np(raw.is_valid()))
    usable = pc.if_else(ok, pc.utf8_ltrim(trimmed, "+"), pa.scalar(None, pa.string()))
    values = pc.cast(usable, _ARROW_TYPES[kind])
    return values, bad, [f"{what}: {_short(raw[int(r)].as_py())}" for r in bad]


def _try_cast_number(raw: pa.Array, kind: str) -> pa.Array | None:
    """Cast a clean column in one go (the common case); ``None`` when anything is odd."""
    try:
        values = pc.cast(raw, _ARROW_TYPES[kind])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if kind == "float64" and not np.isfinite(pc.fill_null(values, 0.0).to_numpy()).all():
        return None  # Arrow reads "nan"/"inf"; attributes must be finite numbers
    return values


def _check_counts(
    split: _Split, lo: int, hi: int, rows: np.ndarray, rejects: _Rejects
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


def _subset(split: _Split, keep: np.ndarray) -> _Split:
    return _Split(split.values, split.starts[keep], split.counts[keep], split.shift[keep])


# ---------------------------------------------------------------------------------------
# Options resolution (header, column layout)
# ---------------------------------------------------------------------------------------


def _split_one(fmt: str, line: str, options: ReaderOptions) -> list[str]:
    """Split one line the way :func:`parse_lines` would (for headers and layout sniffing)."""
    if fmt == "snap":
        return line.split()
    delimiter = _delimiter(fmt, options)
    if fmt == "csv" and '"' in line and quoting_problem(line, delimiter) is None:
        return split_quoted(line, delimiter)
    return line.split(delimiter)


def _delimiter(fmt: str, options: ReaderOptions) -> str:
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


def prepare_options(
    fmt: str, head: Sequence[str], options: ReaderOptions | None = None
) -> ReaderOptions:
    """Fix the per-file layout from the first lines of a file, so all its chunks agree.

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
    if fmt not in ("csv", "tsv", "snap") or options.column_names is not None:
        return options
    prefixes = _comment_prefixes(fmt, options)
    lines = [_head_line(ln) for ln in head]
    data = [
        (i, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.strip().startswith(prefixes)
    ]
    if fmt == "snap":
        count = _common_field_count(fmt, [ln for _, ln in data], options)
        return replace(options, column_names=_positional_names(count, options), header=False)
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
        return replace(options, header=True, column_names=names)
    count = _common_field_count(fmt, [ln for _, ln in data], options)
    return replace(options, header=False, column_names=_positional_names(count, options))


def _common_field_count(fmt: str, lines: Sequence[str], options: ReaderOptions) -> int | None:
    """Most common field count of the lines that read as data (all lines when none do);
    the earliest wins a tie. ``None`` without lines."""
    if fmt == "csv":
        lines = [ln for ln in lines if quoting_problem(ln, _delimiter(fmt, options)) is None]
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
    if fmt == "csv" and quoting_problem(line, _delimiter(fmt, options)) is not None:
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
        specs.append(FieldSpec(i, name, column, _attribute_type(column, options)))
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
            raise ValueError(f"columns maps unknown schema field {core!r}")
        if isinstance(ref, int):
            if not 0 <= ref < len(names):
                raise ValueError(
                    f"column index {ref} for {core!r} outside the {len(names)} columns"
                )
            index[core] = ref
        elif ref in names:
            index[core] = list(names).index(ref)
        else:
            raise ValueError(f"column {ref!r} for {core!r} not among {list(names)}")
    missing = {"t", "src", "dst"} - set(index)
    if missing:
        raise ValueError(f"columns lacks {sorted(missing)}")
    return index


# ---------------------------------------------------------------------------------------
# Per-format line parsers
# ---------------------------------------------------------------------------------------


#: What a per-format parser returns: converted columns and the chunk rows they belong to.
_Parsed = tuple[dict[str, pa.Array], np.ndarray]


def _split_csv(text: pa.Array, delimiter: str, quoting: bool) -> pa.Array:
    """Split by ``delimiter``; lines with quotes (rare, checked by
    :func:`_reject_bad_quoting` before) go through :func:`split_quoted`."""
    lists = pc.split_pattern(text, delimiter)
    if not quoting:
        return lists
    quoted = np.flatnonzero(_bool_np(pc.match_substring(text, '"')))
    if len(quoted) == 0:
        return lists
    parsed = [split_quoted(text[int(r)].as_py(), delimiter) for r in quoted]
    extra = pa.array(parsed, lists.type)
    index = np.arange(len(text), dtype=np.int64)
    index[quoted] = len(text) + np.arange(len(quoted))
    return pa.concat_arrays([lists, extra]).take(pa.array(index))


def _quoting_pattern(delimiter: str) -> str:
    """RE2 pattern of a CSV line with well-formed quoting (RFC 4180 fields, one line)."""
    d = f"\\x{{{ord(delimiter):x}}}"
    field = f'(?:"(?:[^"]|"")*"|[^"{d}]*)'
    return f"^{field}(?:{d}{field})*$"


def quoting_problem(line: str, delimiter: str = ",") -> str | None:
    """What is wrong with the quoting of one CSV line, or ``None`` when it is well formed.

    A field is either quoted -- it starts with ``"``, ends with ``"`` right before the
    delimiter or the line end, and doubles its inner quotes -- or holds no ``"`` at all.
    A record is one physical line: a quoted field cannot span lines, so both halves of a
    field holding a newline are rejected (the first as unterminated, the second for its
    stray quote).

    >>> quoting_problem('1,2,"3')
    'field 3: unterminated quoted field'
    >>> quoting_problem('b",2,3')
    'field 1: stray quote in an unquoted field'
    """
    start, number = 0, 1
    while True:
        if line.startswith('"', start):
            end = _closing_quote(line, start + 1)
            if end < 0:
                return f"field {number}: unterminated quoted field"
            start = end + 1
            if start < len(line) and line[start] != delimiter:
                return f"field {number}: text after the closing quote"
        else:
            cut = line.find(delimiter, start)
            end = len(line) if cut < 0 else cut
            if '"' in line[start:end]:
                return f"field {number}: stray quote in an unquoted field"
            start = end
        if start >= len(line):
            return None
        start, number = start + 1, number + 1


def split_quoted(line: str, delimiter: str = ",") -> list[str]:
    """The fields of a CSV line whose quoting is well formed (:func:`quoting_problem` is
    ``None``): quotes removed, doubled quotes made single. Unlike :mod:`csv`, a ``\\r``
    is text wherever it stands.

    >>> split_quoted('a,"b, ""c"" d",,e,')
    ['a', 'b, "c" d', '', 'e', '']
    """
    fields: list[str] = []
    start = 0
    while True:
        if line.startswith('"', start):
            close = _closing_quote(line, start + 1)
            fields.append(line[start + 1 : close].replace('""', '"'))
            after = close + 1
        else:
            cut = line.find(delimiter, start)
            after = len(line) if cut < 0 else cut
            fields.append(line[start:after])
        if after >= len(line):
            return fields
        start = after + 1


def _closing_quote(line: str, start: int) -> int:
    """Index of the quote closing a field whose text starts at ``start`` (-1: none)."""
    while True:
        at = line.find('"', start)
        if at < 0 or not line.startswith('"', at + 1):
            return at
        start = at + 2


def _reject_bad_quoting(
    sub: pa.Array, rows: np.ndarray, delimiter: str, rejects: _Rejects
) -> tuple[np.ndarray, pa.Array]:
    """Reject CSV lines with malformed quoting (vectorized check, reasons per bad line)."""
    quoted = _bool_np(pc.match_substring(sub, '"'))
    if not quoted.any():
        return rows, sub
    ok = _bool_np(pc.match_substring_regex(sub, _quoting_pattern(delimiter)))
    bad = np.flatnonzero(quoted & ~ok)
    if len(bad) == 0:
        return rows, sub
    reasons = [quoting_problem(sub[int(i)].as_py(), delimiter) or "malformed quoting" for i in bad]
    rejects.add(rows[bad], reasons)
    keep = np.ones(len(rows), dtype=bool)
    keep[bad] = False
    return rows[keep], sub.filter(pa.array(keep))


def _parse_table_like(
    fmt: str,
    text: pa.Array,
    rows: np.ndarray,
    line_numbers: np.ndarray,
    options: ReaderOptions,
    rejects: _Rejects,
) -> _Parsed:
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
        rows, sub = _reject_bad_quoting(sub, rows, _delimiter(fmt, options), rejects)
    if fmt == "snap":
        lists = pc.ascii_split_whitespace(pc.ascii_trim_whitespace(sub))
    else:
        lists = _split_csv(sub, _delimiter(fmt, options), quoting=fmt == "csv")
    split = _split(lists)
    specs = table_layout(fmt, names, options)
    needed = max(s.position for s in specs if s.kind in ("t", "src", "dst", "dur")) + 1
    lo = needed if fmt == "snap" else len(names)
    keep = _check_counts(split, lo, max(len(names), lo), rows, rejects)
    rows, split = rows[keep], _subset(split, keep)
    columns = _convert(split, specs, options, rows, rejects)
    if "dur" not in columns:
        columns["dur"] = pa.array(np.zeros(len(rows), np.int64))
    return columns, rows


def _parse_vast(
    text: pa.Array, rows: np.ndarray, options: ReaderOptions, rejects: _Rejects
) -> _Parsed:
    sub = text.take(pa.array(rows))
    header = _bool_np(pc.match_substring_regex(sub, r"^(label,)?timeseconds,", ignore_case=True))
    rows, sub = rows[~header], sub.filter(pa.array(~header))
    split = _split(pc.split_pattern(sub, ","))
    keep = _check_counts(split, 19, 20, rows, rejects)
    rows, split = rows[keep], _subset(split, keep)
    split.shift = (split.counts == 20).astype(np.int64)
    specs = [
        FieldSpec(i, name, _vast_column(name, kind), kind)
        for i, (name, kind) in enumerate(VAST_FIELDS)
    ]
    specs.append(FieldSpec(-1, "Label", "Label", "int64"))
    # Seconds, whatever the options say: the format fixes the unit.
    columns = _convert(
        split, specs, replace(options, time_unit="s", time_format="number"), rows, rejects
    )
    return columns, rows


def _vast_column(name: str, kind: str) -> str:
    return kind if kind in ("t", "src", "dst", "dur") else name


_U32 = 2**32


def _parse_netflow5(
    text: pa.Array, rows: np.ndarray, options: ReaderOptions, rejects: _Rejects
) -> _Parsed:
    sub = text.take(pa.array(rows))
    header = _bool_np(pc.match_substring_regex(sub, r"^unix_?secs,", ignore_case=True))
    rows, sub = rows[~header], sub.filter(pa.array(~header))
    split = _split(pc.split_pattern(sub, ","))
    keep = _check_counts(split, 24, 24, rows, rejects)
    rows, split = rows[keep], _subset(split, keep)
    specs = [
        FieldSpec(i, name, _vast_column(name, kind), kind)
        for i, (name, kind) in enumerate(NETFLOW5_FIELDS)
    ]
    columns = _convert(split, specs, options, rows, rejects)
    _netflow5_times(columns, rows, rejects)
    return columns, rows


def _netflow5_times(columns: dict[str, pa.Array], rows: np.ndarray, rejects: _Rejects) -> None:
    """Absolute start and duration from the router clock fields (see module docstring)."""
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
        bad = np.flatnonzero((values < 0) | (values >= limit) | ~_bool_np(columns[name].is_valid()))
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


# ---------------------------------------------------------------------------------------
# JSON lines
# ---------------------------------------------------------------------------------------


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, default=str)


def _parse_jsonl(
    text: pa.Array, rows: np.ndarray, options: ReaderOptions, rejects: _Rejects
) -> _Parsed:
    """Per-line :func:`json.loads` (floats as Decimal for exact times)."""
    records: list[dict] = []
    kept: list[int] = []
    for row, line in zip(rows, text.take(pa.array(rows)).to_pylist(), strict=True):
        try:
            obj = json.loads(line, parse_float=Decimal)
        except ValueError as exc:
            rejects.add(np.array([row]), f"invalid JSON: {exc}")
            continue
        except RecursionError:
            rejects.add(np.array([row]), "invalid JSON: nested too deeply")
            continue
        why = _json_problem(obj) or _lone_surrogate(obj, line)
        if why:
            rejects.add(np.array([row]), why)
            continue
        records.append(obj)
        kept.append(int(row))
    rows = np.array(kept, dtype=np.int64)
    columns: dict[str, pa.Array] = {}
    for name in ("t", "dur"):
        texts = pa.array([_json_text(r.get(name, 0)) for r in records], pa.string())
        spec = FieldSpec(0, name, name, name)
        values, bad, reasons = _convert_one(texts, np.ones(len(records), bool), spec, options)
        rejects.add(rows[bad], [f"field {name}: {why}" for why in reasons])
        columns[name] = values
    for name in ("src", "dst"):
        columns[name] = pa.array([_json_text(r[name]) for r in records], pa.string())
    for name in options.attributes or _keys_in_order(records):
        columns[name] = _json_attribute(name, records, rows, options, rejects)
    return columns, rows


def _json_problem(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return f"not a JSON object: {type(obj).__name__}"
    for name in ("t", "src", "dst"):
        if name not in obj or obj[name] is None:
            return f"missing field {name}"
    for name in ("src", "dst"):
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, str | int):
            return f"field {name}: vertex id must be a string or integer"
        if value == "":
            return f"field {name}: empty vertex id"
    return None


def _lone_surrogate(obj: object, line: str) -> str | None:
    """A ``\\ud800``-style escape decodes to a lone surrogate, which is no character and
    cannot be written as UTF-8: such a line is rejected (a surrogate *pair* is fine)."""
    if "\\ud" not in line.lower():
        return None  # no escape that could produce one (literal surrogates are not UTF-8)
    stack = [obj]
    while stack:
        item = stack.pop()
        texts: list[str] = []
        if isinstance(item, dict):
            texts = [k for k in item if isinstance(k, str)]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            texts = [item]
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"invalid JSON string: lone surrogate \\u{ord(text[exc.start]):04x}"
    return None


def _keys_in_order(records: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        for key in r:
            if key not in ("t", "src", "dst", "dur", "seq"):
                seen.setdefault(key, None)
    return list(seen)


def _json_attribute(
    name: str, records: list[dict], rows: np.ndarray, options: ReaderOptions, rejects: _Rejects
) -> pa.Array:
    kind = _attribute_type(name, options)
    raw = [r.get(name) for r in records]
    if kind == "string":
        return pa.array([None if v is None else _json_text(v) for v in raw], pa.string())
    texts = pa.array(
        [None if v is None or isinstance(v, bool) else _json_text(v) for v in raw], pa.string()
    )
    values, bad, reasons = _convert_number(texts, kind)
    rejects.add(rows[bad], [f"field {name}: {why}" for why in reasons])
    return values


# ---------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------


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
        attrs = [pa.field(n, _ARROW_TYPES[k]) for n, k in VAST_ATTRIBUTES]
    elif fmt == "netflow5":
        attrs = [
            pa.field(n, _ARROW_TYPES[k]) for n, k in NETFLOW5_FIELDS if k not in ("src", "dst")
        ]
    elif fmt in ("csv", "tsv", "snap") and options.column_names is not None:
        specs = table_layout(fmt, options.column_names, options)
        attrs = [pa.field(s.column, _ARROW_TYPES[s.kind]) for s in specs if s.kind in _ARROW_TYPES]
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
    rejects = _Rejects(len(lines))
    text = _drop_carriage_return(_decode(lines, options.max_line_bytes, rejects))
    skip = _skippable(text, fmt, options, rejects)
    rows = np.flatnonzero(~skip & ~rejects.mask())
    columns, rows = _parse_rows(fmt, text, rows, line_numbers, options, rejects)
    good = ~np.isin(rows, np.fromiter(rejects.reasons, dtype=np.int64, count=len(rejects.reasons)))
    edges = _assemble(columns, good, line_numbers[rows[good]])
    return edges, rejects.table(text, line_numbers)


def _parse_rows(
    fmt: str,
    text: pa.Array,
    rows: np.ndarray,
    line_numbers: np.ndarray,
    options: ReaderOptions,
    rejects: _Rejects,
) -> _Parsed:
    if fmt in ("csv", "tsv", "snap"):
        return _parse_table_like(fmt, text, rows, line_numbers, options, rejects)
    if fmt == "vast":
        return _parse_vast(text, rows, options, rejects)
    if fmt == "netflow5":
        return _parse_netflow5(text, rows, options, rejects)
    return _parse_jsonl(text, rows, options, rejects)


def _assemble(columns: dict[str, pa.Array], good: np.ndarray, seq: np.ndarray) -> pa.Table:
    """Core columns first (schema order), then attributes in layout order, good rows only."""
    mask = pa.array(good)
    names = ["t", "src", "dst", "dur"]
    arrays = [columns[n].filter(mask) for n in names]
    arrays[1] = arrays[1].cast(pa.string())
    arrays[2] = arrays[2].cast(pa.string())
    names.append("seq")
    arrays.append(pa.array(seq, pa.int64()))
    for name, values in columns.items():
        if name not in ("t", "src", "dst", "dur"):
            names.append(name)
            arrays.append(values.filter(mask))
    return pa.table(arrays, names=names)


# ---------------------------------------------------------------------------------------
# Column-based input (Parquet and other Arrow tables)
# ---------------------------------------------------------------------------------------


def _find_column(table: pa.Table, core: str, options: ReaderOptions) -> str | None:
    mapping = options.columns or {}
    if core in mapping:
        ref = mapping[core]
        if isinstance(ref, int) and not 0 <= ref < table.num_columns:
            raise SchemaError(f"column index {ref} for {core!r} outside the {table.num_columns}")
        name = table.column_names[ref] if isinstance(ref, int) else ref
        if name not in table.column_names:
            raise SchemaError(f"column {name!r} for {core!r} not in {table.column_names}")
        return name
    if core in table.column_names:
        return core
    for aliases in FORMAT_FIELD_ALIASES.values():
        for native, target in aliases.items():
            if target == core and native in table.column_names:
                return native
    return None


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
        values, errors = _ticks_to_us(column.cast(pa.int64()), _unit_digits(unit))
    elif pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        values, errors = decimal_to_us(column.cast(pa.string()), unit)
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
        values, errors = time_to_us(column, replace(options, time_unit=unit))
    else:
        raise SchemaError(f"cannot read a time from a column of type {typ}; {TIME_TYPES}")
    for row in np.flatnonzero(~_bool_np(column.is_valid())):
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
    rejects = _Rejects(n)
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
        bad = np.flatnonzero(~_bool_np(pc.fill_null(pc.not_equal(values, ""), False)))
        rejects.add(bad, f"{label}: missing or empty vertex id")
        columns[core] = pc.fill_null(values, "")
    seq = _table_seq(table, n, row_offset)
    used = {v for v in names.values() if v is not None} | {"seq"}
    for name in table.column_names:
        if name not in used:
            columns[name] = table.column(name).combine_chunks()
    row_numbers = np.arange(1, n + 1, dtype=np.int64) + row_offset
    good = ~rejects.mask()
    edges = _assemble(columns, good, seq[good])
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


def _vertex_strings(column: pa.ChunkedArray | pa.Array, label: str, rejects: _Rejects) -> pa.Array:
    """A vertex column as strings; binary values that are not UTF-8 become rejects."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        local = _Rejects(len(column))
        column = _decode(column, MAX_ABS_US, local)
        for row, why in local.reasons.items():
            rejects.add(np.array([row]), f"{label}: {why}")
    return _strings(column.cast(pa.string()))


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


__all__ = [
    "FORMATS",
    "FORMAT_FIELD_ALIASES",
    "LINE_FORMATS",
    "NETFLOW5_FIELDS",
    "REJECT_SCHEMA",
    "VAST_ATTRIBUTES",
    "VAST_FIELDS",
    "FieldSpec",
    "InputError",
    "ReaderOptions",
    "SchemaError",
    "column_to_us",
    "decimal_to_us",
    "edge_schema",
    "empty_rejects",
    "format_seconds_array",
    "iso_to_us",
    "parse_lines",
    "parse_table",
    "prepare_options",
    "resolve_field",
    "scalar_to_us",
    "split_quoted",
    "quoting_problem",
    "table_layout",
    "time_to_us",
    "too_long_reason",
]
