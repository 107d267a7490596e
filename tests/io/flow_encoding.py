"""A tiny protobuf encoder written from the wire-format spec (protobuf.dev, "Encoding"),
independent of the decoder under test: the tests' oracle for goflow2 ``FlowMessage`` bytes.
Field numbers are goflow2's ``pb/flow.proto`` (v2), written out here by hand."""

from __future__ import annotations

#: goflow2 v2 ``FlowMessage`` field numbers, copied from ``pb/flow.proto``.
FIELDS = {"type": 1, "sampling_rate": 3, "sequence_num": 4, "src_addr": 6, "dst_addr": 7,
          "bytes": 9, "packets": 10, "sampler_address": 11, "next_hop": 12, "src_as": 14,
          "dst_as": 15, "in_if": 18, "out_if": 19, "proto": 20, "src_port": 21,
          "dst_port": 22, "ip_tos": 23, "tcp_flags": 26, "etype": 30,
          "bgp_communities": 101, "time_received_ns": 110, "time_flow_start_ns": 111,
          "time_flow_end_ns": 112,
          # goflow2 v1 time fields
          "time_flow_start": 38, "time_flow_end": 5, "time_flow_start_ms": 63,
          "time_flow_end_ms": 64}


def varint(value: int) -> bytes:
    """Base-128, least significant group first, high bit set on all but the last byte."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def encode(fields: dict[str, int | bytes | list[int]]) -> bytes:
    """A FlowMessage: ints as varints (wire 0), bytes length-delimited (wire 2), lists as
    packed repeated varints; zero values are left out, as proto3 does."""
    out = bytearray()
    for name, value in fields.items():
        number = FIELDS[name]
        if isinstance(value, bytes):
            out += key(number, 2) + varint(len(value)) + value
        elif isinstance(value, list):
            body = b"".join(varint(v) for v in value)
            out += key(number, 2) + varint(len(body)) + body
        elif value:
            out += key(number, 0) + varint(value)
    return bytes(out)


def delimited(message: bytes) -> bytes:
    """protodelim's form: the length as a varint, then the message."""
    return varint(len(message)) + message
