"""goflow2 protobuf decode rate on one core (target: 1,000,000 flow records/s).

Run ``python -m bench.flow_decode [--records 2000000] [--repeat 5] [--record]`` from the
repository root.

The messages are goflow2 v2 ``FlowMessage`` s as goflow2 writes NetFlow v5 flows (type,
sequence number, sampler address, receive/start/end times in ns, bytes, packets, IPv4
addresses, etype, proto, ports, interfaces, tos, tcp flags, AS numbers, prefix lengths,
next hop: about 90 bytes each), 50,000 distinct ones repeated, each length-prefixed as
goflow2's ``-format bin`` writes them to Kafka. Three rows, each on one thread (numba's
kernels run on the calling thread; pinned to one core with ``os.sched_setaffinity``
where the platform has it), best of ``--repeat``:

* kernel: :func:`~graphcep.io.formats.flow_pb.decode_messages` over framed messages (the
  wire format, the addresses as text, the columns);
* file: framing and decoding a goflow2 file's bytes to the edge table
  (:class:`~graphcep.io.formats.flow_pb.FrameReader`);
* Kafka: a micro-batch's values (one message each, length-prefixed) to the edge table
  (:func:`~graphcep.io.formats.flow_pb.value_frames` and
  :func:`~graphcep.io.formats.flow_pb.parse_frames`).
"""

from __future__ import annotations

import argparse
import os
import random
import time

import numpy as np
import pyarrow as pa

from bench.nu_paper import machine_lines
from bench.triangles import record
from graphcep.io.formats.flow_pb import FrameReader, decode_messages, parse_frames, value_frames
from tests.io.flow_encoding import varint  # the wire format, written from the spec

START_MARK = "<!-- bench.flow_decode:start -->"
END_MARK = "<!-- bench.flow_decode:end -->"
DISTINCT = 50_000


def _message(rng: random.Random, i: int) -> bytes:
    """One FlowMessage as goflow2 fills it from a NetFlow v5 record (field numbers of
    goflow2's pb/flow.proto)."""
    start = 1_767_225_600_000_000_000 + i * 1_000_000
    varints = {1: 2, 4: i, 110: start + 5 * 10**9, 111: start, 112: start + rng.randrange(10**9),
               9: rng.randrange(1, 10**7), 10: rng.randrange(1, 10**4), 30: 0x800,
               20: rng.choice([6, 17, 1]), 21: rng.randrange(65536), 22: rng.randrange(65536),
               18: rng.randrange(64), 19: rng.randrange(64), 23: rng.randrange(256),
               26: rng.randrange(64), 14: rng.randrange(65536), 15: rng.randrange(65536),
               16: 24, 17: 16}
    out = bytearray()
    for number, value in varints.items():
        out += varint(number << 3) + varint(value)
    for number in (6, 7, 11, 12):
        out += varint(number << 3 | 2) + b"\x04" + bytes(rng.randrange(256) for _ in range(4))
    return bytes(out)


def messages(count: int) -> list[bytes]:
    rng = random.Random(1)
    distinct = [_message(rng, i) for i in range(DISTINCT)]
    return [distinct[i % DISTINCT] for i in range(count)]


def _best(run, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds (this process, pinned to one core: the CPU
    time is what the core spent on it, whatever else the machine ran)."""
    run()  # numba's kernels loaded (or compiled) before timing
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def measure(count: int, repeat: int) -> list[tuple[str, tuple[float, float], int]]:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    plain = messages(count)
    framed = [varint(len(m)) + m for m in plain]
    data = b"".join(framed)
    buf = np.frombuffer(b"".join(plain), np.uint8)
    lengths = np.array([len(m) for m in plain], np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    values = pa.array(framed, pa.binary())
    numbers = np.arange(1, count + 1, dtype=np.int64)

    def kernel() -> None:
        _, reasons = decode_messages(buf, starts, ends)
        assert not reasons

    def file() -> None:
        edges, rejects = FrameReader().feed(data)
        assert edges.num_rows == count and rejects.num_rows == 0

    def kafka() -> None:
        vbuf, vstarts, vends, _ = value_frames(values)
        edges, _ = parse_frames(vbuf, vstarts, vends, numbers)
        assert edges.num_rows == count

    return [(name, _best(run, repeat), len(data)) for name, run in
            (("kernel (decode_messages)", kernel), ("file bytes -> edge table", file),
             ("Kafka values -> edge table", kafka))]


def report(rows: list[tuple[str, tuple[float, float], int]], count: int, loaded: str) -> str:
    lines = ["## goflow2 protobuf decode rate on one core (`bench/flow_decode.py`)", "",
             f"Command: `.venv/bin/python -m bench.flow_decode --records {count} --record`", "",
             *machine_lines(("numpy", "pyarrow", "numba")), f"- load: {loaded}", "",
             f"{count:,} goflow2 FlowMessages (NetFlow v5 flows, {rows[0][2] / count:.0f} "
             "bytes each with their length prefix), one thread pinned to one core, best "
             "of the timed runs. Target: 1,000,000 records/s per core. On a loaded machine "
             "the wall clock counts the time other processes held the core; the CPU "
             "seconds are the core's own work, the per-core rate.", "",
             "| path | best wall s | records/s (wall) | best CPU s | records/s per CPU s | "
             "MB/s per CPU s | target met (per CPU s) |", "|---|---|---|---|---|---|---|"]
    for name, (wall, cpu), size in rows:
        rate = count / cpu
        lines.append(f"| {name} | {wall:.3f} | {count / wall:,.0f} | {cpu:.3f} | {rate:,.0f} | "
                     f"{size / cpu / 1e6:,.0f} | {'yes' if rate >= 1_000_000 else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.flow_decode",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--load", default="unknown",
                        help="what else ran on the machine, for the record")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    text = report(measure(args.records, args.repeat), args.records, args.load)
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)


if __name__ == "__main__":
    main()
