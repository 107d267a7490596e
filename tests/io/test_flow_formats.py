"""Flow record formats: goflow2 protobuf and JSON, Zeek conn JSON, pmacct JSON, and the
NetFlow v5 exporter.

Oracles: protobuf bytes from the tests' own encoder written from the wire-format spec
(:mod:`tests.io.flow_encoding`); addresses through Python's :mod:`ipaddress`; times from
the texts with :class:`~decimal.Decimal` and :mod:`datetime`; the samples of
``tests/fixtures/flows`` were written by the real collectors (their SOURCE.md) from the
flows of ``make_samples.py``, whose values the decoded ones must equal.
"""

from __future__ import annotations

import datetime as dt
import gzip
import ipaddress
import json
import random
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from graphcep.io.formats import parse_lines
from graphcep.io.formats.flow_pb import decode_messages
from graphcep.io.formats.sniff import is_flow_messages, shape_of
from graphcep.io.netflow_v5 import HEADER, ExportError, datagrams, iter_records
from graphcep.io.readers import read_edges
from tests.io.flow_encoding import delimited, encode, key, varint
from tests.paths import FIXTURES

SAMPLES = FIXTURES / "flows"


def _flows():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FLOWS


FLOWS = _flows()
PROTO_NAMES = {1: "ICMP", 6: "TCP", 17: "UDP"}


def address_text(raw: bytes) -> str:
    """The oracle's text of an address: Python's, with an IPv4-mapped IPv6 address
    dotted as RFC 5952 section 5 (and Go's netip) writes it."""
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return address.compressed


def half_even_us(ns: int) -> int:
    us, rem = divmod(ns, 1000)
    return us + (rem > 500 or (rem == 500 and us % 2 == 1))


def decode(messages: list[bytes]):
    buf = np.frombuffer(b"".join(messages), np.uint8)
    lengths = np.array([len(m) for m in messages], np.int64)
    ends = np.cumsum(lengths)
    return decode_messages(buf, ends - lengths, ends)


def random_address(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(4))
    if kind == 1:  # zero runs of every length and place, for the '::'
        groups = [rng.choice([0, 0, rng.randrange(65536)]) for _ in range(8)]
        return b"".join(g.to_bytes(2, "big") for g in groups)
    if kind == 2:
        return bytes(10) + b"\xff\xff" + bytes(rng.randrange(256) for _ in range(4))
    return bytes(rng.randrange(256) for _ in range(16))


def test_random_flow_messages_decode_to_their_fields():
    """500 messages of random fields, unknown fields of every wire type among them,
    decoded against the encoder's inputs."""
    rng = random.Random(11)
    messages, expected = [], []
    for _ in range(500):
        src, dst = random_address(rng), random_address(rng)
        start = rng.randrange(1, 2**62)
        end = start + rng.choice([0, rng.randrange(10**12)])
        fields = {"type": rng.randrange(5), "src_addr": src, "dst_addr": dst,
                  "time_flow_start_ns": start, "time_flow_end_ns": end,
                  "proto": rng.randrange(256), "src_port": rng.randrange(65536),
                  "dst_port": rng.randrange(65536), "bytes": rng.randrange(2**63),
                  "packets": rng.randrange(2**40), "sampler_address": random_address(rng),
                  "bgp_communities": [rng.randrange(2**32) for _ in range(rng.randrange(3))]}
        body = encode(fields)
        # unknown fields: fixed32 (wire 5), fixed64 (1), bytes (2), varint (0)
        body += key(900, 5) + bytes(4) + key(1000, 1) + bytes(8) + key(3000, 2) + varint(3) \
            + b"abc" + key(77, 0) + varint(2**64 - 1)
        messages.append(body)
        expected.append({"t": half_even_us(start), "dur": half_even_us(end) - half_even_us(start),
                         "src": address_text(src), "dst": address_text(dst),
                         "proto": fields["proto"], "src_port": fields["src_port"],
                         "dst_port": fields["dst_port"], "bytes": fields["bytes"],
                         "packets": fields["packets"], "type": fields["type"],
                         "sampler_address": address_text(fields["sampler_address"])})
    columns, reasons = decode(messages)
    assert reasons == {}
    got = pa.table({name: columns[name] for name in expected[0]}).to_pylist()
    assert got == expected


def test_the_v1_time_fields_are_read_when_the_v2_ones_are_absent():
    base = {"src_addr": b"\x01\x02\x03\x04", "dst_addr": b"\x05\x06\x07\x08"}
    columns, reasons = decode([
        encode({**base, "time_flow_start_ms": 1_700_000_000_123, "time_flow_end_ms": 1_700_000_000_500}),
        encode({**base, "time_flow_start": 1_700_000_000, "time_flow_end": 1_700_000_002}),
        encode({**base, "time_flow_start_ns": 5_000_001_500, "time_flow_start": 9}),
    ])
    assert reasons == {}
    assert columns["t"].to_pylist() == [1_700_000_000_123_000, 1_700_000_000_000_000, 5_000_002]
    assert columns["dur"].to_pylist() == [377_000, 2_000_000, 0]


GOOD = {"src_addr": b"\x0a\x00\x00\x01", "dst_addr": b"\x0a\x00\x00\x02",
        "time_flow_start_ns": 10**18}
AFTER = len(encode(GOOD)) + 1  # the 1-based byte where a field appended to GOOD starts


@pytest.mark.parametrize(("message", "reason"), [
    (encode(GOOD)[:-2], "a varint at byte"),
    (encode(GOOD) + key(6, 2) + varint(9) + b"\x01", f"field 6 at byte {AFTER} of the message "
                                                     "runs past its end"),
    (encode(GOOD) + key(40, 3), "has group start"),
    (encode(GOOD) + key(21, 2) + varint(1) + b"x", f"field 21 at byte {AFTER} of the message "
                                                   "is length-delimited"),
    (encode({**GOOD, "src_addr": b"\x01\x02\x03"}), "field 6 (src_addr): 3 bytes long"),
    (encode({k: v for k, v in GOOD.items() if k != "dst_addr"}), "field 7 (dst_addr): absent"),
    (encode({k: v for k, v in GOOD.items() if k != "time_flow_start_ns"}),
     "no flow start time"),
    (encode({**GOOD, "time_flow_end_ns": 10**18 - 1}), "the flow ends before it starts"),
    (encode({**GOOD, "bytes": 2**63}), "field 9 (bytes): does not fit a signed 64-bit"),
    (encode({k: v for k, v in GOOD.items() if k != "time_flow_start_ns"})
     + key(63, 0) + varint(2**62), "field 63 (time_flow_start_ms): out of range"),
    (b"\x00\x01", "field number 0"),
])
def test_a_malformed_message_is_a_reject_and_its_neighbours_decode(message, reason):
    columns, reasons = decode([encode(GOOD), message, encode(GOOD)])
    assert list(reasons) == [1]
    assert reason in reasons[1]
    assert columns["src"].to_pylist() == ["10.0.0.1", "", "10.0.0.1"]


def _file(tmp_path: Path, data: bytes, name: str = "flows.bin") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("separator", [b"\n", b""])
def test_a_length_prefixed_file_with_or_without_line_ends(tmp_path, separator):
    """goflow2's file transport ends each message with its -transport.file.sep (a '\\n'
    by default, or nothing); chunks of 7 bytes cut every message across reads."""
    messages = [encode({**GOOD, "time_flow_start_ns": 10**18 + i * 10**9, "src_port": i})
                for i in range(50)]
    path = _file(tmp_path, b"".join(delimited(m) + separator for m in messages))
    from graphcep.io.formats.schema import ReaderOptions

    read = read_edges(path, "goflow2-pb", ReaderOptions(chunk_bytes=7))
    assert read.rejects.num_rows == 0 and read.lines_read == 50
    assert read.edges.column("src_port").to_pylist() == list(range(50))
    assert read.edges.column("seq").to_pylist() == list(range(1, 51))


def test_a_truncated_file_keeps_its_whole_messages(tmp_path):
    whole = delimited(encode(GOOD)) + b"\n"
    path = _file(tmp_path, gzip.compress(whole * 3 + whole[:9]), "flows.bin.gz")
    read = read_edges(path, "goflow2-pb")
    assert read.edges.num_rows == 3
    (reject,) = read.rejects.to_pylist()
    assert reject["line"] == 4 and reject["reason"] == (
        f"at byte {3 * len(whole)}: a truncated message: the stream ends 9 bytes into it")
    assert read.lines_read == 4


def test_a_single_message_without_a_line_end_is_read(tmp_path):
    read = read_edges(_file(tmp_path, delimited(encode(GOOD))), "goflow2-pb")
    assert (read.edges.num_rows, read.rejects.num_rows) == (1, 0)


def test_the_goflow2_samples_hold_the_flows_sent():
    """goflow2's own bin and json output of the five flows: every field as sent."""
    pb = read_edges(SAMPLES / "goflow2-v2.2.6.bin", "goflow2-pb")
    js = read_edges(SAMPLES / "goflow2-v2.2.6.json", "goflow2-json")
    assert pb.rejects.num_rows == js.rejects.num_rows == 0
    # goflow2 publishes a datagram's flows in order, datagrams as they come (one worker
    # each): compare as sets of flows
    def key_of(row):
        return row["t"]

    expected = sorted(FLOWS, key=key_of)
    for read, proto in ((pb, lambda p: p), (js, PROTO_NAMES.get)):
        rows = sorted(read.edges.to_pylist(), key=key_of)
        assert [(r["t"], r["dur"], r["src"], r["dst"], r["src_port"], r["dst_port"],
                 r["proto"], r["packets"], r["bytes"], r["tcp_flags"], r["sampler_address"])
                for r in rows] == [
            (f["t"], f["dur"], f["src"], f["dst"], f["srcport"], f["dstport"], proto(f["prot"]),
             f["dPkts"], f["dOctets"], f["tcp_flags"], "127.0.0.1") for f in expected]


def test_the_pmacct_sample_reads_its_texts():
    """nfacctd's JSON: times from its text (UTC: timestamps_utc), to the second as
    nfacctd keeps NetFlow v5 times; ports, bytes, packets as sent."""
    read = read_edges(SAMPLES / "pmacct-1.7.7.json", "pmacct")
    lines = [json.loads(x) for x in (SAMPLES / "pmacct-1.7.7.json").read_text().splitlines()]

    def us(text: str) -> int:
        when = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
        return int(when.timestamp()) * 10**6 + when.microsecond

    assert read.rejects.num_rows == 0
    assert [(r["t"], r["dur"], r["src"], r["port_dst"], r["bytes"], r["ip_proto"])
            for r in read.edges.to_pylist()] == [
        (us(x["timestamp_start"]), us(x["timestamp_end"]) - us(x["timestamp_start"]),
         x["ip_src"], x["port_dst"], x["bytes"], x["ip_proto"]) for x in lines]
    # nfacctd's start of a v5 record: unix_secs - (sys_uptime - First) // 1000 seconds
    packets = datagrams(pa.Table.from_pylist(FLOWS))
    seconds = []
    for packet in packets:
        header = np.frombuffer(packet[:HEADER.itemsize], HEADER)[0]
        seconds += [int(header["unix_secs"]) - ((int(header["sys_uptime"]) - int(r["First"]))
                                                % 2**32) // 1000 for r in iter_records(packet)]
    assert [r["t"] for r in read.edges.to_pylist()] == [s * 10**6 for s in seconds]


def test_the_zeek_sample_reads_exact_times_tagged_and_untagged():
    read = read_edges(SAMPLES / "zeek-conn.json", "zeek-conn")
    lines = [json.loads(x, parse_float=Decimal)
             for x in (SAMPLES / "zeek-conn.json").read_text().splitlines()]
    lines = [x.get("conn", x) for x in lines]

    def us(value) -> int:
        if isinstance(value, str):
            when = dt.datetime.fromisoformat(value)
            return int(when.timestamp()) * 10**6 + when.microsecond
        return int(value * 10**6)

    assert read.rejects.num_rows == 0
    assert [(r["t"], r["dur"], r["src"], r["dst"], r["orig_p"], r["resp_p"], r["uid"])
            for r in read.edges.to_pylist()] == [
        (us(x["ts"]), us(x.get("duration", 0)), x["id.orig_h"], x["id.resp_h"],
         x["id.orig_p"], x["id.resp_p"], x["uid"]) for x in lines]


def test_bad_json_lines_are_rejects_and_the_rest_is_read():
    lines = [
        '{"ts":1.5,"id.orig_h":"a","id.resp_h":"b","id.orig_p":1}',
        '{"ts":2.5,"id.orig_h":"a"',  # cut short
        '[1, 2]',
        '{"ts":"2020-01-01T00:00:00Z","id.orig_h":"b","id.resp_h":"c"}',  # another ts type
        '{"ts":3.5,"id.orig_h":"c","id.resp_h":"a","id.orig_p":"http"}',
        '{"ts":4.5,"id.resp_h":"a"}',
        '{"ts":-1.5,"id.orig_h":"c","id.resp_h":"d","duration":-2.0}',
        '{"ts":5.25,"id.orig_h":"d","id.resp_h":"e","duration":0.5}',
    ]
    edges, rejects = parse_lines(pa.array(lines), np.arange(1, len(lines) + 1), "zeek-conn")
    assert [(e["seq"], e["t"], e["src"], e["dur"]) for e in edges.to_pylist()] == [
        (1, 1_500_000, "a", 0), (4, 1_577_836_800_000_000, "b", 0), (8, 5_250_000, "d", 500_000)]
    reasons = dict(zip(rejects.column("line").to_pylist(), rejects.column("reason").to_pylist(),
                       strict=True))
    assert sorted(reasons) == [2, 3, 5, 6, 7]
    assert reasons[2].startswith("invalid JSON: ")
    assert reasons[3] == "not a JSON object: list"
    assert reasons[5] == "field id.orig_p: not an integer: 'http'"
    assert reasons[6] == "missing field id.orig_h"
    assert reasons[7] == "field duration: negative duration: '-2.0'"


def test_goflow2_json_without_a_start_time_is_a_reject():
    lines = ['{"src_addr":"10.0.0.1","dst_addr":"10.0.0.2","time_flow_start_ns":1000000500}',
             '{"src_addr":"10.0.0.1","dst_addr":"10.0.0.2"}',
             '{"src_addr":"1.1.1.1","dst_addr":"2.2.2.2","time_flow_start_ms":7,'
             '"time_flow_end_ms":6}']
    edges, rejects = parse_lines(pa.array(lines), np.arange(1, 4), "goflow2-json")
    assert edges.column("t").to_pylist() == [1_000_000]  # 1000000.5 us, half-even
    assert rejects.column("reason").to_pylist() == [
        "missing field time_flow_start_ns",
        "the flow ends before it starts (time_flow_end_ns 6000 < 7000 us)"]


def test_sniffing_names_the_flow_formats():
    for name, fmt in (("goflow2-v2.2.6.json", "goflow2-json"), ("zeek-conn.json", "zeek-conn"),
                      ("pmacct-1.7.7.json", "pmacct")):
        assert shape_of((SAMPLES / name).read_text().splitlines()) == fmt
    assert shape_of(['{"conn": {"id.orig_h": "a", "id.resp_h": "b"}}']) == "zeek-conn"
    assert shape_of(['{"src": "a", "dst": "b", "t": 1}']) == "jsonl"
    assert is_flow_messages((SAMPLES / "goflow2-v2.2.6.bin").read_bytes())
    assert not is_flow_messages((SAMPLES / "zeek-conn.json").read_bytes())
    read = read_edges(SAMPLES / "goflow2-v2.2.6.bin", "csv")
    assert read.rejects.column("reason")[0].as_py().endswith(
        "it has the shape of goflow2-pb: pass --format goflow2-pb]")


def v5_flows(packet: bytes) -> list[tuple[int, int, int, int]]:
    """(start us, end us, srcaddr, srcport) of each record, by the collectors' formula."""
    header = np.frombuffer(packet[:HEADER.itemsize], HEADER)[0]
    base_ns = int(header["unix_secs"]) * 10**9 + int(header["unix_nsecs"])
    uptime = int(header["sys_uptime"])
    return [((base_ns - ((uptime - int(r["First"])) % 2**32) * 10**6) // 1000,
             (base_ns - ((uptime - int(r["Last"])) % 2**32) * 10**6) // 1000,
             int(r["srcaddr"]), int(r["srcport"])) for r in iter_records(packet)]


def test_netflow_v5_datagrams_give_back_every_time():
    rng = random.Random(3)
    t = sorted(rng.randrange(10**15, 2 * 10**15) for _ in range(200))
    t[50:60] = [t[50]] * 10  # equal times
    dur = [rng.randrange(0, 10**6) * 1000 for _ in t]
    edges = pa.table({"t": t, "dur": dur, "src": [f"10.0.{i % 256}.{i // 256}" for i in
                                                  range(200)],
                      "dst": ["192.168.0.1"] * 200, "src_port": list(range(200))})
    packets = datagrams(edges)
    got = [flow for packet in packets for flow in v5_flows(packet)]
    assert all(len(packet) <= 24 + 30 * 48 for packet in packets)
    assert [(s, e - s, p) for s, e, _, p in got] == list(zip(t, dur, range(200), strict=True))
    assert [a for _, _, a, _ in got] == [int(ipaddress.ip_address(s)) for s in
                                         edges.column("src").to_pylist()]


@pytest.mark.parametrize(("column", "value", "message"), [
    ("src", "host-1", "is no IPv4 address"),
    ("dur", 1500, "a duration that is not whole milliseconds"),
    ("t", -5, "a time outside 1970-2106"),
])
def test_what_netflow_v5_cannot_carry_is_refused(column, value, message):
    row = {"t": 10**15, "dur": 0, "src": "1.2.3.4", "dst": "5.6.7.8", column: value}
    with pytest.raises(ExportError, match=message):
        datagrams(pa.Table.from_pylist([row]))


def test_graphcep_run_reads_a_goflow2_file(tmp_path, capsys):
    """The five sample flows hold one triangle, found by hand: 10.0.0.1 -> 10.0.0.2 ->
    192.168.1.20 -> 10.0.0.1, the first three flows, within a second."""
    from graphcep.cli import main
    from tests.paths import EXAMPLES

    out = tmp_path / "m.jsonl"
    code = main(["run", str(EXAMPLES / "triangle.sal"), "--input",
                 str(SAMPLES / "goflow2-v2.2.6.bin"), "--format", "goflow2-pb", "--engine",
                 "local", "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    (match,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["src"], e["dst"]) for e in match["edges"]] == [
        ("10.0.0.1", "10.0.0.2"), ("10.0.0.2", "192.168.1.20"), ("192.168.1.20", "10.0.0.1")]


def test_goflow2_pb_from_a_socket_is_refused_in_one_line(tmp_path, capsys):
    from graphcep.cli import main
    from tests.paths import EXAMPLES

    code = main(["stream", str(EXAMPLES / "triangle.sal"), "--source", "tcp://127.0.0.1:9",
                 "--format", "goflow2-pb", "--checkpoint", str(tmp_path / "ck")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "--format goflow2-pb holds binary messages, not lines" in err


def test_an_arriving_goflow2_file_reads_as_a_file_does():
    """The streaming file source's reader (bytes in memory, gzip or not)."""
    from graphcep.io.readers import read_edges_bytes

    data = (SAMPLES / "goflow2-v2.2.6.bin").read_bytes()
    on_disk = read_edges(SAMPLES / "goflow2-v2.2.6.bin", "goflow2-pb").edges
    for content in (data, gzip.compress(data)):
        read = read_edges_bytes("flows.bin", content, "goflow2-pb")
        assert read.edges.equals(on_disk) and read.lines_read == 5


def test_a_length_prefix_of_gigabytes_ends_the_read_at_once(tmp_path):
    """A damaged length prefix claiming 2**40 bytes is no frame (waiting for its bytes
    would hold the whole file in memory): the messages before it stand."""
    whole = delimited(encode(GOOD)) + b"\n"
    path = _file(tmp_path, whole * 2 + varint(2**40) + whole * 3)
    read = read_edges(path, "goflow2-pb")
    assert read.edges.num_rows == 2
    (reason,) = read.rejects.column("reason").to_pylist()
    assert reason.startswith(f"at byte {2 * len(whole)}: bytes that are no length-prefixed "
                             "FlowMessage")


def test_a_time_read_by_a_guess_is_said_once_per_file(tmp_path):
    """pmacct's zone-less text is read as UTC, Zeek's integer ts as milliseconds: each
    file says so in one note; times naming their zone say nothing."""
    from graphcep.io.formats.schema import InputNote

    with pytest.warns(InputNote, match="pmacct's timestamp_start names no zone") as notes:
        read_edges(SAMPLES / "pmacct-1.7.7.json", "pmacct")
    assert len([n for n in notes if issubclass(n.category, InputNote)]) == 1
    zeek = tmp_path / "conn.json"
    zeek.write_text('{"ts":1700000000123,"id.orig_h":"a","id.resp_h":"b"}\n')
    with pytest.warns(InputNote, match="read as milliseconds"):
        assert read_edges(zeek, "zeek-conn").edges.column("t").to_pylist() == [
            1_700_000_000_123_000]
    zoned = tmp_path / "zoned.json"
    zoned.write_text('{"ip_src":"a","ip_dst":"b","timestamp_start":"2024-01-31T12:00:00Z"}\n')
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", InputNote)
        assert read_edges(zoned, "pmacct").edges.num_rows == 1
