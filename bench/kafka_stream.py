"""Kafka benchmark: sustained rate and edge-to-match latency of ``graphcep stream`` reading
a Kafka topic, side by side in one run with its file source and with what a Spark user
writes today over the same topic (Structured Streaming's stream-stream joins).

The stream is :mod:`bench.streaming`'s (the S2 parameters: 25,000 vertices, 60,000 edges
per second of event time, seed 1; the temporal triangle, W = 10 s). A real Apache Kafka
broker (one KRaft node from the jars ``graphcep.runtime.streaming.kafka_jars`` fetches, started as
the tests start it) holds a fresh two-partition topic per run. The feed
(:class:`KafkaFeed`) produces ``src,dst,t`` CSV lines (``t`` in integer microseconds),
``--lines-per-message`` lines a message (default 100, as a batching exporter sends them;
``1`` is goflow2's one flow a message; a comma list runs the ``kafka`` method once per
value, the others take the first), the messages alternating between the partitions,
every 100 ms at a sustained wall-clock rate, and notes when each 100 ms chunk was
acknowledged by the broker. A match's latency runs from the acknowledgement of the chunk
holding its last edge to the moment the match reached the sink.

Partitions interleave: a micro-batch may take a chunk's messages of one partition and not
yet those of the other, so both methods allow 1 s of event time for it (graphcep's
``--lateness``, the join's watermark delay); with the stream's 60,000 edges per event-time
second that is 0.24 s of wall-clock time at 250,000 edges/s. Every run reports the late
edges it dropped (none expected).

Methods (``--methods``):

``kafka``
    ``graphcep stream --source kafka://…`` in process (:class:`KafkaSource`,
    :class:`StreamOperator`, checkpoints on).
``files``
    ``graphcep stream``'s file source over the same stream as Parquet files
    (:func:`bench.streaming.run_graphcep`), for comparison.
``spark-join``
    :func:`bench.streaming.triangle_join` over the topic: the lines split and cast in
    Spark, then the chained interval joins; a match's edges are named by their times.

Correctness: each Kafka run's matches, as ``(t1, t2, t3)`` rows, equal those of the
in-process ``run_local`` over the edges the run processed.

Targets (issue text): >= 250,000 edges/s sustained from Kafka at p99 <= 2 s on
``local[2]``.

Run: ``python -m bench.kafka_stream [--methods kafka,files,spark-join] [--rates
100000,250000,400000] [--join-rates 1000,2500] [--seconds 15] [--history 200000]
[--lines-per-message 100,1] [--record]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.streaming import (
    QUERY_FILE,
    JoinProgress,
    Measured,
    StreamRun,
    Timeline,
    measured,
    results_table,
    run_graphcep,
    s2_like,
    triangle_join,
    wait_for,
)
from bench.triangles import machine_info, record, source_state, triangle_query

START_MARK = "<!-- bench.kafka_stream:start -->"
END_MARK = "<!-- bench.kafka_stream:end -->"
TARGET_RATE = 250_000
TARGET_P99_S = 2.0
LATENESS_US = 1_000_000
PARTITIONS = 2
HISTORY_TIMEOUT_S = 600.0
CATCH_UP_TIMEOUT_S = 30.0
KAFKA = "graphcep stream (Kafka)"
FILES = "graphcep stream (files)"
JOIN = "Spark stream-stream join (Kafka)"
METHODS = {"kafka": KAFKA, "files": FILES, "spark-join": JOIN, "sink": "sink overhead"}


@dataclass
class KafkaFeed:
    """Produce ``edges`` (in stream order) to ``topic`` at ``rate`` edges/s.

    The interface of :class:`bench.stream_feed.Feed` (``files`` holds each chunk's first
    and last *time* and its acknowledgement), so :func:`bench.streaming.measured` turns
    matches seen as ``(wall time, last-edge times)`` into latencies."""

    edges: pa.Table
    bootstrap: str
    topic: str
    rate: float
    lines_per_message: int = 100
    interval: float = 0.1
    started: float = 0.0
    files: list[tuple[int, int, float]] = field(default_factory=list)
    _sizes: list[int] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def produce_all(self) -> None:
        """Produce every edge now, untimed (the history)."""
        producer = self._producer()
        self._send(producer, self.edges)
        producer.flush(120)

    def start(self, seconds: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(seconds,), daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    @property
    def fed(self) -> int:
        return sum(self._sizes)

    def arrival_of(self, times: np.ndarray) -> np.ndarray:
        lasts = np.array([b for _, b, _ in self.files], dtype=np.int64)
        acked = np.array([a for _, _, a in self.files])
        return acked[np.minimum(np.searchsorted(lasts, times, side="left"), len(lasts) - 1)]

    def latencies(self, seen: list[tuple[float, np.ndarray]]) -> np.ndarray:
        if not seen:
            return np.array([])
        return np.concatenate([at - self.arrival_of(times) for at, times in seen])

    def _producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 2,
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})

    def _send(self, producer: Any, chunk: pa.Table) -> None:
        for index, value in enumerate(encode(chunk, self.lines_per_message)):
            producer.produce(self.topic, value=value, partition=index % PARTITIONS)
            producer.poll(0)

    def _run(self, seconds: float) -> None:
        producer = self._producer()
        per_chunk = max(1, int(round(self.rate * self.interval)))
        self.started = time.time()
        offset, index = 0, 0
        while offset < self.edges.num_rows and time.time() - self.started <= seconds:
            pause = self.started + index * self.interval - time.time()
            if pause > 0:
                time.sleep(pause)
            chunk = self.edges.slice(offset, per_chunk)
            self._send(producer, chunk)
            producer.flush(60)
            times = chunk.column("t")
            self.files.append((int(times[0].as_py()), int(times[-1].as_py()), time.time()))
            self._sizes.append(chunk.num_rows)
            offset += per_chunk
            index += 1


def encode(edges: pa.Table, lines_per_message: int) -> list[bytes]:
    """``src,dst,t`` lines, ``lines_per_message`` to a message."""
    text = pc.binary_join_element_wise(
        edges.column("src"), edges.column("dst"), pc.cast(edges.column("t"), pa.string()), ",")
    lines = [s.encode() for s in text.to_pylist()]
    return [b"\n".join(lines[i:i + lines_per_message])
            for i in range(0, len(lines), lines_per_message)]


def match_times(matches: pa.Table) -> np.ndarray:
    """One row per match: the times of its edges, ascending (the triangle's are distinct)."""
    edges = matches.column("edges").combine_chunks()
    if len(edges) == 0:
        return np.empty((0, 3), np.int64)
    times = edges.flatten().field("t").to_numpy()
    return np.sort(times.reshape(len(edges), -1), axis=1)


def new_topic(broker: Any) -> str:
    topic = f"edges-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=PARTITIONS)
    return topic


def run_kafka(spark: Any, broker: Any, table: pa.Table, rate: int, args: argparse.Namespace,
              master: str, workdir: Path) -> Measured:
    """``graphcep stream`` over a fresh topic: the history, the timed feed, then a flush."""
    from graphcep.io.formats import ReaderOptions
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_file
    from graphcep.runtime.streaming.driver import StreamOperator
    from graphcep.runtime.streaming.kafka_source import KafkaSource
    from graphcep.runtime.streaming.query import start_stream

    history = args.history
    topic = new_topic(broker)
    KafkaFeed(table.slice(0, history), broker.bootstrap, topic, 0,
              args.lines_per_message).produce_all()
    feed = KafkaFeed(table.slice(history), broker.bootstrap, topic, rate, args.lines_per_message)
    job = SubgraphJob.create(parse_file(str(QUERY_FILE)))
    StreamOperator(job).process(0, table.slice(0, 50_000))  # numba compiled before the clock
    seen: list[tuple[float, np.ndarray]] = []
    reports: list[Any] = []
    op = StreamOperator(job, lateness_us=LATENESS_US, checkpoint=workdir / "ckpt",
                        threads=spark.sparkContext.defaultParallelism,
                        on_matches=lambda m, _: seen.append((time.time(), match_times(m))))
    host, port = broker.bootstrap.rsplit(":", 1)
    source = KafkaSource([(host, int(port))], [topic], fmt="csv",
                         options=ReaderOptions(time_unit="us"),
                         max_records_per_batch=args.max_records_per_batch)
    query = start_stream(spark, op, source, checkpoint=workdir / "ckpt", on_report=reports.append)
    if not wait_for(lambda: op.totals.edges >= history, HISTORY_TIMEOUT_S, query):
        raise RuntimeError("graphcep did not take the history in time")
    warm = len(reports)
    feed.start(args.seconds)
    feed.join()
    fed_until = time.time()
    wait_for(lambda: op.totals.edges - history >= feed.fed, CATCH_UP_TIMEOUT_S, query)
    marks = Timeline(feed.started, fed_until, time.time())
    query.stop()
    run = measured(KAFKA, master, rate, feed, marks, op.totals.edges - history, seen,
                   [r.seconds for r in reports[warm:] if r.edges_in],
                   f"{args.lines_per_message} lines/message, {PARTITIONS} partitions; "
                   f"lateness {LATENESS_US // 1000} ms; {op.totals.late} late edges")
    op.flush()
    rows = np.concatenate([r for _, r in seen]) if seen else np.empty((0, 3), np.int64)
    return Measured(run, rows, op.totals.edges)


class KafkaJoinProgress(JoinProgress):
    """The join's progress in edges: its input rows are messages."""

    def __init__(self, lines_per_message: int) -> None:
        super().__init__()
        self.lines_per_message = lines_per_message

    @property
    def edges(self) -> int:
        return super().edges * self.lines_per_message


def kafka_edges(spark: Any, bootstrap: str, topic: str) -> Any:
    """The topic's lines as the edge columns the join reads (``seq``: the edge's time)."""
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    lines = raw.select(F.explode(F.split(F.col("value").cast("string"), "\n")).alias("line"))
    parts = F.split("line", ",")
    t = parts.getItem(2).cast("long")
    return lines.select(t.alias("t"), parts.getItem(0).alias("src"),
                        parts.getItem(1).alias("dst"), t.alias("seq"))


def run_join(spark: Any, broker: Any, table: pa.Table, rate: int, args: argparse.Namespace,
             master: str, workdir: Path) -> Measured:
    """The chained stream-stream join over a fresh topic."""
    seen: list[tuple[float, np.ndarray]] = []

    def on_batch(batch: Any, _: int) -> None:
        rows = batch.toArrow()
        if rows.num_rows:
            seen.append((time.time(), np.sort(np.column_stack(
                [rows.column(q).to_numpy() for q in ("q1", "q2", "q3")]), axis=1)))

    history = args.history
    topic = new_topic(broker)
    KafkaFeed(table.slice(0, history), broker.bootstrap, topic, 0,
              args.lines_per_message).produce_all()
    feed = KafkaFeed(table.slice(history), broker.bootstrap, topic, rate, args.lines_per_message)
    progress = KafkaJoinProgress(args.lines_per_message)
    spark.streams.addListener(progress)
    try:
        edges = kafka_edges(spark, broker.bootstrap, topic)
        query = (triangle_join(spark, edges, lateness_us=LATENESS_US).writeStream
                 .outputMode("append").foreachBatch(on_batch)
                 .option("checkpointLocation", str(workdir / "ckpt")).start())
        if not wait_for(lambda: progress.edges >= history, HISTORY_TIMEOUT_S, query):
            raise RuntimeError("the join did not take the history in time")
        warm = len(progress.batches)
        feed.start(args.seconds)
        feed.join()
        fed_until = time.time()
        wait_for(lambda: progress.edges - history >= feed.fed, CATCH_UP_TIMEOUT_S, query)
        marks = Timeline(feed.started, fed_until, time.time())
        query.stop()
    finally:
        spark.streams.removeListener(progress)
    batch_s = [b["durationMs"]["triggerExecution"] / 1000 for b in progress.batches[warm:]
               if b["numInputRows"]]
    run = measured(JOIN, master, rate, feed, marks, progress.edges - history, seen, batch_s,
                   f"{args.lines_per_message} lines/message; watermark delay "
                   f"{LATENESS_US // 1000} ms; " + progress.state())
    rows = np.concatenate([r for _, r in seen]) if seen else np.empty((0, 3), np.int64)
    return Measured(run, rows, progress.edges)


@dataclass
class Drain:
    """One ``graphcep stream --once`` process over a filled topic."""

    output: str
    edges: int
    seconds: float
    matches: int

    @property
    def edges_per_s(self) -> float:
        return self.edges / self.seconds


def drain(broker: Any, topic: str, output: str, workdir: Path) -> Drain:
    """The whole ``graphcep stream`` process, timed, taking ``topic`` from its start to its
    end (``--once``); ``output``: a folder, or ``kafka`` for a fresh topic (exactly once,
    one transaction a micro-batch)."""
    import subprocess

    from graphcep.runtime.streaming import kafka_jars

    target = str(workdir / "out")
    if output == "kafka":
        target = f"kafka://{broker.bootstrap}/{new_topic(broker)}"
    command = [sys.executable, "-m", "graphcep", "stream", str(QUERY_FILE),
               "--source", f"kafka://{broker.bootstrap}/{topic}", "--format", "csv",
               "--time-unit", "us", "--lateness", str(LATENESS_US / 1e6), "--once",
               "--checkpoint", str(workdir / "ckpt"), "--output", target,
               "--kafka-jars", str(kafka_jars.connector_dir()), "--summary", "json",
               "--master", "local[2]"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"graphcep stream failed: {done.stderr[-1500:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return Drain(output, summary["edges"], seconds, summary["matches"])


def sink_overhead(broker: Any, table: pa.Table, args: argparse.Namespace,
                  workroot: Path) -> list[str]:
    """The exactly-once Kafka sink against a folder sink: two whole processes draining the
    same filled topic (``--drain-edges`` edges)."""
    from confluent_kafka import Producer

    topic = new_topic(broker)
    KafkaFeed(table.slice(0, args.drain_edges), broker.bootstrap, topic, 0,
              args.lines_per_message).produce_all()
    # a fresh broker creates its transaction log (50 partitions) on the first transaction:
    # a one-time cost of the broker, not of the sink
    Producer({"bootstrap.servers": broker.bootstrap,
              "transactional.id": "bench-warm-up"}).init_transactions(120)
    runs = []
    for output in ("folder", "kafka"):
        with tempfile.TemporaryDirectory(dir=workroot) as tmp:
            runs.append(drain(broker, topic, output, Path(tmp)))
        print(json.dumps({**asdict(runs[-1]), "edges_per_s": runs[-1].edges_per_s}), flush=True)
    folder, kafka = runs
    overhead = 1 - kafka.edges_per_s / folder.edges_per_s
    lines = ["| output | edges | matches | process seconds | edges/s |", "|---|---|---|---|---|"]
    lines += [f"| {r.output} | {r.edges:,} | {r.matches:,} | {r.seconds:.1f} | "
              f"{r.edges_per_s:,.0f} |" for r in runs]
    same = folder.matches == kafka.matches
    return lines + ["", f"Exactly-once sink overhead (target <= 15% of the rate): "
                    f"{overhead:.0%} -> {'MET' if overhead <= 0.15 else 'NOT MET'}"
                    + ("" if same else "; MATCH COUNTS DIFFER")]


def check(table: pa.Table, result: Measured) -> tuple[bool, str]:
    """A Kafka run's matches against ``run_local`` over the edges it processed."""
    from graphcep.runtime.local import run_local

    r = result.run
    if result.prefix == 0:
        return True, f"- {r.method} {r.master} {r.rate:,}: no edges processed"
    reference, _ = run_local(triangle_query(), table.slice(0, result.prefix))
    want = match_times(reference)
    got = result.matches
    order = (lambda rows: rows[np.lexsort(rows.T[::-1])]) if len(got) else (lambda rows: rows)
    same = got.shape == want.shape and bool(np.array_equal(order(got), order(want)))
    return same, (f"- {r.method} {r.master} {r.rate:,} edges/s: {len(got):,} matches over the "
                  f"first {result.prefix:,} edges, run_local {len(want):,} -> "
                  + ("same (t1, t2, t3) rows" if same else "MISMATCH"))


def target_line(runs: list[StreamRun]) -> str:
    ok = [r for r in runs if r.method == KAFKA and r.rate >= TARGET_RATE and r.sustained
          and r.p99_s is not None and r.p99_s <= TARGET_P99_S]
    head = f"Target (>= {TARGET_RATE:,} edges/s from Kafka sustained, p99 <= {TARGET_P99_S:g} s)"
    if not ok:
        return f"{head}: NOT MET"
    best = max(ok, key=lambda r: r.rate)
    return f"{head}: MET on {best.master} at {best.rate:,} edges/s (p99 {best.p99_s:.2f} s)"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--rates", default="100000,250000,400000")
    parser.add_argument("--join-rates", default="1000,2500")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--history", type=int, default=200_000)
    parser.add_argument("--lines-per-message", default="100",
                        help="lines a message; a comma list: the kafka method once per value")
    parser.add_argument("--drain-edges", type=int, default=2_000_000,
                        help="edges of the topic the sink-overhead processes drain")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="Kafka records a micro-batch takes (default: graphcep's)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    if not args.methods or set(args.methods) - set(METHODS):
        parser.error(f"--methods: a comma list of {', '.join(METHODS)}")
    args.rates = [int(r) for r in args.rates.split(",")]
    args.join_rates = [int(r) for r in args.join_rates.split(",")]
    args.message_sizes = [int(n) for n in args.lines_per_message.split(",")]
    args.lines_per_message = args.message_sizes[0]
    return args


def run_all(args: argparse.Namespace, table: pa.Table, workroot: Path) -> list[Measured]:
    from graphcep.runtime.spark import spark_session
    from graphcep.runtime.streaming.kafka_source import connector_conf
    from tests.kafka.broker import start_broker, why_no_kafka

    if (why := why_no_kafka()) is not None:
        raise SystemExit(f"bench.kafka_stream: {why}")
    from graphcep.runtime.streaming import kafka_jars

    (workroot / "broker").mkdir()
    broker = start_broker(workroot / "broker")
    spark = spark_session(args.master, conf=connector_conf(str(kafka_jars.connector_dir())))
    results: list[Measured] = []
    try:
        for method in (m for m in args.methods if m != "sink"):
            rates = args.join_rates if method == "spark-join" else args.rates
            sizes = args.message_sizes if method == "kafka" else args.message_sizes[:1]
            for size, rate in ((size, rate) for size in sizes for rate in rates):
                sized = argparse.Namespace(**{**vars(args), "lines_per_message": size})
                with tempfile.TemporaryDirectory(dir=workroot) as tmp:
                    result = run_method(method, spark, broker, table, rate, sized, Path(tmp))
                results.append(result)
                print(json.dumps({**asdict(result.run), "edges_per_s": result.run.edges_per_s}),
                      flush=True)
                if method == "spark-join" and not result.run.sustained:
                    break
        if "sink" in args.methods:
            args.sink_lines = sink_overhead(broker, table, args, workroot)
    finally:
        spark.stop()
        broker.stop()
    return results


def run_method(method: str, spark: Any, broker: Any, table: pa.Table, rate: int,
               args: argparse.Namespace, workdir: Path) -> Measured:
    if method == "kafka":
        return run_kafka(spark, broker, table, rate, args, args.master, workdir)
    if method == "spark-join":
        return run_join(spark, broker, table, rate, args, args.master, workdir)
    result = run_graphcep(spark, table, rate, args.seconds, args.master, workdir, args.history)
    result.run.method = FILES
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    fastest = max(args.rates + args.join_rates)
    table = s2_like(max(args.history + fastest * args.seconds, args.drain_edges))
    with tempfile.TemporaryDirectory(prefix="graphcep-kafka-bench-") as tmp:
        results = run_all(args, table, Path(tmp))
    runs = [m.run for m in results]
    checks = [check(table, m) for m in results if m.run.method in (KAFKA, JOIN)]
    text = "\n".join([results_table(runs), "", target_line(runs), "",
                      "Correctness (against run_local on the edges each run processed):",
                      *[line for _, line in checks]])
    if getattr(args, "sink_lines", None):
        text += "\n\nWhole processes draining a filled topic (`stream --once`):\n\n" + \
            "\n".join(args.sink_lines)
    print(text)
    if args.record:
        record("\n".join([
            "## Kafka: sustained rate and edge-to-match latency (S2 triangle, W = 10 s)", "",
            f"Command: `.venv/bin/python -m bench.kafka_stream {' '.join(argv)}`", "",
            f"Each run: the first {args.history:,} edges untimed, then {args.seconds:g} s of "
            "timed feed; see the module docstring.", "", text, "", "Machine:",
            *machine_info(source_state())]), START_MARK, END_MARK)
    return 0 if all(same for same, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
