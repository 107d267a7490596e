"""The one edge schema every stream is read into, the Match record, and exact time.

Every reader produces an Arrow table with this schema; nothing downstream knows where the
data came from.

=============  ========  ======================================================
column         type      meaning
=============  ========  ======================================================
``t``          int64     start time of the edge, integer **microseconds**
``src``        string    source vertex
``dst``        string    destination vertex
``dur``        int64     duration in microseconds (0 when the source has none)
``seq``        int64     arrival order (readers use the 1-based line number, plus
                         ``file_index << 40`` for multi-file reads); breaks ties
                         between equal ``t`` so stream order is total
``label``      string    optional edge label
``src_label``  string    optional label of the source vertex (DDST patterns)
``dst_label``  string    optional label of the destination vertex
...            any       free attribute columns (netflow fields, message type, ...)
=============  ========  ======================================================

Why integers: with float seconds, ``t3 - t1 <= 10`` at a window boundary depends on
rounding (``0.2 + 0.001 * 9800`` is not exactly ``10.0``), and two correct engines
disagree. Readers convert seconds or dates exactly (through :class:`decimal.Decimal`);
outputs show seconds again.

*Stream order* is ``(t, seq)``: an edge is "after" another when its start time is later,
or equal with a later arrival.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.hashing import GOLDEN_GAMMA, mix64, salt64

US_PER_SECOND = 1_000_000

#: Columns every edge table has, in this order.
CORE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("t", pa.int64(), nullable=False),
    pa.field("src", pa.string(), nullable=False),
    pa.field("dst", pa.string(), nullable=False),
    pa.field("dur", pa.int64(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
)
CORE_NAMES: tuple[str, ...] = tuple(f.name for f in CORE_FIELDS)
EDGE_SCHEMA = pa.schema(list(CORE_FIELDS))


class TimeFormatError(ValueError):
    """A time value that cannot be read exactly."""


def seconds_to_us(value: str | int | float | Decimal) -> int:
    """Convert seconds to integer microseconds, exactly, rounding half-even.

    Strings are parsed as decimals, so ``"9.8399999999998347"`` becomes ``9839999``
    microseconds... rounded to the nearest microsecond: ``9_840_000``. Floats are taken
    through their shortest ``repr`` so ``0.1`` means one tenth, not the binary fraction.

    >>> seconds_to_us("0.2")
    200000
    >>> seconds_to_us(1082040961)
    1082040961000000
    >>> seconds_to_us("nan")
    Traceback (most recent call last):
    ...
    graphcep.events.TimeFormatError: time is not a finite number: 'nan'
    """
    if isinstance(value, bool):
        raise TimeFormatError(f"time is not a number: {value!r}")
    if isinstance(value, int):
        return value * US_PER_SECOND
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TimeFormatError(f"time is not a finite number: {value!r}")
        value = repr(value)
    try:
        dec = Decimal(str(value).strip())
    except InvalidOperation:
        raise TimeFormatError(f"time is not a number: {value!r}") from None
    if not dec.is_finite():
        raise TimeFormatError(f"time is not a finite number: {value!r}")
    if dec != 0 and dec.adjusted() > 15:
        raise TimeFormatError(f"time out of range: {value!r}")
    result = round(Fraction(dec) * US_PER_SECOND)  # exact; ties to even
    if abs(result) >= 2**62:
        raise TimeFormatError(f"time out of range: {value!r}")
    return result


def seconds_to_fraction_us(value: str | int | Decimal) -> Fraction:
    """Convert a constant in seconds to an exact number of microseconds (may be fractional).

    Used for query constants: ``t3 - t1 <= 10`` compares against exactly 10_000_000 us.
    """
    try:
        dec = Decimal(str(value).strip())
    except InvalidOperation:
        raise TimeFormatError(f"not a number: {value!r}") from None
    if not dec.is_finite():
        raise TimeFormatError(f"not a finite number: {value!r}")
    return Fraction(dec) * US_PER_SECOND


def us_to_seconds(us: int) -> float:
    """Microseconds to float seconds, for display only."""
    return us / US_PER_SECOND


def format_seconds(us: int) -> str:
    """Microseconds as an exact decimal string of seconds, trailing zeros trimmed.

    >>> format_seconds(9_840_000)
    '9.84'
    >>> format_seconds(-1)
    '-0.000001'
    """
    sign = "-" if us < 0 else ""
    whole, frac = divmod(abs(us), US_PER_SECOND)
    if frac == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{frac:06d}".rstrip("0")


def format_iso(us: int) -> str:
    """Microseconds since the Unix epoch as an ISO-8601 date-time in UTC, the fraction
    exact with trailing zeros trimmed (:func:`format_seconds` for a time outside the
    years 1 to 9999, which ISO dates do not hold).

    >>> format_iso(1_082_040_961_250_000), format_iso(0), format_iso(-1)
    ('2004-04-15T14:56:01.25Z', '1970-01-01T00:00:00Z', '1969-12-31T23:59:59.999999Z')
    """
    whole, frac = divmod(us, US_PER_SECOND)
    try:
        stamp = _EPOCH + datetime.timedelta(seconds=whole)
    except OverflowError:
        return f"{format_seconds(us)}s"
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if stamp.year < 1000:  # strftime does not pad every platform's years
        text = f"{stamp.year:04d}" + text[text.index("-"):]
    return (f"{text}.{frac:06d}".rstrip("0") if frac else text) + "Z"


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def counted_noun(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` (with thousands separators) and ``noun``, plural unless ``count`` is 1.

    >>> counted_noun(1, "match", "matches"), counted_noun(2_500, "edge")
    ('1 match', '2,500 edges')
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def empty_edges(extra: pa.Schema | None = None) -> pa.Table:
    """An empty edge table with the core columns (and ``extra`` ones)."""
    schema = EDGE_SCHEMA if extra is None else pa.unify_schemas([EDGE_SCHEMA, extra])
    return schema.empty_table()


def normalize_edges(table: pa.Table) -> pa.Table:
    """Cast and reorder a table to the edge schema: core columns first, then the rest.

    Missing ``dur`` becomes 0 and missing ``seq`` becomes the 1-based row number, as the
    readers number rows (the line number of a headerless file, a Parquet file's row): the
    same edges then have the same ``seq``, hence the same ``match_id``, whether a file was
    read or a table built in memory.
    """
    if _normalized(table):  # an engine's pushes mostly get what a reader normalized
        return table
    n = table.num_rows
    if "dur" not in table.column_names:
        table = table.append_column("dur", pa.array(np.zeros(n, np.int64)))
    if "seq" not in table.column_names:
        # from NumPy: a range would make pyarrow import pandas (a quarter second per run)
        table = table.append_column("seq", pa.array(np.arange(1, n + 1, dtype=np.int64)))
    for name in ("t", "src", "dst"):
        if name not in table.column_names:
            raise ValueError(f"edge table lacks the required column {name!r}")
    columns = []
    names = []
    for f in CORE_FIELDS:
        column = table.column(f.name)
        if column.null_count:  # a null time or id would be cast to a wrong value, silently
            first = pc.index(pc.is_null(column), True).as_py()
            raise ValueError(f"edge table has {column.null_count:,} null(s) in the required "
                             f"column {f.name!r} (the first at row {first}); every edge needs "
                             f"a time, both vertices, a duration and a sequence number")
        columns.append(column if _core_type(f, column.type) else column.cast(f.type))
        names.append(f.name)
    for name in table.column_names:
        if name not in CORE_NAMES:
            columns.append(table.column(name))
            names.append(name)
    return pa.table(columns, names=names)


def _normalized(table: pa.Table) -> bool:
    """Whether ``table`` already starts with the core columns, of their types, in order,
    without a null: what :func:`normalize_edges` would return is the table itself."""
    schema = table.schema
    if len(schema) < len(CORE_FIELDS):
        return False
    return all(schema.field(i).name == f.name and _core_type(f, schema.field(i).type)
               and table.column(i).null_count == 0 for i, f in enumerate(CORE_FIELDS))


#: Vertex names dictionary-encoded: engines number a batch's distinct names, not each
#: row's (a rules engine encodes a batch once for all its rules).
VERTEX_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def encoded_vertices(table: pa.Table) -> pa.Table:
    """``table`` with ``src`` and ``dst`` dictionary-encoded by one dictionary
    (:data:`VERTEX_DICTIONARY`, the names by first appearance, ``src`` before ``dst``):
    hashed once, for every engine that reads the table.

    >>> encoded = encoded_vertices(pa.table({"src": ["a", "b"], "dst": ["b", "c"]}))
    >>> encoded.column("dst").chunk(0).indices.to_pylist()
    [1, 2]
    >>> decoded_vertices(encoded).column("dst").to_pylist()
    ['b', 'c']
    """
    names = table.schema.names
    if not table.num_rows or table.schema.field("src").type != pa.string() or \
            table.schema.field("dst").type != pa.string():
        return table
    src, dst = (table.column(end).combine_chunks() for end in ("src", "dst"))
    both = pc.dictionary_encode(pa.concat_arrays([src, dst]))
    codes, rows = both.indices, len(src)
    return (table.set_column(names.index("src"), "src", pa.DictionaryArray.from_arrays(
        codes.slice(0, rows), both.dictionary))
        .set_column(names.index("dst"), "dst", pa.DictionaryArray.from_arrays(
            codes.slice(rows), both.dictionary)))


def decoded_vertices(table: pa.Table) -> pa.Table:
    """``table`` with its columns of :data:`VERTEX_DICTIONARY` (vertex names, or values
    taken from them) as plain strings: what an output holds."""
    for at, column in enumerate(table.schema):
        if column.type == VERTEX_DICTIONARY:
            table = table.set_column(at, column.name, table.column(at).cast(pa.string()))
    return table


def _core_type(core: pa.Field, typ: pa.DataType) -> bool:
    """Whether ``typ`` is one the core field ``core`` is kept in: its own, or for the
    vertex fields :data:`VERTEX_DICTIONARY`."""
    return typ == core.type or (core.name in ("src", "dst") and typ == VERTEX_DICTIONARY)


def concat_edges(tables: list[pa.Table]) -> pa.Table:
    """Join edge tables whose attribute columns differ (files of several formats).

    A column one table lacks is null there; numeric types widen as Arrow's permissive
    promotion does; an attribute whose types cannot be reconciled (a VAST file's integer
    ``IpLayerProtocol`` and a JSON file's string one) becomes text in every table, so no
    value is lost.

    Examples
    --------
    >>> a = pa.table({"t": [1], "port": pa.array([80], pa.int64())})
    >>> b = pa.table({"t": [2], "port": ["http"], "x": [1.5]})
    >>> concat_edges([a, b]).to_pylist()
    [{'t': 1, 'port': '80', 'x': None}, {'t': 2, 'port': 'http', 'x': 1.5}]
    """
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        pass
    types: dict[str, set[pa.DataType]] = {}
    for table in tables:
        for f in table.schema:
            types.setdefault(f.name, set()).add(f.type)
    clash = {name for name, kinds in types.items() if len(kinds) > 1 and name not in CORE_NAMES}
    texts = [pa.Table.from_arrays(
        [c.cast(pa.string()) if n in clash else c
         for n, c in zip(table.column_names, table.columns, strict=True)],
        names=table.column_names) for table in tables]
    return pa.concat_tables(texts, promote_options="permissive")


def sort_stream(table: pa.Table) -> pa.Table:
    """Sort edges into stream order ``(t, seq)`` (returned as is when already in order:
    most streams arrive sorted, and checking is far cheaper than sorting)."""
    if table.num_rows == 0 or in_stream_order(table):
        return table
    return table.sort_by([("t", "ascending"), ("seq", "ascending")])


def in_stream_order(table: pa.Table) -> bool:
    """Whether rows are already in stream order ``(t, seq)`` (``seq`` unique per stream)."""
    t = table.column("t").to_numpy()
    dt = np.diff(t)
    if np.any(dt < 0):
        return False
    ties = np.flatnonzero(dt == 0)
    if len(ties) == 0:
        return True
    seq = table.column("seq").to_numpy()
    return bool(np.all(seq[ties + 1] > seq[ties]))


@dataclass(frozen=True)
class MatchedEdge:
    """One stream edge inside a match."""

    var: str  #: the query edge variable it binds (``e1``)
    t: int  #: start time, microseconds
    src: str
    dst: str
    dur: int = 0
    seq: int = 0
    attrs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "var": self.var,
            "t": format_seconds(self.t),
            "src": self.src,
            "dst": self.dst,
            "dur": format_seconds(self.dur),
            "seq": self.seq,
        }
        out.update(self.attrs)
        return out


@dataclass(frozen=True)
class Match:
    """A match record: what matched, with which stream edges, and when.

    ``match_id`` is deterministic: a hash of the query name and the matched edges'
    arrival sequence numbers in query-edge order (:func:`match_ids`), so the same match
    found by any runtime, shard or restart has the same id (sinks can be idempotent).
    """

    query: str
    bindings: tuple[tuple[str, str], ...]  #: (query vertex, stream vertex), sorted by name
    edges: tuple[MatchedEdge, ...]  #: in query-edge order
    first_t: int
    last_t: int
    match_id: str = ""

    def __post_init__(self) -> None:
        if not self.match_id:
            object.__setattr__(self, "match_id", make_match_id(self.query, self.edges))

    @property
    def key(self) -> tuple:
        """Identity of the match for set comparisons: query and edge seqs in order."""
        return (self.query, tuple(e.seq for e in self.edges))

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "match_id": self.match_id,
            "first_t": format_seconds(self.first_t),
            "last_t": format_seconds(self.last_t),
            "bindings": dict(self.bindings),
            "edges": [e.to_dict() for e in self.edges],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)



def match_ids(query: str, seqs: np.ndarray) -> np.ndarray:
    """Deterministic ids for matches given their edges' ``seq`` values (rows, query order).

    A 64-bit splitmix-style hash of the query name and the edges' arrival sequence numbers,
    as 16 hex digits: the same match found by any runtime, shard or restart has the same id.
    """
    seqs = np.asarray(seqs, dtype=np.int64)
    if seqs.ndim == 1:
        seqs = seqs.reshape(1, -1)
    salts = np.full(seqs.shape[0], salt64(query), dtype=np.uint64)
    return ragged_match_ids(salts, seqs, np.full(seqs.shape[0], seqs.shape[1]))


def ragged_match_ids(salts: np.ndarray, seqs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`match_ids` for matches of several queries and sizes at once: row ``i`` is
    the id of the match of the query salted ``salts[i]`` (``salt64`` of its name) whose
    edges are ``seqs[i, :lengths[i]]`` (the rest of the row is ignored).

    >>> seqs = np.array([[4, 7], [4, 0]])
    >>> ragged_match_ids(np.array([salt64("q"), salt64("r")]), seqs, np.array([2, 1])
    ...                  ).tolist() == [match_ids("q", [4, 7])[0], match_ids("r", [4])[0]]
    True
    """
    with np.errstate(over="ignore"):
        h = np.asarray(salts, dtype=np.uint64).copy()
        for col in range(seqs.shape[1]):
            mixed = mix64(h ^ (seqs[:, col].astype(np.uint64) + GOLDEN_GAMMA))
            h = np.where(lengths > col, mixed, h)
    return _hex16(h)


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)


def _hex16(h: np.ndarray) -> np.ndarray:
    """Each uint64 as 16 lower-case hex digits (``"%016x"``), vectorized.

    >>> _hex16(np.array([0, 255, 2**64 - 1], dtype=np.uint64)).tolist()
    ['0000000000000000', '00000000000000ff', 'ffffffffffffffff']
    """
    nibbles = (h[:, None] >> _NIBBLE_SHIFTS[None, :]) & np.uint64(15)
    text = np.ascontiguousarray(_HEX_DIGITS[nibbles.astype(np.intp)])
    return text.view("S16").ravel().astype("<U16")



def make_match_id(query: str, edges: tuple[MatchedEdge, ...]) -> str:
    return str(match_ids(query, np.array([[e.seq for e in edges]], dtype=np.int64))[0])


#: Columnar form of matches (what sinks write and runtimes exchange).
MATCHED_EDGE_TYPE = pa.struct(
    [
        pa.field("var", pa.string()),
        pa.field("t", pa.int64()),
        pa.field("src", pa.string()),
        pa.field("dst", pa.string()),
        pa.field("dur", pa.int64()),
        pa.field("seq", pa.int64()),
    ]
)
MATCH_SCHEMA = pa.schema(
    [
        pa.field("query", pa.string()),
        pa.field("match_id", pa.string()),
        pa.field("first_t", pa.int64()),
        pa.field("last_t", pa.int64()),
        pa.field("bindings", pa.map_(pa.string(), pa.string())),
        pa.field("edges", pa.list_(MATCHED_EDGE_TYPE)),
    ]
)
@functools.cache
def empty_matches() -> pa.Table:
    """An empty match table, built on first use. Arrow tables are immutable, so this one
    serves every push that finds nothing: building one from the schema costs about 0.1 ms
    (nested types), a cost a stream of small pushes (or widening's many small windows)
    would pay on each. Not built at import: pyarrow's first table probes for pandas,
    which the ``graphcep`` command defers (:mod:`graphcep.lazy_pandas`)."""
    return MATCH_SCHEMA.empty_table()


def matches_to_table(matches: list[Match]) -> pa.Table:
    """Matches as an Arrow table with :data:`MATCH_SCHEMA` (attributes are dropped)."""
    rows = {
        "query": [m.query for m in matches],
        "match_id": [m.match_id for m in matches],
        "first_t": [m.first_t for m in matches],
        "last_t": [m.last_t for m in matches],
        "bindings": [list(m.bindings) for m in matches],
        "edges": [
            [
                {"var": e.var, "t": e.t, "src": e.src, "dst": e.dst, "dur": e.dur, "seq": e.seq}
                for e in m.edges
            ]
            for m in matches
        ],
    }
    return pa.table(rows, schema=MATCH_SCHEMA)


def table_to_matches(table: pa.Table) -> list[Match]:
    """Inverse of :func:`matches_to_table`."""
    out = []
    for row in table.to_pylist():
        edges = tuple(
            MatchedEdge(e["var"], e["t"], e["src"], e["dst"], e["dur"], e["seq"])
            for e in row["edges"]
        )
        out.append(
            Match(
                query=row["query"],
                bindings=tuple(sorted(row["bindings"])),
                edges=edges,
                first_t=row["first_t"],
                last_t=row["last_t"],
                match_id=row["match_id"],
            )
        )
    return out


def max_duration_of(edges: pa.Table) -> int:
    """The longest edge duration (µs) in ``edges``; 0 without a ``dur`` column or edges."""
    if edges.num_rows == 0 or "dur" not in edges.column_names:
        return 0
    return int(pc.max(edges.column("dur")).as_py() or 0)
