"""The formats and their tables: format names, reject schema, VAST and NetFlow v5 field
layouts, format-native field aliases, the input errors and :class:`ReaderOptions`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

#: Flow collectors' JSON lines (:mod:`graphcep.io.formats.flow_json`).
FLOW_JSON_FORMATS: tuple[str, ...] = ("goflow2-json", "zeek-conn", "pmacct")
#: Formats :func:`parse_lines` reads.
LINE_FORMATS: tuple[str, ...] = ("snap", "csv", "tsv", "vast", "netflow5", "jsonl",
                                 *FLOW_JSON_FORMATS)
#: Binary record formats: goflow2's protobuf (:mod:`graphcep.io.formats.flow_pb`), read
#: from files and Kafka values, not lines.
RECORD_FORMATS: tuple[str, ...] = ("goflow2-pb",)
#: Every format, including the column-based one.
FORMATS: tuple[str, ...] = (*LINE_FORMATS, "parquet", *RECORD_FORMATS)

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

UNIT_DIGITS = {"s": 6, "ms": 3, "us": 0}
ATTRIBUTE_TYPES = {
    "string": "string",
    "str": "string",
    "int64": "int64",
    "int": "int64",
    "float64": "float64",
    "float": "float64",
}
ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}


class InputError(ValueError):
    """Input that cannot be read at all: nothing readable in any file, or a file whose
    columns cannot hold edges. The message names the file; the command line reports it in
    one line (exit status 2)."""


class InputNote(UserWarning):
    """A reading decision worth a line to the user (a header read through synonyms, files
    of a directory left out): the readers issue it with :func:`warnings.warn`, the command
    line prints it on stderr as ``graphcep: note: ...``."""


class SchemaError(InputError):
    """A column-based file (Parquet) whose columns cannot hold edges: a core column is
    missing or has a type no edge field can be read from."""


def placed_index(core: str, ref: str | int, names: Sequence[str]) -> int:
    """The index, among a file's column ``names``, of the column ``ref`` (a name, or a
    0-based position) that ``options.columns`` (``--columns``) gives the edge field
    ``core``; a :class:`SchemaError` naming the file's columns when it has no such one.

    >>> placed_index("t", "when", ["src", "dst", "when"]), placed_index("t", 0, ["a"])
    (2, 0)
    """
    if isinstance(ref, int):
        if 0 <= ref < len(names):
            return ref
        raise SchemaError(f"no column {ref} for {core} (--columns): the file has "
                          f"{len(names)} columns, numbered from 0")
    if ref in names:
        return list(names).index(ref)
    raise SchemaError(f"no column {ref!r} for {core} (--columns): the file's columns are "
                      f"{', '.join(map(repr, names))}")


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
    # the collectors' names of the flow's addresses (and Zeek's of its ports)
    "goflow2-pb": {"src_addr": "src", "dst_addr": "dst"},
    "goflow2-json": {"src_addr": "src", "dst_addr": "dst"},
    "zeek-conn": {"id.orig_h": "src", "id.resp_h": "dst", "id.orig_p": "orig_p",
                  "id.resp_p": "resp_p"},
    "pmacct": {"ip_src": "src", "ip_dst": "dst"},
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
        ``graphcep.time_unit`` metadata is honoured. A unit assumed (``None``, no
        metadata) is checked against the times read, which are refused when they read as
        epoch times in another unit only
        (:func:`~graphcep.io.formats.times.implausible_time_unit`).
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
