"""Flow collectors' JSON lines: ``goflow2-json``, ``zeek-conn`` and ``pmacct``.

Each line is one flow as the collector writes it; :data:`LAYOUTS` says which keys give
``src``, ``dst``, ``t`` and ``dur`` and which are kept as attributes (under the names in
the table, typed; absent keys are null). A whole chunk is parsed by Arrow's JSON reader
in one call: no Python call per line. Lines it cannot read make the call fail; the chunk
is then halved until each bad line stands alone, and that line is a reject with the
reason :func:`json.loads` gives (so one bad line costs a few parses of its neighbours).

``goflow2-json``
    goflow2's ``-format json`` (v2 names): ``src_addr``, ``dst_addr``,
    ``time_flow_start_ns``, ``time_flow_end_ns`` (``dur`` is their difference); goflow2 v1's
    ``time_flow_start_ms``/``time_flow_start`` (and the ``_end`` ones) when the ns ones are
    absent. ``proto`` and ``etype`` are the names goflow2 renders (``TCP``, ``IPv4``).
``zeek-conn``
    Zeek's ``conn.log`` as JSON (``LogAscii::use_json``), one object per line, or tagged
    as the Kafka writer does (``{"conn": {...}}``): ``id.orig_h`` and ``id.resp_h`` are
    ``src`` and ``dst``, ``ts`` the start (Zeek's default, seconds as a number with six
    decimals; an integer is ``JSON::TS_MILLIS`` milliseconds; a string ISO-8601,
    ``JSON::TS_ISO8601``), ``duration`` seconds (absent for a connection with no reply:
    0). ``id.orig_p`` and ``id.resp_p`` become ``orig_p`` and ``resp_p``. The keys with
    ``_`` for ``.`` (``id_orig_h``: Zeek's ``Log::default_scope_sep`` changed, as some
    shippers do) are read as well.
``pmacct``
    nfacctd/pmacct's JSON (``print_output: json``, Kafka plugin alike): ``ip_src``,
    ``ip_dst``, ``timestamp_start`` and ``timestamp_end``: text ``2024-01-31 12:00:00.123456``
    (read as UTC when it names no zone: set ``timestamps_utc: true`` in pmacct, or
    ``timestamps_rfc3339``, which writes the zone), or seconds since the epoch
    (``timestamps_since_epoch: true``), as a number or text.

A number read as a float (Zeek's ``ts``) is taken through its shortest decimal text,
which is the text Zeek wrote for six decimals below 2**33 s (year 2242): exact.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from graphcep.io.formats.fields import convert_number
from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import ReaderOptions
from graphcep.io.formats.times import bool_np, decimal_to_us, short, time_to_us

#: What a per-format parser returns (as :data:`~graphcep.io.formats.line_parsers.Parsed`).
Parsed = tuple[dict[str, pa.Array], np.ndarray]


@dataclass(frozen=True)
class FlowJsonLayout:
    """Where a collector's JSON puts a flow's fields.

    ``starts``/``ends`` are (key, unit of an integer) tried in order; a float or a number
    as text is in ``float_unit`` (None: the integer's unit). ``attributes`` are (key or
    keys tried in order, column, ``int64`` or ``string``)."""

    src: tuple[str, ...]
    dst: tuple[str, ...]
    starts: tuple[tuple[str, str], ...]
    ends: tuple[tuple[str, str], ...] = ()
    duration: str | None = None
    attributes: tuple[tuple[str | tuple[str, ...], str, str], ...] = ()
    nested: str | None = None
    float_unit: str | None = None


_GOFLOW2_INTS = ("src_port", "dst_port", "bytes", "packets", "tcp_flags", "in_if", "out_if",
                 "src_as", "dst_as", "ip_tos", "sampling_rate", "sequence_num",
                 "time_received_ns")
LAYOUTS: dict[str, FlowJsonLayout] = {
    "goflow2-json": FlowJsonLayout(
        src=("src_addr",), dst=("dst_addr",),
        starts=(("time_flow_start_ns", "ns"), ("time_flow_start_ms", "ms"),
                ("time_flow_start", "s")),
        ends=(("time_flow_end_ns", "ns"), ("time_flow_end_ms", "ms"), ("time_flow_end", "s")),
        attributes=(("proto", "proto", "string"), *((k, k, "int64") for k in _GOFLOW2_INTS),
                    ("etype", "etype", "string"), ("type", "type", "string"),
                    ("sampler_address", "sampler_address", "string"))),
    "zeek-conn": FlowJsonLayout(
        src=("id.orig_h", "id_orig_h"), dst=("id.resp_h", "id_resp_h"),
        starts=(("ts", "ms"),), duration="duration",
        attributes=(("uid", "uid", "string"), (("id.orig_p", "id_orig_p"), "orig_p", "int64"),
                    (("id.resp_p", "id_resp_p"), "resp_p", "int64"), ("proto", "proto", "string"),
                    ("service", "service", "string"), ("conn_state", "conn_state", "string"),
                    ("history", "history", "string"),
                    *((k, k, "int64") for k in ("orig_bytes", "resp_bytes", "orig_pkts",
                                                "resp_pkts", "orig_ip_bytes",
                                                "resp_ip_bytes", "missed_bytes"))),
        nested="conn", float_unit="s"),
    "pmacct": FlowJsonLayout(
        src=("ip_src",), dst=("ip_dst",), starts=(("timestamp_start", "s"),),
        ends=(("timestamp_end", "s"),),
        attributes=(("port_src", "port_src", "int64"), ("port_dst", "port_dst", "int64"),
                    ("ip_proto", "ip_proto", "string"), ("packets", "packets", "int64"),
                    ("bytes", "bytes", "int64"), ("tcp_flags", "tcp_flags", "string"),
                    ("tos", "tos", "int64"), ("event_type", "event_type", "string"),
                    ("writer_id", "writer_id", "string"))),
}


def parse_flow_json(fmt: str, text: pa.Array, rows: np.ndarray, options: ReaderOptions,
                    rejects: Rejects) -> Parsed:
    """The flows of the lines ``text[rows]`` in the layout of ``fmt``."""
    layout = LAYOUTS[fmt]
    pieces = _read_pieces(text.take(pa.array(rows, pa.int64())), rows, rejects)
    parts = [_convert(layout, table, rows[lo:lo + table.num_rows], options, rejects)
             for lo, table in pieces]
    kept = np.concatenate([rows[lo:lo + t.num_rows] for lo, t in pieces]) if pieces \
        else np.zeros(0, np.int64)
    names = ["t", "dur", "src", "dst", *(column for _, column, _ in layout.attributes)]
    columns = {name: pa.concat_arrays([part[name] for part in parts]) if parts
               else pa.array([], _KINDS[_kind(layout, name)]) for name in names}
    return columns, kept


_KINDS = {"t": pa.int64(), "dur": pa.int64(), "src": pa.string(), "dst": pa.string(),
          "int64": pa.int64(), "string": pa.string()}


def _kind(layout: FlowJsonLayout, name: str) -> str:
    return next((kind for _, column, kind in layout.attributes if column == name), name)


def _read_pieces(lines: pa.Array, rows: np.ndarray,
                 rejects: Rejects) -> list[tuple[int, pa.Table]]:
    """Tables of consecutive lines Arrow's reader reads, each with the index of its first
    line; the lines it cannot read alone are rejects (reason from :func:`json.loads`)."""
    if len(lines) == 0:
        return []
    joined = pc.binary_join_element_wise(lines, pa.scalar("", pa.string()), "\n")
    joined = joined.cast(pa.large_string())
    offsets = np.frombuffer(joined.buffers()[1], np.int64)[
        joined.offset:joined.offset + len(joined) + 1]
    data = joined.buffers()[2]
    pieces: list[tuple[int, pa.Table]] = []
    stack = [(0, len(lines))]
    while stack:
        lo, hi = stack.pop()
        table = _read_json(data, int(offsets[lo]), int(offsets[hi]))
        if table is not None and table.num_rows == hi - lo:
            pieces.append((lo, table))
        elif hi - lo == 1:
            rejects.add(rows[lo:hi], _json_reason(lines[lo].as_py(), table))
        else:
            mid = (lo + hi) // 2
            stack.extend([(mid, hi), (lo, mid)])
    return sorted(pieces, key=lambda piece: piece[0])


def _read_json(data: pa.Buffer, start: int, end: int) -> pa.Table | None:
    try:
        return pa_json.read_json(
            pa.BufferReader(data.slice(start, end - start)),
            read_options=pa_json.ReadOptions(use_threads=False,
                                             block_size=max(end - start, 1 << 16)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _json_reason(line: str, table: pa.Table | None) -> str:
    """Why a line alone is no flow object."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        return f"invalid JSON: {exc}"
    except RecursionError:
        return "invalid JSON: nested too deeply"
    if not isinstance(value, dict):
        return f"not a JSON object: {type(value).__name__}"
    if table is not None:
        return f"{table.num_rows} JSON objects on one line"
    return "a JSON object Arrow's reader cannot read (a key given twice, a number too large?)"


def _field(table: pa.Table, key: str, nested: str | None) -> pa.Array | None:
    """The column ``key`` of a piece, top-level or inside the ``nested`` object (a tagged
    Zeek record), combined when lines have both."""
    found = []
    if key in table.column_names:
        found.append(table.column(key).combine_chunks())
    if nested is not None and nested in table.column_names:
        outer = table.column(nested).combine_chunks()
        if pa.types.is_struct(outer.type) and outer.type.get_field_index(key) >= 0:
            found.append(pc.struct_field(outer, key))
    if not found:
        return None
    if len(found) == 2 and found[0].type != found[1].type:
        found = [found[0].cast(pa.string()), found[1].cast(pa.string())]
    return found[0] if len(found) == 1 else pc.coalesce(*found)


def _convert(layout: FlowJsonLayout, table: pa.Table, rows: np.ndarray,
             options: ReaderOptions, rejects: Rejects) -> dict[str, pa.Array]:
    n = table.num_rows
    out: dict[str, pa.Array] = {}
    for core, keys in (("src", layout.src), ("dst", layout.dst)):
        values, key = _first(table, keys, layout.nested)
        text = pa.nulls(n, pa.string()) if values is None else _as_text(values)
        missing = ~bool_np(pc.fill_null(pc.not_equal(text, ""), False))
        rejects.add(rows[missing], f"missing field {key}")
        out[core] = pc.fill_null(text, "")
    start = _time(table, layout, layout.starts, rows, rejects, required=True)
    if layout.duration is not None:
        dur = _duration(_field(table, layout.duration, layout.nested), layout.duration,
                        rows, rejects)
    elif layout.ends:
        end = _time(table, layout, layout.ends, rows, rejects, required=False)
        dur = np.where(end == _ABSENT, 0, end - start)
        for row in np.flatnonzero(dur < 0):
            rejects.add(rows[row:row + 1], f"the flow ends before it starts ({layout.ends[0][0]} "
                                           f"{int(end[row])} < {int(start[row])} us)")
    else:
        dur = np.zeros(n, np.int64)
    out["t"] = pa.array(np.where(start == _ABSENT, 0, start), pa.int64())
    out["dur"] = pa.array(np.maximum(dur, 0), pa.int64())
    for keys, column, kind in layout.attributes:
        values, key = _first(table, (keys,) if isinstance(keys, str) else keys, layout.nested)
        out[column] = _attribute(values, key, kind, rows, rejects, n)
    return out


_ABSENT = np.iinfo(np.int64).min


def _first(table: pa.Table, keys: tuple[str, ...], nested: str | None
           ) -> tuple[pa.Array | None, str]:
    for key in keys:
        values = _field(table, key, nested)
        if values is not None and values.null_count < len(values):
            return values, key
    return None, keys[0]


def _as_text(values: pa.Array) -> pa.Array:
    if pa.types.is_null(values.type):
        return pa.nulls(len(values), pa.string())
    try:
        return values.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a list or an object
        return pa.nulls(len(values), pa.string())


def _time(table: pa.Table, layout: FlowJsonLayout, keys: tuple[tuple[str, str], ...],
          rows: np.ndarray, rejects: Rejects, required: bool) -> np.ndarray:
    """Microseconds from the first of ``keys`` each line has; :data:`_ABSENT` where none
    (a reject when ``required``)."""
    out = np.full(table.num_rows, _ABSENT, np.int64)
    for key, unit in keys:
        values = _field(table, key, layout.nested)
        if values is None:
            continue
        todo = (out == _ABSENT) & bool_np(values.is_valid())
        if not todo.any():
            continue
        us, errors = _to_us(values, unit, layout.float_unit or unit)
        for row, why in errors.items():
            if todo[row]:
                rejects.add(rows[row:row + 1], f"field {key}: {why}")
        out[todo] = us[todo]
    if required:
        rejects.add(rows[out == _ABSENT], f"missing field {keys[0][0]}")
    return out


def _to_us(values: pa.Array, unit: str,
           float_unit: str) -> tuple[np.ndarray, dict[int, str]]:
    """Any JSON time column -> exact microseconds: integers in ``unit`` (``ns`` rounded
    half-even), floats through their shortest text and numeric strings in ``float_unit``
    (``ns`` taken as ``s``: no collector writes fractional nanoseconds), other strings as
    ISO-8601 date-times, Arrow's inferred timestamps as they are."""
    float_unit = "s" if float_unit == "ns" else float_unit
    typ = values.type
    if pa.types.is_integer(typ):
        raw = pc.fill_null(values, 0).cast(pa.int64()).to_numpy()
        if unit == "ns":
            us, rem = np.divmod(raw, 1000)
            return us + ((rem > 500) | ((rem == 500) & (us % 2 == 1))), {}
        return decimal_to_us(pa.array(raw).cast(pa.string()), unit)
    if pa.types.is_floating(typ):
        return decimal_to_us(values.cast(pa.string()), float_unit)
    if pa.types.is_timestamp(typ):
        return values.cast(pa.timestamp("us")).cast(pa.int64()).fill_null(0).to_numpy(), {}
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return time_to_us(values, ReaderOptions(time_unit=float_unit, time_format="auto"))
    errors = {int(r): f"not a time: a JSON {typ}" for r in np.flatnonzero(
        bool_np(values.is_valid()))}
    return np.zeros(len(values), np.int64), errors


def _duration(values: pa.Array | None, key: str, rows: np.ndarray,
              rejects: Rejects) -> np.ndarray:
    if values is None:
        return np.zeros(len(rows), np.int64)
    if pa.types.is_null(values.type):
        return np.zeros(len(values), np.int64)
    us, errors = _to_us(values, "s", "s")
    valid = bool_np(values.is_valid())
    for row, why in errors.items():
        if valid[row]:
            rejects.add(rows[row:row + 1], f"field {key}: {why}")
    for row in np.flatnonzero(valid & (us < 0)):
        rejects.add(rows[row:row + 1], f"field {key}: negative duration: "
                                       f"{short(str(values[int(row)].as_py()))}")
    return np.where(valid, us, 0)


def _attribute(values: pa.Array | None, key: str, kind: str, rows: np.ndarray,
               rejects: Rejects, n: int) -> pa.Array:
    if values is None or pa.types.is_null(values.type):
        return pa.nulls(n, _KINDS[kind])
    if kind == "string":
        return _as_text(values)
    if pa.types.is_integer(values.type):
        return values.cast(pa.int64())
    converted, bad, reasons = convert_number(_as_text(values), "int64")
    rejects.add(rows[bad], [f"field {key}: {why}" for why in reasons])
    return converted


_ZONE = re.compile(r"(?:[Zz]|[+-]\d{2}:?\d{2})$")
_NUMBER = re.compile(r"^\s*[+-]?(?:\d+\.?\d*|\.\d+)\s*$")


def time_guess(fmt: str, head: list[str]) -> str | None:
    """What reading a collector's times takes for granted, said once per file (or Kafka
    stream) from its first flow that has a start time; ``None`` when nothing is guessed.

    >>> time_guess("pmacct", ['{"timestamp_start": "2024-01-31 12:00:00.000000"}'])[:38]
    "pmacct's timestamp_start names no zone"
    """
    layout = LAYOUTS[fmt]
    key = layout.starts[0][0]
    for line in head:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and layout.nested and isinstance(obj.get(layout.nested), dict):
            obj = obj[layout.nested]
        value = obj.get(key) if isinstance(obj, dict) else None
        if value is None:
            continue
        if fmt == "pmacct" and isinstance(value, str) and not _NUMBER.match(value) \
                and not _ZONE.search(value.strip()):
            return (f"pmacct's {key} names no zone ({value!r}): read as UTC, as pmacct "
                    "writes it with timestamps_utc: true (set it, or timestamps_rfc3339, "
                    "if the times are the collector's local time)")
        if fmt == "zeek-conn" and isinstance(value, int):
            return (f"Zeek's ts is an integer ({value}): read as milliseconds, as Zeek "
                    "writes it with JSON::TS_MILLIS")
        return None
    return None


__all__ = ["LAYOUTS", "FlowJsonLayout", "parse_flow_json", "time_guess"]
