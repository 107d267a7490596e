"""The exporter's side of NetFlow v5: edges to v5 datagrams, sent over UDP to a collector.

A NetFlow v5 datagram (Cisco's layout, big-endian) is a 24-byte header -- ``version`` (5),
``count``, ``sys_uptime`` (ms), ``unix_secs``, ``unix_nsecs``, ``flow_sequence``,
``engine_type``, ``engine_id``, ``sampling_interval`` -- and up to 30 records of 48 bytes:
``srcaddr``, ``dstaddr``, ``nexthop``, ``input``, ``output``, ``dPkts``, ``dOctets``,
``First``, ``Last`` (router uptimes in ms), ``srcport``, ``dstport``, a pad byte,
``tcp_flags``, ``prot``, ``tos``, ``src_as``, ``dst_as``, ``src_mask``, ``dst_mask``, two pad
bytes.

Times, exactly
--------------
A collector (goflow2, and graphcep's ``netflow5`` reader alike) takes a flow's start as
``unix_secs * 1e9 + unix_nsecs - ((sys_uptime - First) mod 2**32) * 1e6`` ns and its end
likewise from ``Last``. So the records of one datagram share the sub-millisecond part of
their start, and a duration is whole milliseconds. :func:`datagrams` puts consecutive
edges in one datagram while they share ``t mod 1 ms`` (at most 30), sets the export time
(``unix_secs``, ``unix_nsecs``) to the latest end among them, ``sys_uptime`` to
:data:`UPTIME_MS`, and ``First = sys_uptime - (export - t)`` ms, ``Last = First + dur``
(mod 2**32): the collector gets back every ``t`` and ``dur`` to the microsecond. An edge
whose duration is not whole milliseconds, whose time is before 1970 or past 2106, or
whose addresses are not IPv4 is refused (:class:`ExportError`): v5 cannot carry it.

Other fields come from the edge's attributes, under the ``netflow5`` names, goflow2's, or
VAST's (``srcport``/``src_port``/``SourcePort``, ...); a missing one is 0.

Run as ``python -m graphcep.io.netflow_v5 EDGES udp://HOST:PORT [--format F]``.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Records per datagram, v5's maximum.
MAX_RECORDS = 30
#: The ``sys_uptime`` every datagram gives (ms): any value works, the collector only
#: takes differences. One hour of router uptime.
UPTIME_MS = 3_600_000
HEADER = np.dtype([("version", ">u2"), ("count", ">u2"), ("sys_uptime", ">u4"),
                   ("unix_secs", ">u4"), ("unix_nsecs", ">u4"), ("flow_sequence", ">u4"),
                   ("engine_type", "u1"), ("engine_id", "u1"), ("sampling_interval", ">u2")])
RECORD = np.dtype([("srcaddr", ">u4"), ("dstaddr", ">u4"), ("nexthop", ">u4"),
                   ("input", ">u2"), ("output", ">u2"), ("dPkts", ">u4"), ("dOctets", ">u4"),
                   ("First", ">u4"), ("Last", ">u4"), ("srcport", ">u2"), ("dstport", ">u2"),
                   ("pad1", "u1"), ("tcp_flags", "u1"), ("prot", "u1"), ("tos", "u1"),
                   ("src_as", ">u2"), ("dst_as", ">u2"), ("src_mask", "u1"),
                   ("dst_mask", "u1"), ("pad2", ">u2")])
#: v5 record field -> the attribute columns it may come from, first found wins.
ATTRIBUTE_SOURCES: dict[str, tuple[str, ...]] = {
    "srcport": ("srcport", "src_port", "SourcePort"),
    "dstport": ("dstport", "dst_port", "DestPort"),
    "prot": ("prot", "proto", "IpLayerProtocol"),
    "dPkts": ("dPkts", "packets", "FirstSeenSrcPacketCount"),
    "dOctets": ("dOctets", "bytes", "SrcTotalBytes"),
    "tcp_flags": ("tcp_flags",), "tos": ("tos", "ip_tos"), "input": ("input", "in_if"),
    "output": ("output", "out_if"), "src_as": ("src_as",), "dst_as": ("dst_as",),
    "src_mask": ("src_mask", "src_net"), "dst_mask": ("dst_mask", "dst_net"),
}
_U32 = 2**32


class ExportError(ValueError):
    """Edges NetFlow v5 cannot carry; the message says which and why (one line)."""


def ipv4_numbers(addresses: pa.Array, what: str) -> np.ndarray:
    """Dotted IPv4 text -> uint32, vectorized; an :class:`ExportError` naming the first
    value that is no IPv4 address."""
    addresses = pc.cast(addresses, pa.string())
    valid = pc.match_substring_regex(addresses, r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$")
    parts = pc.split_pattern(pc.fill_null(addresses, "0.0.0.0"), ".")
    octets = np.zeros((len(addresses), 4), np.int64)
    ok = pc.fill_null(valid, False).to_numpy(zero_copy_only=False)
    if ok.all():
        flat = pc.cast(pc.list_flatten(parts), pa.int64()).to_numpy()
        octets = flat.reshape(-1, 4)
    bad = np.flatnonzero(~ok | (octets > 255).any(axis=1))
    if len(bad):
        raise ExportError(f"{what} {addresses[int(bad[0])].as_py()!r} (edge {int(bad[0]) + 1}) "
                          "is no IPv4 address: NetFlow v5 carries IPv4 only")
    return (octets[:, 0] << 24 | octets[:, 1] << 16 | octets[:, 2] << 8 | octets[:, 3]
            ).astype(np.uint32)


def _attribute(edges: pa.Table, field: str) -> np.ndarray:
    limit = 2 ** (8 * RECORD[field].itemsize)
    for name in ATTRIBUTE_SOURCES[field]:
        if name in edges.column_names:
            values = pc.cast(pc.fill_null(edges.column(name), 0), pa.int64()).to_numpy()
            bad = np.flatnonzero((values < 0) | (values >= limit))
            if len(bad):
                raise ExportError(f"{name} {int(values[bad[0]])} (edge {int(bad[0]) + 1}) "
                                  f"does not fit NetFlow v5's {field} (0 to {limit - 1})")
            return values
    return np.zeros(edges.num_rows, np.int64)


def _groups(t: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Datagram number of each edge: consecutive edges sharing ``t mod 1 ms``, at most
    :data:`MAX_RECORDS`, whose span stays under 2**31 ms."""
    group = np.empty(len(t), np.int64)
    number, count, residue, low, high = -1, MAX_RECORDS, -1, 0, 0
    for i in range(len(t)):  # edges are few; this runs once per export, not per match
        r = int(t[i]) % 1000
        lo, hi = min(low, int(t[i])), max(high, int(end[i]))
        if count == MAX_RECORDS or r != residue or hi - lo >= 2**31 * 1000:
            number, count, residue, lo, hi = number + 1, 0, r, int(t[i]), int(end[i])
        group[i], count, low, high = number, count + 1, lo, hi
    return group


def datagrams(edges: pa.Table, sequence: int = 0) -> list[bytes]:
    """NetFlow v5 datagrams carrying ``edges`` in their order (see the module docstring);
    ``flow_sequence`` counts records from ``sequence``."""
    n = edges.num_rows
    if n == 0:
        return []
    t = edges.column("t").to_numpy()
    dur = pc.fill_null(edges.column("dur"), 0).to_numpy() if "dur" in edges.column_names \
        else np.zeros(n, np.int64)
    for bad, why in ((dur % 1000 != 0, "a duration that is not whole milliseconds"),
                     ((t < 0) | (t + dur >= _U32 * 1_000_000), "a time outside 1970-2106")):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ExportError(f"edge {row + 1} (t={int(t[row])} us, dur={int(dur[row])} us) "
                              f"has {why}: NetFlow v5 cannot carry it")
    records = np.zeros(n, RECORD)
    records["srcaddr"] = ipv4_numbers(edges.column("src"), "src")
    records["dstaddr"] = ipv4_numbers(edges.column("dst"), "dst")
    for field in ATTRIBUTE_SOURCES:
        records[field] = _attribute(edges, field)
    group = _groups(t, t + dur)
    cuts = np.flatnonzero(np.diff(group)) + 1
    bounds = np.concatenate(([0], cuts, [n]))
    export = np.maximum.reduceat(t + dur, bounds[:-1])  # us, per datagram
    since = (export[group] - t) // 1000  # ms between the start and the export
    records["First"] = ((UPTIME_MS - since) % _U32).astype(np.uint32)
    records["Last"] = ((UPTIME_MS - since + dur // 1000) % _U32).astype(np.uint32)
    out = []
    for k in range(len(bounds) - 1):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        header = np.zeros(1, HEADER)
        header["version"], header["count"], header["sys_uptime"] = 5, hi - lo, UPTIME_MS
        header["unix_secs"] = export[k] // 1_000_000
        header["unix_nsecs"] = export[k] % 1_000_000 * 1000
        header["flow_sequence"] = (sequence + lo) % _U32
        out.append(header.tobytes() + records[lo:hi].tobytes())
    return out


def parse_udp_target(text: str) -> tuple[str, int]:
    """``udp://HOST:PORT`` -> (host, port); an :class:`ExportError` for anything else."""
    body = text.removeprefix("udp://")
    host, _, port = body.rpartition(":")
    if not text.startswith("udp://") or not host or not port.isdigit() \
            or not 0 < int(port) < 65536:
        raise ExportError(f"{text!r}: expected udp://HOST:PORT")
    return host.strip("[]"), int(port)


def send(packets: list[bytes], host: str, port: int, per_second: float = 2000.0) -> None:
    """Send the datagrams to a collector, at most ``per_second`` of them a second (a
    collector's socket buffer drops what arrives faster than it reads)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        start = time.monotonic()
        for k, packet in enumerate(packets):
            sock.sendto(packet, (host, port))
            wait = start + (k + 1) / per_second - time.monotonic()
            if wait > 0:
                time.sleep(wait)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m graphcep.io.netflow_v5",
        description="Send the edges of a file to a NetFlow v5 collector over UDP.")
    parser.add_argument("edges", help="an edge file graphcep reads (IPv4 src and dst)")
    parser.add_argument("target", help="udp://HOST:PORT of the collector")
    parser.add_argument("--format", "-f", help="the file's format (default: from its name)")
    parser.add_argument("--per-second", type=float, default=2000.0,
                        help="datagrams sent a second at most (default 2000)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from graphcep.io.readers import read_edges

    args = _arguments(argv)
    try:
        host, port = parse_udp_target(args.target)
        edges = read_edges(args.edges, args.format).edges
        packets = datagrams(edges)
        send(packets, host, port, args.per_second)
    except (ExportError, ValueError, OSError) as err:
        print(f"netflow_v5: {err}", file=sys.stderr)
        return 2
    print(f"sent {edges.num_rows} flows in {len(packets)} datagrams to {host}:{port}")
    return 0


def iter_records(packet: bytes) -> Iterator[np.void]:
    """The records of one datagram (the tests' reader of what was sent)."""
    header = np.frombuffer(packet[:HEADER.itemsize], HEADER)[0]
    yield from np.frombuffer(packet[HEADER.itemsize:], RECORD)[: int(header["count"])]


if __name__ == "__main__":
    sys.exit(main())
