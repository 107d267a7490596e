"""Flow formats in Kafka values, and goflow2 end to end.

Oracles: FlowMessage bytes from the tests' encoder written from the wire-format spec
(:mod:`tests.io.flow_encoding`); for the end-to-end run, ``graphcep run`` over the same
flows written as JSON lines (the batch run, itself checked against brute force
elsewhere).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.cli import main
from graphcep.io.netflow_v5 import datagrams, send
from graphcep.runtime.streaming.kafka_source import KafkaSource
from tests.io.flow_encoding import delimited, encode
from tests.kafka.broker import free_port
from tests.kafka.test_kafka_source import (
    TRIANGLE,
    match_keys,
    records,
    stream_command,
    stream_rows,
)

GOFLOW2_MODULE = "github.com/netsampler/goflow2/v2/cmd/goflow2"
GOFLOW2_VERSION = "v2.2.6"


def flow(src: str, dst: str, start_ns: int, **extra: int) -> bytes:
    return encode({"src_addr": bytes(map(int, src.split("."))),
                   "dst_addr": bytes(map(int, dst.split("."))),
                   "time_flow_start_ns": start_ns, **extra})


def test_goflow2_protobuf_values_plain_and_length_prefixed():
    """One plain message; two length-prefixed ones (goflow2's -format bin); a tombstone;
    a value of garbage; a message without an address: the rejects name their record and
    the message's place in it."""
    a = flow("10.0.0.1", "10.0.0.2", 1_000_000_000, src_port=80)
    b = flow("10.0.0.2", "10.0.0.3", 2_000_000_000)
    c = flow("10.0.0.3", "10.0.0.1", 3_000_000_000)
    no_dst = encode({"src_addr": b"\x01\x01\x01\x01", "time_flow_start_ns": 5})
    rows = records([a, delimited(b) + delimited(c), None, b"\xff\xff\xff", delimited(a) +
                    delimited(no_dst)], [0, 0, 1, 1, 1], [0] * 5)
    source = KafkaSource([("h", 1)], ["flows"], fmt="goflow2-pb")
    edges, rejects, lines = source.parse_records(rows, 10)
    assert lines == 6  # 1 + 2 + 0 + 1 + 2 messages
    assert [(e["t"], e["src"], e["dst"], e["seq"], e["src_port"]) for e in edges.to_pylist()] == [
        (1_000_000, "10.0.0.1", "10.0.0.2", 10, 80), (2_000_000, "10.0.0.2", "10.0.0.3", 11, 0),
        (3_000_000, "10.0.0.3", "10.0.0.1", 12, 0), (1_000_000, "10.0.0.1", "10.0.0.2", 14, 80)]
    got = [(r["file"], r["partition"], r["offset"], r["line"]) for r in rejects.to_pylist()]
    assert got == [("flows/1@1", 1, 1, 1), ("flows/1@2", 1, 2, 2)]
    reasons = rejects.column("reason").to_pylist()
    assert reasons[0].startswith("not a protobuf FlowMessage")
    assert reasons[1].startswith("field 7 (dst_addr): absent")


def test_kafka_time_replaces_a_flow_messages_start():
    rows = records([flow("1.1.1.1", "2.2.2.2", 7), flow("2.2.2.2", "3.3.3.3", 8)], [0, 1],
                   [5000, 6250])
    source = KafkaSource([("h", 1)], ["flows"], fmt="goflow2-pb", time_from_kafka=True)
    edges, _, _ = source.parse_records(rows, 1)
    assert edges.column("t").to_pylist() == [5_000_000, 6_250_000]


def test_zeek_conn_values_are_lines():
    tagged = b'{"conn":{"ts":1.5,"uid":"C1","id.orig_h":"a","id.resp_h":"b"}}'
    rows = records([tagged + b"\n" + b'{"ts":2.25,"id.orig_h":"b","id.resp_h":"c"}\n',
                    b'{"ts":3,"id.orig_h":"c"}'], [0, 1], [0, 0])
    source = KafkaSource([("h", 1)], ["flows"], fmt="zeek-conn")
    edges, rejects, lines = source.parse_records(rows, 1)
    assert lines == 3
    assert [(e["t"], e["src"], e["dst"]) for e in edges.to_pylist()] == [
        (1_500_000, "a", "b"), (2_250_000, "b", "c")]
    assert rejects.select(["file", "line", "reason"]).to_pylist() == [
        {"file": "flows/1@0", "line": 1, "reason": "missing field id.resp_h"}]


# -- goflow2 end to end -------------------------------------------------------------------


@pytest.fixture(scope="session")
def goflow2_binary() -> Path:
    """goflow2, built once with ``go install`` into graphcep's cache (skipped, saying so,
    where Go is absent)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "graphcep" / "goflow2" / GOFLOW2_VERSION
    binary = folder / "goflow2"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain to build goflow2 with (go install "
                    f"{GOFLOW2_MODULE}@{GOFLOW2_VERSION})")
    folder.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([go, "install", f"{GOFLOW2_MODULE}@{GOFLOW2_VERSION}"],
                           env={**os.environ, "GOBIN": str(folder)}, capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, f"go install goflow2 failed: {build.stderr[-2000:]}"
    return binary


def ipv4_flows(count: int, vertices: int, seed: int) -> list[dict]:
    """Flows between ``vertices`` IPv4 hosts, about half a second apart; half start on a
    whole millisecond, half at any microsecond (each then its own datagram); durations
    of whole milliseconds, as NetFlow v5 has them."""
    rng = random.Random(seed)
    base = 1_767_225_600_000_000  # 2026-01-01 in microseconds
    flows, t = [], base
    for _ in range(count):
        t += rng.randrange(1, 1000) * 1000 + rng.choice([0, rng.randrange(1000)])
        src, dst = rng.sample(range(vertices), 2)
        flows.append({"t": t, "dur": rng.randrange(0, 5000) * 1000,
                      "src": f"10.1.0.{src + 1}", "dst": f"10.1.0.{dst + 1}",
                      "src_port": rng.randrange(1, 65536), "dst_port": 443, "proto": 6})
    return flows


def count_messages(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count"})
    try:
        total = 0
        for part in (0, 1):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def udp_bound(port: int, proc: subprocess.Popen, seconds: float = 60) -> None:
    """Wait until a UDP socket is bound to ``port`` on this machine (``/proc/net/udp``;
    elsewhere two seconds), ``proc`` still running: a fixed wait lost datagrams when a
    loaded machine started goflow2 late."""
    udp = Path("/proc/net/udp")
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        if not udp.exists():
            time.sleep(2)
            return
        ports = {int(line.split()[1].rsplit(":", 1)[1], 16)
                 for line in udp.read_text().splitlines()[1:] if line.strip()}
        if port in ports:
            return
        assert time.monotonic() < deadline, f"goflow2 did not listen on UDP port {port}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.spark
def test_goflow2_to_kafka_equals_the_batch_run(spark, kafka_broker, goflow2_binary, tmp_path,
                                               capsys):
    """Flows sent as NetFlow v5 datagrams to goflow2 on a loopback UDP port, published by
    goflow2 as length-prefixed protobuf to a two-partition topic: ``graphcep stream
    --format goflow2-pb`` reports the matches ``graphcep run`` finds on the flows."""
    flows = ipv4_flows(400, 7, seed=4)
    topic = "goflow2-flows"
    kafka_broker.create_topic(topic, partitions=2)
    port = free_port()  # a TCP port free now; goflow2's UDP port on it is free as well
    proc = subprocess.Popen(
        [str(goflow2_binary), "-listen", f"netflow://127.0.0.1:{port}", "-format", "bin",
         "-transport", "kafka", "-transport.kafka.brokers", kafka_broker.bootstrap,
         "-transport.kafka.topic", topic, "-transport.kafka.flushfreq", "200ms",
         "-addr", "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        udp_bound(port, proc)  # a datagram sent before goflow2 listens is lost
        send(datagrams(pa.Table.from_pylist(flows)), "127.0.0.1", port, per_second=500)
        deadline = time.monotonic() + 60
        while count_messages(kafka_broker.bootstrap, topic) < len(flows):
            assert time.monotonic() < deadline, "goflow2 did not publish every flow"
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(20)
    stream = tmp_path / "flows.jsonl"
    stream.write_text("".join(json.dumps(
        {"t": f"{f['t'] // 10**6}.{f['t'] % 10**6:06d}", "src": f["src"], "dst": f["dst"],
         "dur": f"{f['dur'] // 10**6}.{f['dur'] % 10**6:06d}"}) + "\n" for f in flows))
    out = tmp_path / "run.jsonl"
    assert main(["run", str(TRIANGLE), "--input", str(stream), "--format", "jsonl",
                 "--engine", "local", "--output", str(out)]) == 0
    capsys.readouterr()
    expected = match_keys([json.loads(line) for line in out.read_text().splitlines()])
    code = main(stream_command(TRIANGLE, kafka_broker, topic, tmp_path, "goflow2-pb", "--once",
                               "--max-records-per-batch", "150", "--lateness", "3600"))
    out_text, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    summary = json.loads(out_text.strip().splitlines()[-1])
    assert summary["edges"] == len(flows) and summary["late"] == 0
    assert match_keys(stream_rows(tmp_path / "out")) == expected
    assert len(expected) > 5
