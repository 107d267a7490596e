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
    named ``t``/``src``/``dst``/``dur`` are used; a header of other names is read by the
    names :data:`~graphcep.io.formats.options.HEADER_SYNONYMS` knows (``time,from,to``;
    an :class:`~graphcep.io.formats.schema.InputNote` says so) or refused; without a
    header, positions 0, 1, 2 are ``src``, ``dst``, ``t`` as in SNAP files. Numeric times
    read without ``options.time_unit`` are checked against seconds on the file's first
    lines (:func:`~graphcep.io.formats.times.implausible_time_unit`). Every line must have as many fields as the header,
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
    leading ``Label`` (the SAM project's CTU-13 converter). ``t`` = TimeSeconds (seconds,
    or ``options.time_unit``; without one, checked on the first lines as ``csv`` times are),
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

Modules
-------
One per part of the reader, each importing only modules listed above it:

* :mod:`~graphcep.io.formats.schema` -- format names, field tables, errors, ReaderOptions
* :mod:`~graphcep.io.formats.times` -- exact time conversion, vectorized
* :mod:`~graphcep.io.formats.reject_table` -- reject bookkeeping
* :mod:`~graphcep.io.formats.decoding` -- decoding and line classification
* :mod:`~graphcep.io.formats.fields` -- field layouts and the conversion of split lines
* :mod:`~graphcep.io.formats.quoting` -- CSV quoting
* :mod:`~graphcep.io.formats.options` -- options resolution (header, column layout)
* :mod:`~graphcep.io.formats.line_parsers` -- per-format line parsers
* :mod:`~graphcep.io.formats.jsonl` -- JSON lines
* :mod:`~graphcep.io.formats.parse` -- the entry point, :func:`parse_lines`
* :mod:`~graphcep.io.formats.columns` -- column-based input (Parquet), :func:`parse_table`
"""

from graphcep.io.formats.columns import (
    TIME_TYPES,
    VERTEX_TYPES,
    check_core_columns,
    column_to_us,
    core_columns,
    parse_table,
)
from graphcep.io.formats.decoding import too_long_reason
from graphcep.io.formats.fields import FieldSpec
from graphcep.io.formats.options import check_columns_format, prepare_options, table_layout
from graphcep.io.formats.parse import edge_schema, parse_lines
from graphcep.io.formats.quoting import quoting_problem, split_quoted
from graphcep.io.formats.reject_table import empty_rejects
from graphcep.io.formats.schema import (
    FLOW_JSON_FORMATS,
    FORMAT_FIELD_ALIASES,
    FORMATS,
    LINE_FORMATS,
    MAX_ABS_US,
    NETFLOW5_FIELDS,
    RECORD_FORMATS,
    REJECT_SCHEMA,
    REJECT_TEXT_CHARS,
    VAST_ATTRIBUTES,
    VAST_FIELDS,
    InputError,
    ReaderOptions,
    SchemaError,
    resolve_field,
)
from graphcep.io.formats.times import (
    decimal_to_us,
    format_seconds_array,
    iso_to_us,
    scalar_to_us,
    time_to_us,
)

__all__ = [
    "FLOW_JSON_FORMATS",
    "FORMATS",
    "FORMAT_FIELD_ALIASES",
    "LINE_FORMATS",
    "MAX_ABS_US",
    "NETFLOW5_FIELDS",
    "RECORD_FORMATS",
    "REJECT_SCHEMA",
    "REJECT_TEXT_CHARS",
    "TIME_TYPES",
    "VAST_ATTRIBUTES",
    "VAST_FIELDS",
    "VERTEX_TYPES",
    "FieldSpec",
    "InputError",
    "ReaderOptions",
    "SchemaError",
    "check_core_columns",
    "column_to_us",
    "core_columns",
    "decimal_to_us",
    "edge_schema",
    "empty_rejects",
    "format_seconds_array",
    "iso_to_us",
    "parse_lines",
    "parse_table",
    "check_columns_format",
    "prepare_options",
    "resolve_field",
    "scalar_to_us",
    "split_quoted",
    "quoting_problem",
    "table_layout",
    "time_to_us",
    "too_long_reason",
]
