"""``graphcep stream --source kafka://...`` against a real broker.

Oracle: ``graphcep run`` over the same edges written to a file (the batch run, itself
checked against brute force elsewhere). Matches are compared by their edges' (t, src,
dst), as ``seq`` numbers a file's lines and a stream's arrivals differently; every edge
has a time of its own, so the edges name a match.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.cli import main
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming import kafka_jars
from graphcep.runtime.streaming.kafka_source import (
    KafkaSource,
    kafka_options,
    parse_kafka_uri,
    starting_offsets,
)

REPO = Path(__file__).resolve().parents[2]
TRIANGLE = REPO / "examples" / "triangle.sal"
DDST = ("QUERY spread; VERTICES A, B, C;\n"
        "EDGES AB: A -> B; CA: C -> A;\nORDER AB < CA; WITHIN 20 s;\n")


# -- without a broker -------------------------------------------------------------------


def test_the_connector_is_the_pinned_pyspark_s():
    """Spark's Kafka connector must be built for the PySpark graphcep pins and runs."""
    import re
    from importlib import metadata

    pin = re.search(r'"pyspark==([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert kafka_jars.CONNECTOR_VERSION == pin == metadata.version("pyspark")


def test_the_source_address_and_options_are_checked():
    assert parse_kafka_uri("kafka://a:1,b/t1,t.2") == ([("a", 1), ("b", 9092)], ["t1", "t.2"])
    for bad in ("kafka://host", "kafka:///topic", "kafka://h:0/t", "kafka://h:x/t",
                "kafka://h/t t", "kafka://h/a,,b"):
        with pytest.raises(QueryError, match="expected kafka://BROKER"):
            parse_kafka_uri(bad)
    assert starting_offsets("latest") == {"startingOffsets": "latest"}
    latest = {"startingOffsetsByTimestampStrategy": "latest"}
    assert starting_offsets("2026-01-01T00:00:01") == {"startingTimestamp": "1767225601000",
                                                        **latest}
    assert starting_offsets("2026-01-01T01:00:00+01:00") == {
        "startingTimestamp": "1767225600000", **latest}
    with pytest.raises(QueryError, match="--starting-offsets 'soon'"):
        starting_offsets("soon")
    assert kafka_options(["kafka.isolation.level=read_committed", "failOnDataLoss=false"]) \
        == {"kafka.isolation.level": "read_committed", "failOnDataLoss": "false"}
    with pytest.raises(QueryError, match="graphcep sets it from --max-records-per-batch"):
        kafka_options(["maxOffsetsPerTrigger=5"])
    with pytest.raises(QueryError, match="expected KEY=VALUE"):
        kafka_options(["isolation"])


def records(values: list[bytes], partitions: list[int], stamps_ms: list[int]) -> pa.Table:
    """Rows as Spark's Kafka source gives them (offsets counted per partition)."""
    offsets, seen = [], {}
    for p in partitions:
        offsets.append(seen.get(p, 0))
        seen[p] = offsets[-1] + 1
    stamps = [dt.datetime.fromtimestamp(ms / 1000, dt.UTC) for ms in stamps_ms]
    return pa.table({"topic": ["flows"] * len(values),
                     "partition": pa.array(partitions, pa.int32()),
                     "offset": pa.array(offsets, pa.int64()),
                     "timestamp": pa.array(stamps, pa.timestamp("us", tz="UTC")),
                     "value": pa.array(values, pa.binary())})


def test_records_are_cut_into_lines_and_bad_lines_name_their_record():
    """Several lines per record, a final line end, a tombstone, a bad line in the middle
    of a record: the edges and rejects written out by hand."""
    rows = records([b'{"src":"a","dst":"b","t":1}\n{"src":"b","dst":"c","t":2}\n',
                    None, b'{"src":"c","dst":"a","t":3}\nnot json\n{"src":"a","dst":"c","t":4}',
                    b'{"src":"x"}'],
                   [0, 0, 1, 1], [5000, 6000, 7000, 8000])
    edges, rejects, lines = KafkaSource([("h", 1)], ["flows"]).parse_records(rows, 100)
    assert lines == 7  # 2 + 1 (empty) + 3 + 1
    assert [(e["t"], e["src"], e["dst"], e["seq"]) for e in edges.to_pylist()] == [
        (1_000_000, "a", "b", 100), (2_000_000, "b", "c", 101), (3_000_000, "c", "a", 103),
        (4_000_000, "a", "c", 105)]
    assert [(r["file"], r["topic"], r["partition"], r["offset"], r["line"], r["text"])
            for r in rejects.to_pylist()] == [
        ("flows/1@0", "flows", 1, 0, 2, "not json"), ("flows/1@1", "flows", 1, 1, 1,
                                                      '{"src":"x"}')]
    assert rejects.column("reason").to_pylist()[1] == "missing field t"


@pytest.mark.parametrize("seed", range(6))
def test_executor_tasks_number_lines_as_the_driver_numbers_the_batch(seed):
    """A micro-batch's records over three partitions cut into task parts at random (a
    part may hold the end of one partition and the start of the next), read by separate
    copies of the source in a random order, numbered by the cells from the parts'
    chunks: the edges, their ``seq`` and the rejects are those the driver mode gets by
    parsing the whole batch in (topic, partition, offset) order after 40 earlier lines."""
    from graphcep.runtime.streaming.cells import CellState, _in_stream_order

    rng = random.Random(seed)
    values, partitions = [], []
    for _ in range(60):
        lines = [json.dumps({"src": f"v{rng.randrange(5)}", "dst": f"v{rng.randrange(5)}",
                             "t": rng.randrange(1000)}) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            lines.insert(rng.randrange(len(lines) + 1), "not json")
        values.append(None if rng.random() < 0.05 else "\n".join(lines).encode())
        partitions.append(rng.randrange(3))
    rows = records(values, partitions, [0] * len(values))
    rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
    cuts = sorted(rng.sample(range(1, rows.num_rows), 5))
    parts = [rows.slice(a, b - a)
             for a, b in zip([0, *cuts], [*cuts, rows.num_rows], strict=True)]
    rng.shuffle(parts)
    read = [KafkaSource([("h", 1)], ["flows"]).read_part(part) for part in parts]
    state = CellState(lines=40)
    edges = _in_stream_order(pa.concat_tables([p.edges for p in read]),
                             [{"chunks": p.chunks} for p in read], state)
    driver_edges, driver_rejects, lines = KafkaSource([("h", 1)], ["flows"]).parse_records(
        rows, 41)
    assert state.lines == 40 + lines == 40 + sum(p.lines for p in read)
    assert sorted(edges.select(["seq", "t", "src", "dst"]).to_pylist(),
                  key=lambda e: e["seq"]) == driver_edges.select(
        ["seq", "t", "src", "dst"]).to_pylist()
    rejects = pa.concat_tables([p.rejects for p in read])
    assert sorted(rejects.to_pylist(), key=lambda r: (r["partition"], r["offset"])) == \
        driver_rejects.to_pylist()


def test_executors_over_kafka_refuse_a_query_reading_more_fields_in_one_line():
    """The cells fix the types of the fields the query reads when the stream starts,
    and Kafka records cannot be sampled then."""
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.runtime.streaming.cells_run import attributes_for

    source = KafkaSource([("h", 1)], ["flows"])
    plain = SubgraphJob.create(parse_program("SUBGRAPH pair { a e b; b f c; }"))
    assert attributes_for(plain, source).names == []
    job = SubgraphJob.create(parse_program("SUBGRAPH big { a e b; e.bytes > 100; }"))
    with pytest.raises(QueryError, match=r"lacks bytes: use --matching driver") as caught:
        attributes_for(job, source)
    assert "Kafka records, which cannot be sampled" in str(caught.value)


def test_a_binary_message_is_a_reject_and_the_rest_is_read():
    rows = records([b'\xff\xfe{"src":1}', b'{"src":"a","dst":"b","t":1}'], [0, 0], [0, 0])
    edges, rejects, _ = KafkaSource([("h", 1)], ["flows"]).parse_records(rows, 1)
    assert edges.column("src").to_pylist() == ["a"]
    assert rejects.select(["file", "reason"]).to_pylist() == [
        {"file": "flows/0@0", "reason": "invalid UTF-8 (at byte 1)"}]


def test_kafka_time_replaces_the_lines_time():
    """``--time kafka``: each edge's t is its record's timestamp, a JSON line needs no t;
    a CSV line keeps its time field, replaced."""
    rows = records([b'{"src":"a","dst":"b"}\n{"src":"b","dst":"c","t":99}', b'{"dst":"c"}'],
                   [0, 1], [5000, 6250])
    source = KafkaSource([("h", 1)], ["flows"], time_from_kafka=True)
    edges, rejects, _ = source.parse_records(rows, 1)
    assert edges.column("t").to_pylist() == [5_000_000, 5_000_000]
    assert rejects.column("reason").to_pylist() == ["missing field src"]
    assert rejects.column("text").to_pylist() == ['{"dst":"c"}']  # as it arrived
    csv = KafkaSource([("h", 1)], ["flows"], fmt="csv", time_from_kafka=True)
    edges, _, _ = csv.parse_records(records([b"a,b,1\nb,c,2"], [0], [7500]), 1)
    assert edges.column("t").to_pylist() == [7_500_000, 7_500_000]


def test_a_csv_header_is_recognised_in_the_first_records():
    """The layout is fixed from the first lines a run reads: a header there names the
    columns (here in another order than src, dst, t) for every later record."""
    rows = records([b"dst,t,src\nb,1,a", b"c,2,b\nnot,a,time"], [0, 0], [0, 0])
    source = KafkaSource([("h", 1)], ["flows"], fmt="csv")
    edges, rejects, lines = source.parse_records(rows, 1)
    assert [(e["t"], e["src"], e["dst"]) for e in edges.to_pylist()] == [
        (1_000_000, "a", "b"), (2_000_000, "b", "c")]
    assert (lines, rejects.column("offset").to_pylist()) == (4, [1])
    later = records([b"d,3,c"], [1], [0])  # the next micro-batch: the same layout
    assert source.parse_records(later, 5)[0].column("dst").to_pylist() == ["d"]


def test_the_connector_comes_from_the_option_the_environment_or_the_cache(tmp_path,
                                                                          monkeypatch):
    from graphcep.runtime.streaming.kafka_source import jars_for

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(kafka_jars.JARS_ENV, raising=False)
    assert jars_for(None) is None  # nothing fetched: Spark downloads it
    source = KafkaSource([("h", 1)], ["t"])
    assert source.spark_conf() == {
        "spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}
    fetched = kafka_jars.connector_dir()
    fetched.mkdir(parents=True)
    (fetched / "spark-sql-kafka-0-10_2.13-4.2.0.jar").write_bytes(b"")
    (fetched / "kafka-clients-3.9.2.jar").write_bytes(b"")
    assert jars_for(None) == str(fetched)
    monkeypatch.setenv(kafka_jars.JARS_ENV, str(tmp_path / "env"))
    assert jars_for(None) == str(tmp_path / "env")
    assert jars_for(str(tmp_path / "opt")) == str(tmp_path / "opt")
    source.jars_dir = str(fetched)
    assert source.spark_conf() == {"spark.jars": ",".join(
        str(fetched / name) for name in ("kafka-clients-3.9.2.jar",
                                         "spark-sql-kafka-0-10_2.13-4.2.0.jar"))}
    source.jars_dir = str(tmp_path)
    with pytest.raises(QueryError, match="holds no spark-sql-kafka-0-10 jar"):
        source.spark_conf()


def test_an_unreachable_broker_is_one_line_and_status_2_within_seconds(tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    code = main(["stream", str(TRIANGLE), "--source", f"kafka://127.0.0.1:{port}/flows",
                 "--checkpoint", str(tmp_path / "ck"), "--once"])
    err = capsys.readouterr().err
    assert code == 2
    assert time.monotonic() - started < 15
    assert err.strip().count("\n") == 0, err
    assert f"kafka://127.0.0.1:{port}/flows: no Kafka broker answers: 127.0.0.1:{port} " \
           "(Connection refused)" in err


def test_kafka_options_with_another_source_are_refused(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    code = main(["stream", str(TRIANGLE), "--source", str(tmp_path / "in"), "--checkpoint",
                 str(tmp_path / "ck"), "--once", "--starting-offsets", "latest"])
    assert code == 2
    assert "--starting-offsets shapes a Kafka source" in capsys.readouterr().err
    code = main(["stream", str(TRIANGLE), "--source", str(tmp_path / "in"), "--checkpoint",
                 str(tmp_path / "ck"), "--once", "--output", "kafka://127.0.0.1:9092/m"])
    assert code == 2  # a Kafka output (tests/kafka/test_kafka_sink.py), its broker absent
    assert "kafka://127.0.0.1:9092: no Kafka broker answers" in capsys.readouterr().err
    assert not Path("kafka:").exists()
    code = main(["stream", str(TRIANGLE), "--source", "kafka://127.0.0.1:1/t", "--checkpoint",
                 str(tmp_path / "ck"), "--max-files-per-trigger", "3"])
    assert code == 2
    assert "--max-files-per-trigger counts the files of a directory source; a Kafka " \
           "source's micro-batches are cut by --max-records-per-batch" in capsys.readouterr().err


# -- with the broker --------------------------------------------------------------------


@pytest.mark.slow
def test_the_executor_mode_refuses_what_only_the_driver_does(kafka_broker, tmp_path, capsys):
    kafka_broker.create_topic("executors-loss", partitions=1)  # a topic the broker has
    code = main(["stream", str(TRIANGLE), "--source",
                 f"kafka://{kafka_broker.bootstrap}/executors-loss", "--checkpoint",
                 str(tmp_path / "ck"), "--matching", "executors", "--on-data-loss", "report"])
    assert code == 2
    assert "--matching executors: --on-data-loss report compares each micro-batch's " \
           "offsets in the driver; use --matching driver" in capsys.readouterr().err


def random_edges(count: int, vertices: int, seed: int) -> list[dict]:
    """Edges one second apart (every time distinct), endpoints drawn at random."""
    rng = random.Random(seed)
    edges = []
    for i in range(count):
        src, dst = rng.sample(range(vertices), 2)
        edges.append({"t": i + 1, "src": f"v{src}", "dst": f"v{dst}"})
    return edges


def as_line(edge: dict, fmt: str) -> str:
    return json.dumps(edge) if fmt == "jsonl" else f"{edge['src']},{edge['dst']},{edge['t']}"


def produce_edges(broker, topic: str, edges: list[dict], fmt: str, seed: int,
                  bad: bytes | None = None) -> None:
    """Edge ``i`` to partition ``i % 2``; each message holds one to three consecutive
    lines of its partition; ``bad`` goes to partition 1 after its first message."""
    rng = random.Random(seed)
    messages: list[tuple[int, bytes]] = []
    for part in (0, 1):
        lines = [as_line(e, fmt) for e in edges[part::2]]
        while lines:
            take = rng.randint(1, 3)
            messages.append((part, ("\n".join(lines[:take]) + "\n").encode()))
            lines = lines[take:]
            if part == 1 and bad is not None:
                messages.append((1, bad))
                bad = None
    broker.create_topic(topic, partitions=2)
    broker.produce(topic, messages)


def batch_run(query: Path, edges: list[dict], fmt: str, tmp_path: Path, capsys) -> set:
    """``graphcep run``'s matches over the edges written to a file."""
    stream = tmp_path / f"edges.{'jsonl' if fmt == 'jsonl' else 'csv'}"
    stream.write_text("".join(as_line(e, fmt) + "\n" for e in edges))
    out = tmp_path / "run.jsonl"
    code = main(["run", str(query), "--input", str(stream), "--format", fmt,
                 "--engine", "local", "--output", str(out)])
    assert code == 0, capsys.readouterr().err[-2000:]
    capsys.readouterr()
    return match_keys([json.loads(line) for line in out.read_text().splitlines()])


def match_keys(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((e["t"], e["src"], e["dst"]) for e in row["edges"]))
                  for row in rows)


def stream_rows(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]


def stream_command(query: Path, broker, topic: str, work: Path, fmt: str, *extra: str) -> list:
    return ["stream", str(query), "--source", f"kafka://{broker.bootstrap}/{topic}",
            "--format", fmt, "--checkpoint", str(work / "ck"), "--output",
            str(work / "out") + "/", "--quiet", "--summary", "json", *extra]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("kind", ["sal", "ddst"])
def test_kafka_stream_equals_the_batch_run(kind, spark, kafka_broker, tmp_path, capsys):
    """SAL (the triangle) over JSON lines and a DDST query over CSV lines, two partitions,
    several lines per message and one malformed message: ``stream --once`` reports the
    batch run's matches, and the bad message is one reject naming its record."""
    fmt = "jsonl" if kind == "sal" else "csv"
    query = TRIANGLE
    if kind == "ddst":
        query = tmp_path / "spread.ddst"
        query.write_text(DDST)
    edges = random_edges(900, 8 if kind == "sal" else 20, seed=5 if kind == "sal" else 6)
    topic = f"edges-{kind}"
    bad = b'{"src": "v1", "dst": ' if fmt == "jsonl" else b"v1,v2"
    produce_edges(kafka_broker, topic, edges, fmt, seed=7, bad=bad)
    expected = batch_run(query, edges, fmt, tmp_path, capsys)
    code = main(stream_command(query, kafka_broker, topic, tmp_path, fmt, "--once",
                               "--max-records-per-batch", "150", "--lateness", "30"))
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    got = match_keys(stream_rows(tmp_path / "out"))
    assert got == expected
    assert len(expected) > 5
    assert summary["edges"] == len(edges) and summary["late"] == 0
    assert summary["batches"] >= 3  # the record limit cut the topic into micro-batches
    assert summary["partition_lag"] == {f"{topic}/0": 0, f"{topic}/1": 0}  # all read
    (reject,) = stream_rows(tmp_path / "ck" / "rejects")
    assert (reject["topic"], reject["partition"], reject["line"]) == (topic, 1, 1)
    assert reject["offset"] == 1 and reject["text"] == bad.decode()


def match_seqs(rows: list[dict]) -> set[tuple]:
    """Each match's id and its edges' ``seq``: the stream's identity of a match."""
    return {(row["match_id"], tuple(e["seq"] for e in row["edges"])) for row in rows}


@pytest.mark.slow
@pytest.mark.spark
def test_kafka_in_the_executors_equals_the_batch_run_and_the_driver_mode(
        spark, kafka_broker, tmp_path, capsys):
    """The triangle over two partitions, several lines per message, one malformed
    message, in several micro-batches: ``--matching executors`` reports the batch run's
    matches, with the driver mode's match ids and ``seq`` (lines numbered from the start
    of the stream in (topic, partition, offset) order), and the same reject naming its
    record."""
    edges = random_edges(900, 8, seed=11)
    bad = b'{"src": "v1", "dst": '
    produce_edges(kafka_broker, "in-executors", edges, "jsonl", seed=12, bad=bad)
    expected = batch_run(TRIANGLE, edges, "jsonl", tmp_path, capsys)
    found, rejects = {}, {}
    for mode, extra in (("driver", ()), ("executors", ("--cells", "4"))):
        work = tmp_path / mode
        work.mkdir()
        code = main(stream_command(TRIANGLE, kafka_broker, "in-executors", work, "jsonl",
                                   "--once", "--max-records-per-batch", "150",
                                   "--lateness", "30", "--matching", mode, *extra))
        out, err = capsys.readouterr()
        assert code == 0, err[-2000:]
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["matching"].startswith(mode)
        assert (summary["edges"], summary["late"], summary["rejected"]) == (len(edges), 0, 1)
        assert summary["batches"] >= 3  # the record limit cut the topic into micro-batches
        assert summary["partition_lag"] == {"in-executors/0": 0, "in-executors/1": 0}
        rows = stream_rows(work / "out")
        assert match_keys(rows) == expected, mode
        found[mode] = match_seqs(rows)
        (reject,) = stream_rows(work / "ck" / "rejects")
        rejects[mode] = reject
    assert len(expected) > 5 and found["executors"] == found["driver"]
    assert rejects["executors"] == rejects["driver"]
    reject = rejects["executors"]
    assert (reject["topic"], reject["partition"], reject["offset"], reject["line"]) == \
        ("in-executors", 1, 1, 1)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("matching", ["driver", "executors"])
def test_a_killed_kafka_stream_restarts_without_losing_or_repeating(matching, spark,
                                                                   kafka_broker, tmp_path,
                                                                   capsys):
    """SIGKILL ``graphcep stream`` once a micro-batch was written, restart it from its
    checkpoint (``--once``, in this process): the matches equal the batch run's, none
    written twice, in either matching mode."""
    edges = random_edges(1200, 8, seed=8)
    topic = f"killed-{matching}"
    produce_edges(kafka_broker, topic, edges, "jsonl", seed=9)
    expected = batch_run(TRIANGLE, edges, "jsonl", tmp_path, capsys)
    command = stream_command(TRIANGLE, kafka_broker, topic, tmp_path, "jsonl",
                             "--max-records-per-batch", "100", "--lateness", "30",
                             "--master", "local[1]", "--matching", matching)
    env = {**os.environ, kafka_jars.JARS_ENV: str(kafka_jars.connector_dir()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"),
                                                       os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "graphcep.cli", *command], env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    out = tmp_path / "out"
    deadline = time.monotonic() + 150
    while len(list(out.glob("part-*.jsonl"))) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = len(list(out.glob("part-*.jsonl")))
    assert 2 <= written < len(edges) // 100, "the kill did not land mid-stream"
    code = main([*command, "--once"])
    assert code == 0, capsys.readouterr().err[-2000:]
    got = match_keys(stream_rows(out))
    assert len(got) == len(set(got)), "a match was written twice"
    assert got == expected and len(expected) > 5


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("matching", ["driver", "executors"])
def test_kafka_time_and_a_starting_time(matching, spark, kafka_broker, tmp_path, capsys):
    """``--time kafka --starting-offsets ISO``: JSON lines without a time, one per record,
    records one second apart by their Kafka timestamps; the stream starts at the 200th
    second. A third partition holds only older records: it starts at its end. The batch run
    over the records from then on, each with its timestamp as its time, is the oracle, in
    either matching mode."""
    base = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp())
    edges = random_edges(600, 8, seed=10)
    stamps = [(base + e["t"]) * 1000 for e in edges]
    messages = [(2 if e["t"] < 150 and i % 3 == 0 else i % 2,
                 json.dumps({"src": e["src"], "dst": e["dst"]}).encode())
                for i, e in enumerate(edges)]
    topic = f"stamped-{matching}"
    kafka_broker.create_topic(topic, partitions=3)
    kafka_broker.produce(topic, messages, timestamps_ms=stamps)
    start = 200
    kept = [{**e, "t": base + e["t"]} for e in edges if e["t"] >= start]
    expected = batch_run(TRIANGLE, kept, "jsonl", tmp_path, capsys)
    when = dt.datetime.fromtimestamp(base + start, dt.UTC).isoformat()
    code = main(stream_command(TRIANGLE, kafka_broker, topic, tmp_path, "jsonl", "--once",
                               "--time", "kafka", "--starting-offsets", when,
                               "--matching", matching))
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1])["edges"] == len(kept)
    got = match_keys(stream_rows(tmp_path / "out"))
    assert got == expected and len(expected) > 5


class Batch:
    """A micro-batch's rows as Spark hands them to ``foreachBatch`` (its ``toArrow``)."""

    def __init__(self, rows: list[tuple[int, int, bytes]]) -> None:
        partitions, offsets, values = zip(*rows, strict=True)
        self.rows = pa.table({"topic": ["flows"] * len(rows),
                              "partition": pa.array(partitions, pa.int32()),
                              "offset": pa.array(offsets, pa.int64()),
                              "timestamp": pa.array([0] * len(rows), pa.timestamp("us")),
                              "value": pa.array(values, pa.binary())})

    def toArrow(self) -> pa.Table:  # noqa: N802 -- Spark's name
        return self.rows


def test_late_edges_across_partitions_name_their_record(tmp_path):
    """Partition 0 runs ahead, partition 1 lags: the reorder buffer and the lateness apply
    to the stream as a whole, and each late edge's record names its topic, partition and
    offset. The late edges written out by hand (lateness 5 s)."""
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.runtime.streaming.driver import PartWriter, StreamOperator

    def edge(t: int) -> bytes:
        return json.dumps({"src": "a", "dst": "b", "t": t}).encode()

    job = SubgraphJob.create(parse_program(TRIANGLE.read_text()), fmt="jsonl")
    operator = StreamOperator(job, lateness_us=5_000_000,
                              late_sink=PartWriter(tmp_path / "late"))
    source = KafkaSource([("h", 1)], ["flows"])
    batches = [
        [(0, 0, edge(100)), (0, 1, edge(101)), (1, 0, edge(98))],  # frontier 96 after
        [(0, 2, edge(120) + b"\n" + edge(121)), (1, 1, edge(97)),
         (1, 2, edge(90) + b"\n" + edge(95))],  # 90 and 95 late; frontier 116 after
        [(1, 3, edge(110)), (0, 3, edge(130))],  # 110 late
    ]
    for batch_id, rows in enumerate(batches):
        got = source.read_batch(Batch(rows), operator)
        operator.process(batch_id, got.edges, got.rejects, lines=got.lines, names=got.names,
                         places=got.places)
    late = stream_rows(tmp_path / "late")
    assert [(r["t"], r["topic"], r["partition"], r["offset"], r["line"]) for r in late] == [
        (90, "flows", 1, 2, 7), (95, "flows", 1, 2, 8), (110, "flows", 1, 3, 10)]
    assert operator.totals.late == 3 and operator.totals.edges == 10


@pytest.mark.slow
def test_each_partitions_lag_is_its_end_less_what_was_read(kafka_broker, tmp_path):
    """5 records in partition 0, 3 in partition 1; a micro-batch takes offsets 0-1 of the
    first and 0-2 of the second: 3 and 0 records not read; the progress line says so."""
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.runtime.streaming.driver import StreamOperator

    def edge(t: int) -> bytes:
        return json.dumps({"src": "a", "dst": "b", "t": t}).encode()

    kafka_broker.create_topic("lagging", partitions=2)
    kafka_broker.produce("lagging", [(0, edge(t)) for t in range(5)] +
                         [(1, edge(t)) for t in range(3)])
    source = KafkaSource(*parse_kafka_uri(f"kafka://{kafka_broker.bootstrap}/lagging"))
    operator = StreamOperator(SubgraphJob.create(parse_program(TRIANGLE.read_text()),
                                                 fmt="jsonl"))
    batch = Batch([(0, 0, edge(0)), (0, 1, edge(1)), (1, 0, edge(0)), (1, 1, edge(1)),
                   (1, 2, edge(2))])
    batch.rows = batch.rows.set_column(0, "topic", pa.array(["lagging"] * 5))
    got = source.read_batch(batch, operator)
    assert got.partition_lag == {"lagging/0": 3, "lagging/1": 0}
    report = operator.process(0, got.edges, lines=got.lines)
    report.partition_lag = got.partition_lag
    assert report.line().endswith(" | lag lagging/0 3, lagging/1 0")


def test_the_executor_modes_lag_is_each_end_less_the_batch_end_spark_logged(kafka_broker,
                                                                           tmp_path):
    """The executor mode's driver sees no records: after micro-batch 4, whose entry in
    Spark's offsets log (written by hand here, as Spark writes it) ends at offsets 2 and
    3, partitions holding 5 and 3 records have 3 and 0 not read."""
    kafka_broker.create_topic("lagging-cells", partitions=2)
    kafka_broker.produce("lagging-cells", [(0, b"x")] * 5 + [(1, b"x")] * 3)
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "4").write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"lagging-cells":{"1":3,"0":2}}')
    source = KafkaSource(*parse_kafka_uri(f"kafka://{kafka_broker.bootstrap}/lagging-cells"))
    try:
        assert source.lag_after(tmp_path, 4) == {"lagging-cells/0": 3, "lagging-cells/1": 0}
        assert source.lag_after(tmp_path, 5) == {}  # no batch 5 logged: nothing known
    finally:
        source.close()
