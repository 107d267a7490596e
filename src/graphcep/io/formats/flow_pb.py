"""goflow2's protobuf ``FlowMessage`` (``--format goflow2-pb``), decoded without protobuf.

goflow2 (github.com/netsampler/goflow2, ``pb/flow.proto``) publishes one ``FlowMessage``
per flow. Its ``-format bin`` writes each message with a varint length before it (protobuf's
"delimited" form), to Kafka and to files alike, and its file transport adds a ``\\n`` after
each (``-transport.file.sep``); other producers put one plain message in a Kafka value.

Decoding is one numba pass over the bytes of a whole chunk (:func:`decode_messages`):
framing, the wire format (varints, fixed, length-delimited fields; unknown fields are
skipped, as protobuf does) and the address text, so there is no Python call per message.

Fields read (goflow2 v2 numbers; the v1 time fields are read when the v2 ones are absent):

======================  ======  =====================================================
edge column             field   meaning
======================  ======  =====================================================
``t``                   111     ``time_flow_start_ns`` (v1: 63 ``time_flow_start_ms``,
                                38 ``time_flow_start`` in s), half-even to the µs
``dur``                 112     ``time_flow_end_ns`` minus the start (v1: 64, 5)
``src`` / ``dst``       6 / 7   ``src_addr`` / ``dst_addr``, 4 or 16 bytes, as text
                                (``10.0.0.1``, RFC 5952 ``2001:db8::1``, ``::ffff:1.2.3.4``
                                for an IPv4-mapped address, as goflow2's JSON writes them)
attributes (int64)              ``proto`` 20, ``src_port`` 21, ``dst_port`` 22, ``bytes`` 9,
                                ``packets`` 10, ``tcp_flags`` 26, ``etype`` 30, ``in_if`` 18,
                                ``out_if`` 19, ``src_as`` 14, ``dst_as`` 15, ``ip_tos`` 23,
                                ``type`` 1, ``sampling_rate`` 3, ``sequence_num`` 4,
                                ``time_received_ns`` 110
``sampler_address``     11      the exporter's address, as text ("" when absent)
======================  ======  =====================================================

proto3 writes no field whose value is zero, so an absent attribute is 0, never null. A
message is rejected, with its reason, when its bytes are no protobuf (a varint or a field
running past its end, a group wire type), a known field has the wrong wire type, an
address is absent or not 4 or 16 bytes long, it has no start time, its end is before its
start, or a value does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats.parse import assemble
from graphcep.io.formats.schema import REJECT_SCHEMA, REJECT_TEXT_CHARS

#: (attribute column, field number) of the integer attributes, in column order.
PB_ATTRIBUTES: tuple[tuple[str, int], ...] = (
    ("proto", 20), ("src_port", 21), ("dst_port", 22), ("bytes", 9), ("packets", 10),
    ("tcp_flags", 26), ("etype", 30), ("in_if", 18), ("out_if", 19), ("src_as", 14),
    ("dst_as", 15), ("ip_tos", 23), ("type", 1), ("sampling_rate", 3), ("sequence_num", 4),
    ("time_received_ns", 110),
)
#: Time fields: (name, number, nanoseconds per unit), v2 first.
_START_FIELDS = (("time_flow_start_ns", 111, 1), ("time_flow_start_ms", 63, 10**6),
                 ("time_flow_start", 38, 10**9))
_END_FIELDS = (("time_flow_end_ns", 112, 1), ("time_flow_end_ms", 64, 10**6),
               ("time_flow_end", 5, 10**9))
#: Length-delimited fields kept: src_addr, dst_addr, sampler_address.
_BYTES_FIELDS = (6, 7, 11)
_BYTES_NAMES = ("src_addr", "dst_addr", "sampler_address")
_VARINT_FIELDS = tuple(n for _, n in PB_ATTRIBUTES) + tuple(
    n for _, n, _ in _START_FIELDS + _END_FIELDS)
_MAX_FIELD = 128
#: Times are held in int64 nanoseconds (and so stay below 2**62 microseconds).
_MAX_NS = 2**63 - 1
#: field number -> slot among the varint fields (-1: not kept), and -> bytes slot.
_VARINT_SLOT = np.full(_MAX_FIELD, -1, np.int64)
_VARINT_SLOT[list(_VARINT_FIELDS)] = np.arange(len(_VARINT_FIELDS))
_BYTES_SLOT = np.full(_MAX_FIELD, -1, np.int64)
_BYTES_SLOT[list(_BYTES_FIELDS)] = np.arange(len(_BYTES_FIELDS))

#: Longest length prefix read as a message (goflow2's are some hundred bytes).
MAX_MESSAGE_BYTES = 1 << 20
# Reject codes of the kernel.
_OK, _BAD_VARINT, _PAST_END, _GROUP, _FIELD_ZERO, _WRONG_WIRE = 0, 1, 2, 3, 4, 5
_NO_START, _START_RANGE, _END_RANGE, _END_BEFORE, _BAD_ADDRESS, _ATTR_RANGE = 6, 7, 8, 9, 10, 11
_START_SLOTS = np.array([_VARINT_SLOT[n] for _, n, _ in _START_FIELDS], np.int64)
_START_SCALES = np.array([scale for _, _, scale in _START_FIELDS], np.int64)
_END_SLOTS = np.array([_VARINT_SLOT[n] for _, n, _ in _END_FIELDS], np.int64)
_END_SCALES = np.array([scale for _, _, scale in _END_FIELDS], np.int64)
_ATTR_SLOTS = np.array([_VARINT_SLOT[n] for _, n in PB_ATTRIBUTES], np.int64)
_WIRE_NAMES = ("varint", "fixed64", "length-delimited", "group start", "group end",
               "fixed32", "wire type 6", "wire type 7")
#: Most bytes an address takes as text: ``::ffff:255.255.255.255`` is 22, a full IPv6 39.
_ADDR_TEXT_MAX = 45


@numba.njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, p: int, end: int) -> tuple[np.uint64, int, bool]:
    """The varint at ``p``: (value, position after it, ok). Ten bytes at most, the tenth
    holding one bit (a value over 64 bits is no varint)."""
    value = np.uint64(0)
    shift = 0
    for k in range(10):
        if p >= end:
            return value, p, False
        byte = np.uint64(buf[p])
        p += 1
        if k == 9 and byte > 1:
            return value, p, False
        value |= (byte & np.uint64(0x7F)) << np.uint64(shift)
        if byte < 128:
            return value, p, True
        shift += 7
    return value, p, False


@numba.njit(cache=True, nogil=True)
def _parse_fields(buf, p, end, varint_slot, bytes_slot, vals, seen, span):
    """Read one message's fields into ``vals``/``seen`` (the kept varints) and ``span``
    (the kept length-delimited ones): (reject code, its byte, field number, wire type)."""
    start = p
    field, wire = np.int64(0), np.int64(0)
    while p < end:
        at = p
        key, p, ok = _varint(buf, p, end)
        if not ok:
            return _BAD_VARINT, at - start, field, wire
        field = np.int64(key >> np.uint64(3))
        wire = np.int64(key & np.uint64(7))
        if field == 0:
            return _FIELD_ZERO, at - start, field, wire
        kept_varint = field < _MAX_FIELD and varint_slot[field] >= 0
        kept_bytes = field < _MAX_FIELD and bytes_slot[field] >= 0
        if (kept_varint and wire != 0) or (kept_bytes and wire != 2):
            return _WRONG_WIRE, at - start, field, wire
        if wire == 0:
            value, p, ok = _varint(buf, p, end)
            if not ok:
                return _BAD_VARINT, at - start, field, wire
            if kept_varint:
                vals[varint_slot[field]] = value
                seen[varint_slot[field]] = True
        elif wire == 1 or wire == 5:
            p += 8 if wire == 1 else 4
            if p > end:
                return _PAST_END, at - start, field, wire
        elif wire == 2:
            length, p, ok = _varint(buf, p, end)
            if not ok:
                return _BAD_VARINT, at - start, field, wire
            if length > np.uint64(end - p):
                return _PAST_END, at - start, field, wire
            if kept_bytes:
                span[bytes_slot[field], 0] = p
                span[bytes_slot[field], 1] = np.int64(length)
            p += np.int64(length)
        else:
            return _GROUP, at - start, field, wire
    return _OK, 0, field, wire


@numba.njit(cache=True, nogil=True)
def _half_even_us(ns):
    us = ns // 1000
    rem = ns - us * 1000
    if rem > 500 or (rem == 500 and us % 2 == 1):
        us += 1
    return us


@numba.njit(cache=True, nogil=True)
def _first_time(vals, seen, slots, scales):
    """The first of the time fields present, in ns: (ns, which, out of range)."""
    for k in range(len(slots)):
        if seen[slots[k]]:
            value = vals[slots[k]]
            if value > np.uint64(_MAX_NS // scales[k]):
                return np.int64(0), k, True
            return np.int64(value) * scales[k], k, False
    return np.int64(0), -1, False


@numba.njit(cache=True, nogil=True)
def _decode_kernel(buf, starts, ends, varint_slot, bytes_slot, n_varint, start_slots,
                   start_scales, end_slots, end_scales, attr_slots):
    """Every message's fields, times and attributes, and the first reason to reject it
    (a code and two details: see :func:`decode_messages`)."""
    n = len(starts)
    t = np.zeros(n, np.int64)
    dur = np.zeros(n, np.int64)
    attrs = np.zeros((len(attr_slots), n), np.int64)
    spans = np.full((n, 3, 2), -1, np.int64)
    code = np.zeros(n, np.int8)
    detail = np.zeros((n, 3), np.int64)
    vals = np.zeros(n_varint, np.uint64)
    seen = np.zeros(n_varint, np.bool_)
    for i in range(n):
        vals[:] = 0
        seen[:] = False
        c, at, field, wire = _parse_fields(buf, starts[i], ends[i], varint_slot, bytes_slot,
                                           vals, seen, spans[i])
        if c != _OK:
            code[i] = c
            detail[i, 0], detail[i, 1], detail[i, 2] = at, field, wire
            continue
        start_ns, which, too_big = _first_time(vals, seen, start_slots, start_scales)
        if which < 0 or too_big:
            code[i] = _NO_START if which < 0 else _START_RANGE
            detail[i, 0] = which
            continue
        end_ns, end_which, too_big = _first_time(vals, seen, end_slots, end_scales)
        if too_big:
            code[i], detail[i, 0] = _END_RANGE, end_which
            continue
        if end_which < 0:
            end_ns = start_ns
        if end_ns < start_ns:
            code[i] = _END_BEFORE
            detail[i, 0], detail[i, 1] = end_ns, start_ns
            continue
        bad_address = -1
        for k in range(2):
            if spans[i, k, 1] != 4 and spans[i, k, 1] != 16:
                bad_address = k
                break
        if bad_address >= 0:
            code[i] = _BAD_ADDRESS
            detail[i, 0], detail[i, 1] = bad_address, spans[i, bad_address, 1]
            continue
        big = -1
        for j in range(len(attr_slots)):
            value = vals[attr_slots[j]]
            if value >= np.uint64(2**63):
                big = j
                break
            attrs[j, i] = np.int64(value)
        if big >= 0:
            attrs[:, i] = 0
            code[i], detail[i, 0] = _ATTR_RANGE, big
            continue
        t[i] = _half_even_us(start_ns)
        dur[i] = _half_even_us(end_ns) - t[i]
    return t, dur, attrs, spans, code, detail


@numba.njit(cache=True, nogil=True)
def _put_decimal(out, q, value):
    if value >= 100:
        out[q] = 48 + value // 100
        q += 1
    if value >= 10:
        out[q] = 48 + (value // 10) % 10
        q += 1
    out[q] = 48 + value % 10
    return q + 1


@numba.njit(cache=True, nogil=True)
def _put_ipv4(out, q, buf, p):
    for k in range(4):
        if k:
            out[q] = 46  # '.'
            q += 1
        q = _put_decimal(out, q, np.int64(buf[p + k]))
    return q


@numba.njit(cache=True, nogil=True)
def _put_hex(out, q, value):
    started = False
    for shift in (12, 8, 4, 0):
        digit = (value >> shift) & 15
        if digit or started or shift == 0:
            out[q] = 48 + digit if digit < 10 else 87 + digit
            q += 1
            started = True
    return q


@numba.njit(cache=True, nogil=True)
def _put_ipv6(out, q, buf, p):
    """RFC 5952: lower-case hex without leading zeros, the longest run of two or more zero
    groups (the first of equal ones) as ``::``; an IPv4-mapped address as ``::ffff:a.b.c.d``."""
    groups = np.empty(8, np.int64)
    for g in range(8):
        groups[g] = np.int64(buf[p + 2 * g]) * 256 + np.int64(buf[p + 2 * g + 1])
    if groups[0] == 0 and groups[1] == 0 and groups[2] == 0 and groups[3] == 0 \
            and groups[4] == 0 and groups[5] == 0xFFFF:
        for c in (58, 58, 102, 102, 102, 102, 58):  # "::ffff:"
            out[q] = c
            q += 1
        return _put_ipv4(out, q, buf, p + 12)
    best, best_len, run, run_len = -1, 0, -1, 0
    for g in range(8):
        if groups[g] == 0:
            if run_len == 0:
                run = g
            run_len += 1
            if run_len > best_len:
                best, best_len = run, run_len
        else:
            run_len = 0
    if best_len < 2:
        best, best_len = -1, 0
    g = 0
    while g < 8:
        if g == best:
            out[q] = 58
            out[q + 1] = 58
            q += 2
            g += best_len
            continue
        if g and g != best + best_len:  # no ':' right after the '::'
            out[q] = 58
            q += 1
        q = _put_hex(out, q, groups[g])
        g += 1
    return q


@numba.njit(cache=True, nogil=True)
def _address_text(buf, spans, slot, keep):
    """The text of the addresses in ``spans[:, slot]`` (4 or 16 bytes; others and rows
    not kept are empty): Arrow string offsets and data."""
    n = len(spans)
    out = np.empty(n * _ADDR_TEXT_MAX, np.uint8)
    offsets = np.zeros(n + 1, np.int32)
    q = 0
    for i in range(n):
        p, length = spans[i, slot, 0], spans[i, slot, 1]
        if keep[i]:
            if length == 4:
                q = _put_ipv4(out, q, buf, p)
            elif length == 16:
                q = _put_ipv6(out, q, buf, p)
        offsets[i + 1] = q
    return offsets, out[:q]


def _strings(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    return pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets),
                                       pa.py_buffer(data))


@numba.njit(cache=True, nogil=True)
def frame_delimited(buf, start, end, separator, max_length=MAX_MESSAGE_BYTES):
    """Cut ``buf[start:end]`` into varint-length-prefixed messages (each followed by a
    ``\\n`` when ``separator``): (message starts, ends, where the cut stopped, whether it
    stopped on bytes that cannot be a frame rather than on the end of the data). A frame
    running past ``end`` stops the cut there (the rest may come in the next block); one
    longer than ``max_length`` is no frame (a FlowMessage is some hundred bytes: a length
    of gigabytes is damage, and waiting for its bytes would hold the whole stream)."""
    cap = max(16, (end - start) // 8)
    starts = np.empty(cap, np.int64)
    ends = np.empty(cap, np.int64)
    n = 0
    p = start
    broken = False
    while p < end:
        length, q, ok = _varint(buf, p, end)
        if not ok:
            broken = q - p >= 10 or q < end  # a varint over 10 bytes; else it is cut short
            break
        if length > np.uint64(max_length):
            broken = True
            break
        if length > np.uint64(end - q) or (separator and length + np.uint64(1) > np.uint64(end - q)):
            break
        if separator and buf[q + np.int64(length)] != 10:
            broken = True
            break
        if n == cap:
            cap *= 2
            starts = np.concatenate((starts, np.empty(cap - n, np.int64)))
            ends = np.concatenate((ends, np.empty(cap - n, np.int64)))
        starts[n] = q
        ends[n] = q + np.int64(length)
        n += 1
        p = ends[n - 1] + (1 if separator else 0)
    return starts[:n], ends[:n], p, broken


def decode_messages(buf: np.ndarray, starts: np.ndarray,
                    ends: np.ndarray) -> tuple[dict[str, pa.Array], dict[int, str]]:
    """Decode the messages ``buf[starts[i]:ends[i]]``: the edge columns (``t``, ``dur``,
    ``src``, ``dst``, then the attributes, one row per message, zeros on rejected rows)
    and ``{row: reason}`` for the rejected ones."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    t, dur, attrs, spans, code, detail = _decode_kernel(
        buf, starts, ends, _VARINT_SLOT, _BYTES_SLOT, len(_VARINT_FIELDS), _START_SLOTS,
        _START_SCALES, _END_SLOTS, _END_SCALES, _ATTR_SLOTS)
    rejected = np.flatnonzero(code)
    reasons = {int(row): _reason(int(code[row]), detail[row]) for row in rejected}
    keep = code == 0
    columns = {"t": pa.array(t), "dur": pa.array(dur),
               "src": _strings(*_address_text(buf, spans, 0, keep)),
               "dst": _strings(*_address_text(buf, spans, 1, keep)),
               **{name: pa.array(attrs[j]) for j, (name, _) in enumerate(PB_ATTRIBUTES)},
               "sampler_address": _strings(*_address_text(buf, spans, 2, keep))}
    return columns, reasons


def _reason(code: int, detail: np.ndarray) -> str:
    """The reject reason of a kernel's ``code`` and ``detail``."""
    if code <= _WRONG_WIRE:
        return _wire_reason(code, int(detail[0]), int(detail[1]), int(detail[2]))
    if code == _NO_START:
        names = ", ".join(f"{number} ({name})" for name, number, _ in _START_FIELDS)
        return f"no flow start time: none of the fields {names}, or only zero"
    if code in (_START_RANGE, _END_RANGE):
        name, number, _ = (_START_FIELDS if code == _START_RANGE else _END_FIELDS)[detail[0]]
        return f"field {number} ({name}): out of range (past 2262 in nanoseconds)"
    if code == _END_BEFORE:
        return f"the flow ends before it starts ({int(detail[0])} < {int(detail[1])} ns)"
    if code == _BAD_ADDRESS:
        slot, length = int(detail[0]), int(detail[1])
        what = "absent" if length < 0 else f"{length} bytes long"
        return (f"field {_BYTES_FIELDS[slot]} ({_BYTES_NAMES[slot]}): {what}, expected a "
                "4- or 16-byte address")
    name, number = PB_ATTRIBUTES[int(detail[0])]
    return f"field {number} ({name}): does not fit a signed 64-bit integer"


def _wire_reason(code: int, where: int, field: int, wire: int) -> str:
    at = f"at byte {where + 1} of the message"
    if code == _BAD_VARINT:
        return f"not a protobuf FlowMessage: a varint {at} is cut short or over 10 bytes"
    if code == _PAST_END:
        return f"not a protobuf FlowMessage: field {field} {at} runs past its end"
    if code == _FIELD_ZERO:
        return f"not a protobuf FlowMessage: field number 0 {at}"
    if code == _GROUP:
        return f"not a protobuf FlowMessage: field {field} {at} has {_WIRE_NAMES[wire]}"
    return (f"field {field} {at} is {_WIRE_NAMES[wire]}, not the type FlowMessage gives it "
            "(is this a goflow2 FlowMessage?)")


@numba.njit(cache=True, nogil=True)
def _value_frames(buf, offsets):
    """The messages of each Kafka value ``buf[offsets[i]:offsets[i + 1]]``: its
    length-prefixed messages when they fill it exactly, else the value as one plain
    message; an empty value (a tombstone) holds none. (message starts, ends, value index)."""
    n = len(offsets) - 1
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    owner = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        if lo == hi:
            continue
        s, e, stop, broken = frame_delimited(buf, lo, hi, False)
        if stop != hi or broken or len(s) == 0:
            s, e = np.array([lo], np.int64), np.array([hi], np.int64)
        if m + len(s) > len(starts):
            grow = max(len(starts), len(s))
            starts = np.concatenate((starts, np.empty(grow, np.int64)))
            ends = np.concatenate((ends, np.empty(grow, np.int64)))
            owner = np.concatenate((owner, np.empty(grow, np.int64)))
        starts[m:m + len(s)] = s
        ends[m:m + len(s)] = e
        owner[m:m + len(s)] = i
        m += len(s)
    return starts[:m], ends[:m], owner[:m]


def value_frames(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The messages of Kafka values (see :func:`_value_frames`): the bytes they lie in,
    their starts and ends, and the value each comes from."""
    values = pc.fill_null(values.cast(pa.large_binary()), b"")
    offsets_buf, data_buf = values.buffers()[1:3]
    offsets = np.frombuffer(offsets_buf, np.int64)[values.offset:values.offset + len(values) + 1]
    buf = (np.frombuffer(data_buf, np.uint8) if data_buf is not None
           else np.zeros(0, np.uint8))
    starts, ends, owner = _value_frames(buf, np.ascontiguousarray(offsets))
    return buf, starts, ends, owner


def parse_frames(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 numbers: np.ndarray) -> tuple[pa.Table, pa.Table]:
    """Edges and rejects of the messages ``buf[starts[i]:ends[i]]``; ``numbers[i]`` is the
    message's ``seq`` and the ``line`` of its reject, whose text is the message's first
    bytes in hex."""
    columns, reasons = decode_messages(buf, starts, ends)
    good = np.ones(len(starts), bool)
    good[list(reasons)] = False
    edges = assemble(columns, good, numbers[good])
    rows = np.array(sorted(reasons), np.int64)
    texts = [bytes(buf[starts[r]:min(ends[r], starts[r] + REJECT_TEXT_CHARS // 2)]).hex()
             for r in rows]
    rejects = pa.table({"line": pa.array(numbers[rows], pa.int64()),
                        "reason": pa.array([reasons[int(r)] for r in rows], pa.string()),
                        "text": pa.array(texts, pa.string())}, schema=REJECT_SCHEMA)
    return edges, rejects


@dataclass
class FrameReader:
    """Cuts the blocks of a goflow2 ``-format bin`` byte stream into messages and parses
    them (:meth:`feed`, then :meth:`finish`); messages are numbered from 1 (their ``seq``
    and the ``line`` of their rejects). Whether a ``\\n`` follows each message is decided
    from the first one. Bytes that cannot be a frame end the stream's reading: a
    length-prefixed stream cannot be resynchronised."""

    carry: bytes = b""
    number: int = 1
    offset: int = 0  #: byte offset of ``carry`` in the stream
    separator: bool | None = None
    stopped: bool = False
    leftover: int = 0  #: rejects of bytes that are no message (0 or 1)

    def feed(self, block: bytes) -> tuple[pa.Table, pa.Table] | None:
        if self.stopped:
            return None
        data = self.carry + block
        buf = np.frombuffer(data, np.uint8)
        if self.separator is None:
            length, after, ok = _varint(buf, 0, len(buf))
            if not ok or after + int(length) >= len(buf):
                self.carry = data  # the first frame is not whole yet
                return None
            self.separator = bool(buf[after + int(length)] == 10)
        starts, ends, stop, broken = frame_delimited(buf, 0, len(buf), self.separator)
        numbers = np.arange(self.number, self.number + len(starts), dtype=np.int64)
        edges, rejects = parse_frames(buf, starts, ends, numbers)
        self.number += len(starts)
        self.carry, self.offset = data[stop:], self.offset + stop
        if broken:
            self.stopped = True
            rejects = pa.concat_tables([rejects, self._leftover(
                "bytes that are no length-prefixed FlowMessage (a varint length up to "
                f"{MAX_MESSAGE_BYTES}, the message" + (", a '\\n'" if self.separator else "")
                + "): the rest of the stream is not read")])
        return edges, rejects

    def finish(self) -> tuple[pa.Table, pa.Table] | None:
        """The messages still held (a stream of one frame, its separator undecided), and a
        reject for bytes left after the last whole message (a truncated one)."""
        if self.stopped or not self.carry:
            return None
        if self.separator is None:
            self.separator = False
        edges, rejects = self.feed(b"") or (None, None)
        if self.stopped or not self.carry:
            return edges, rejects
        tail = self._leftover(f"a truncated message: the stream ends {len(self.carry)} "
                              "bytes into it")
        return edges, pa.concat_tables([rejects, tail])

    def _leftover(self, why: str) -> pa.Table:
        text = self.carry[:REJECT_TEXT_CHARS // 2].hex()
        self.carry, self.leftover = b"", 1
        return pa.table({"line": [self.number], "reason": [f"at byte {self.offset}: {why}"],
                         "text": [text]}, schema=REJECT_SCHEMA)


__all__ = ["MAX_MESSAGE_BYTES", "PB_ATTRIBUTES", "FrameReader", "decode_messages", "frame_delimited",
           "parse_frames", "value_frames"]
