"""``graphcep stream --output/--late/--rejects kafka://...`` against a real broker.

Oracle: ``graphcep run`` over the same edges (the batch run, itself checked against brute
force elsewhere); what a ``read_committed`` consumer reads from the output topic must be
exactly its matches, none twice, however often the stream is killed (SIGKILL) and
restarted. Matches are compared by their edges' (t, src, dst), as in
``test_kafka_source.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.cli import main
from graphcep.events import Match, MatchedEdge, matches_to_table
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming import kafka_sink
from graphcep.runtime.streaming.kafka_sink import (
    COMMITS_SUFFIX,
    KafkaMatchSink,
    KafkaPartWriter,
    KafkaTransactions,
    parse_targets,
    transactional_id,
)
from tests.kafka.test_kafka_source import TRIANGLE, as_line, batch_run, match_keys, random_edges
from tests.runtime.test_stream_hardening import serve_lines

REPO = Path(__file__).resolve().parents[2]


def consume(bootstrap: str, topic: str, committed: bool = True) -> list:
    """Every record of ``topic`` (all partitions) a consumer of that isolation level sees."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if committed
                         else "read_uncommitted"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records, ended, deadline = [], set(), time.monotonic() + 30
        while len(ended) < len(partitions) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                continue
            records.append(message)
        assert len(ended) == len(partitions), "the topic was not read to its end"
        return records
    finally:
        consumer.close()


def match(i: int) -> Match:
    return Match("q", (("x", f"a{i}"), ("y", f"b{i}")),
                 (MatchedEdge("e", i * 1_000_000, f"a{i}", f"b{i}", 0, i),),
                 i * 1_000_000, i * 1_000_000)


# -- without a broker -------------------------------------------------------------------


def test_the_targets_are_checked():
    assert parse_targets({"output": "kafka://a:1/m", "late": "kafka://a:1/l"}) == (
        "a:1", {"output": "m", "late": "l"})
    with pytest.raises(QueryError, match="--output kafka://a/m,n: name one topic to write"):
        parse_targets({"output": "kafka://a/m,n"})
    with pytest.raises(QueryError, match="share one transaction, so one cluster"):
        parse_targets({"output": "kafka://a/m", "late": "kafka://b/l"})
    with pytest.raises(QueryError, match="name the same Kafka topic"):
        parse_targets({"output": "kafka://a/m", "rejects": "kafka://a/m"})
    assert transactional_id("ck", "q") == transactional_id(Path("ck").resolve(), "q")
    assert transactional_id("ck", "q") != transactional_id("ck2", "q")
    assert transactional_id("ck", "q") != transactional_id("ck", "r")


def test_an_unreachable_output_broker_is_one_line_and_status_2_before_spark(tmp_path,
                                                                            capsys):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "in").mkdir()
    started = time.monotonic()
    code = main(["stream", str(TRIANGLE), "--source", str(tmp_path / "in"), "--checkpoint",
                 str(tmp_path / "ck"), "--once", "--rejects", f"kafka://127.0.0.1:{port}/r"])
    err = capsys.readouterr().err
    assert code == 2
    assert time.monotonic() - started < 10
    assert err.strip().count("\n") == 0, err
    assert f"kafka://127.0.0.1:{port}: no Kafka broker answers: 127.0.0.1:{port} " \
           "(Connection refused)" in err
    assert not (tmp_path / "ck").exists()  # refused before the checkpoint, before Spark


# -- with the broker, without Spark -----------------------------------------------------


@pytest.mark.slow
def test_transactions_abort_skip_and_continue_a_flush(kafka_broker, tmp_path, monkeypatch):
    """A batch whose transaction was left open is invisible to ``read_committed`` (and
    aborted by the next start); a committed batch given again is not written again; a
    flushed batch followed by the stream going on writes only the matches not flushed, in
    that batch and the later ones, until the stream settles past the flush (across a
    restart, the flush's ids read back from records of their own); a batch staged twice
    (a failed attempt, then its retry) is written once."""
    monkeypatch.setattr(kafka_sink, "FLUSH_PART_BYTES", 40)  # one id a record: several
    bootstrap, txn = kafka_broker.bootstrap, transactional_id(tmp_path, "q")
    topics = {"output": "m-txn", "late": "l-txn"}
    first = KafkaTransactions(bootstrap, topics, txn, "q")
    first.start()
    assert first.last is None
    KafkaMatchSink(first).write(matches_to_table([match(1), match(2)]), 0)
    KafkaPartWriter(first, "late").write(pa.table({"file": ["f"], "line": [3]}), 0)
    first.commit(0)
    KafkaMatchSink(first).write(matches_to_table([match(3)]), 1)
    producer = first._producer  # batch 1 begun and never committed: a process killed
    producer.begin_transaction()
    producer.produce("m-txn", value=b"uncommitted", key=b"k")
    producer.flush(10)

    second = KafkaTransactions(bootstrap, topics, txn, "q")
    second.start()  # fences the first producer, aborts its transaction
    assert second.last["batch"] == 0
    KafkaMatchSink(second).write(matches_to_table([match(1), match(2)]), 0)
    second.commit(0)  # delivered already: nothing written
    KafkaMatchSink(second).write(matches_to_table([match(3)]), 1)
    second.commit(1)
    KafkaMatchSink(second).write(matches_to_table([match(4), match(5)]), 2)
    second.commit(2, final=True, settled=100)  # the end-of-input flush

    third = KafkaTransactions(bootstrap, topics, txn, "q")
    third.start()
    flushed = {match(4).match_id, match(5).match_id}
    assert third.carry.ids == flushed and third.carry.parts == 2
    KafkaMatchSink(third).write(matches_to_table([match(4), match(6)]), 2)
    # an attempt that failed before its commit, and Spark's retry of the batch
    KafkaMatchSink(third).write(matches_to_table([match(4), match(6)]), 2)
    third.commit(2, settled=50)  # the stream went on: batch 2 again, now a real one
    KafkaMatchSink(third).write(matches_to_table([match(5), match(7)]), 3)
    third.commit(3, settled=60)  # a flushed match again, a batch later
    third.close()

    fourth = KafkaTransactions(bootstrap, topics, txn, "q")
    fourth.start()
    assert fourth.last["batch"] == 3 and fourth.carry.ids == flushed
    KafkaMatchSink(fourth).write(matches_to_table([match(8)]), 4)
    fourth.commit(4, settled=100)  # settled past the flush: nothing carried on
    assert fourth.carry is None
    fourth.close()
    fifth = KafkaTransactions(bootstrap, topics, txn, "q")
    fifth.start()
    assert fifth.last["batch"] == 4 and fifth.carry is None
    fifth.commit(5, final=True, settled=200)  # a flush of no match carries nothing
    assert fifth.carry is None and "carry" not in fifth.last
    fifth.close()

    raw = [m.value() for m in consume(bootstrap, "m-txn", committed=False)]
    assert b"uncommitted" in raw  # it was written, and stays hidden below
    got = consume(bootstrap, "m-txn")
    ids = [m.key().decode() for m in got]
    expected = [match(i) for i in range(1, 9)]
    assert sorted(ids) == sorted(m.match_id for m in expected)  # each once
    batches = {1: b"0", 2: b"0", 3: b"1", 4: b"2", 5: b"2", 6: b"2", 7: b"3", 8: b"4"}
    for message in got:
        record = json.loads(message.value())
        assert record["match_id"] == message.key().decode()
        headers = dict(message.headers())
        assert headers["graphcep.query"] == b"q"
        assert headers["graphcep.batch"] == batches[int(record["bindings"]["x"][1:])]
    (late,) = consume(bootstrap, "l-txn")
    assert json.loads(late.value()) == {"file": "f", "line": 3}


def test_a_flush_of_many_matches_is_cut_into_records_under_kafkas_limit():
    """60,000 ids (about 1.1 MB of JSON, over Kafka's default largest record of 1 MB)."""
    ids = [f"{i:016x}" for i in range(60_000)]
    parts = kafka_sink.id_parts(ids)
    assert len(json.dumps(ids)) > 1_048_576
    assert len(parts) > 1 and [i for part in parts for i in part] == ids
    assert all(len(json.dumps({"batch": 10**12, "part": k, "match_ids": part})) < 1_000_000
               for k, part in enumerate(parts))


# -- the stream, killed and restarted ---------------------------------------------------


def stream_command(source: Path, bootstrap: str, work: Path, topic: str) -> list[str]:
    """The stream's command line: matches to ``topic``, late edges to ``topic-late``."""
    return ["stream", str(TRIANGLE), "--source", str(source), "--checkpoint",
            str(work / "ck"), "--output", f"kafka://{bootstrap}/{topic}",
            "--late", f"kafka://{bootstrap}/{topic}-late", "--max-files-per-trigger", "1",
            "--lateness", "30", "--master", "local[1]", "--quiet", "--once"]


def newest_state(checkpoint: Path) -> int:
    """The newest micro-batch whose state the operator wrote (-1: none yet)."""
    states = [int(p.stem.split("-")[1]) for p in (checkpoint / "state").glob("state-*.bin")]
    return max(states, default=-1)


def run_killed(command: list[str], checkpoint: Path, kills: int, seed: int) -> int:
    """Start ``command`` ``kills`` times, each SIGKILLed at a random moment -- in start-up,
    or 0-1.5 s after a micro-batch more was checkpointed (inside the next batch, or its
    transaction); return how many kills landed after the stream had made progress."""
    env = child_env()
    rng, mid_stream = random.Random(seed), 0
    for kill in range(kills):
        log = checkpoint.parent / f"stream-{kill}.err"
        with open(log, "wb") as err:  # a file: a pipe nobody reads would stall the stream
            proc = subprocess.Popen([sys.executable, "-m", "graphcep.cli", *command],
                                    env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=err)
        before, deadline = newest_state(checkpoint), time.monotonic() + 180
        in_start_up = kill == 0 and kills > 3
        if in_start_up:
            time.sleep(rng.uniform(1.0, 4.0))
        else:
            while newest_state(checkpoint) <= before and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()[-2000:]
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.5))
            mid_stream += 1
        assert proc.poll() is None, "the stream ended before its kill"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return mid_stream


#: The stream, its whole process group (Python and the JVM) SIGKILLed by itself at one
#: risky moment of micro-batch ``argv[2]`` (``argv[1]`` names it), windows too narrow for a
#: kill at random to be sure of hitting:
#:
#: * ``start-up``: the producer started (earlier ones fenced), before its last marker is read;
#: * ``batch-start``: Spark logged the batch's offsets, before the operator reads anything;
#: * ``open``: every record and the marker on the broker, the transaction not committed;
#: * ``committed``: the transaction committed, before the operator's state is written;
#: * ``committed-lines``: the same, at the first batch that read lines (``argv[2]`` unread);
#: * ``checkpointed``: the state written, before Spark logs the batch done.
KILLED_AT = """
import os, signal, sys
from graphcep.runtime.streaming import kafka_sink, driver as streaming
point, batch = sys.argv[1], int(sys.argv[2])
def die():
    os.killpg(0, signal.SIGKILL)
def after(cls, name, when):
    original = getattr(cls, name)
    def patched(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if when(self, *args, **kwargs):
            die()
        return result
    setattr(cls, name, patched)
if point == "start-up":
    kafka_sink.KafkaTransactions._last_marker = lambda self, kafka: die()
elif point == "batch-start":
    process = streaming.StreamOperator.process
    def process_or_die(self, batch_id, *args, **kwargs):
        if batch_id == batch:
            die()
        return process(self, batch_id, *args, **kwargs)
    streaming.StreamOperator.process = process_or_die
elif point == "open":
    produce = kafka_sink.KafkaTransactions._produce
    def produce_then_die(producer, topic, key, value, headers):
        produce(producer, topic, key, value, headers)
        if topic.endswith(kafka_sink.COMMITS_SUFFIX) and dict(headers)[
                "graphcep.batch"] == str(batch).encode():
            producer.flush(30)
            die()
    kafka_sink.KafkaTransactions._produce = staticmethod(produce_then_die)
elif point == "committed":
    after(kafka_sink.KafkaTransactions, "commit", lambda self, b, *rest, **named: b == batch)
elif point == "committed-lines":
    after(kafka_sink.KafkaTransactions, "commit",
          lambda self, b, *rest, lines=None, **named: bool(lines))
elif point == "checkpointed":
    after(streaming.StreamOperator, "_checkpoint", lambda self, b, **named: b == batch)
else:
    raise SystemExit(f"no kill point {point}")
from graphcep.cli import main
sys.exit(main(sys.argv[3:]))
"""

#: The kill points of :data:`KILLED_AT` the kill test tries, once each (a kill at
#: ``batch-start`` is one before the commit, as ``open`` is, with less written).
KILL_POINTS = ("start-up", "open", "committed", "checkpointed")


def killed_at(point: str, command: list[str], checkpoint: Path) -> None:
    """Run ``command`` killed at ``point`` of the second micro-batch it runs (one it has
    not run before: the first may be one a kill left unfinished)."""
    batch = newest_state(checkpoint) + 2
    assert batch < len(list(checkpoint.parent.glob("in/*"))) - 1, "too few files left"
    log = checkpoint.parent / f"killed-at-{point}.err"
    with open(log, "wb") as err:
        done = subprocess.run([sys.executable, "-c", KILLED_AT, point, str(batch), *command],
                              env=child_env(), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=err, timeout=300)
    assert done.returncode == -signal.SIGKILL, log.read_text()[-2000:]
    wrote = {"start-up": batch - 2, "batch-start": batch - 1, "open": batch - 1,
             "committed": batch - 1, "checkpointed": batch}[point]
    assert newest_state(checkpoint) == wrote, point


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}


def write_files(edges: list[dict], source: Path, files: int) -> Path:
    """``edges`` as ``files`` JSONL files of ``source``, aged in their order (a micro-batch
    per file with ``--max-files-per-trigger 1``, read in the order of their times)."""
    source.mkdir()
    size, base = len(edges) // files, time.time() - 100
    for i in range(files):
        path = source / f"edges-{i:02d}.jsonl"
        path.write_text("".join(as_line(e, "jsonl") + "\n"
                                for e in edges[i * size:(i + 1) * size]))
        os.utime(path, (base + i, base + i))
    return source


def check_stream_against_the_batch_run(kafka_broker, tmp_path, capsys, kills: int,
                                       seed: int, files: int = 16,
                                       points: tuple[str, ...] = ("committed",)) -> None:
    edges = random_edges(files * 100, 8, seed=seed)
    source = write_files(edges, tmp_path / "in", files)
    expected = batch_run(TRIANGLE, edges, "jsonl", tmp_path, capsys)
    # a topic of its own: the broker serves the whole test run, and another test's
    # matches can even share an id with these (the same query over the same file and
    # line numbers: the same seq)
    topic = f"matches-{seed}"
    command = stream_command(source, kafka_broker.bootstrap, tmp_path, topic)
    mid_stream = run_killed(command, tmp_path / "ck", kills, seed)
    assert newest_state(tmp_path / "ck") < files - 3, "the kills did not land before the end"
    assert mid_stream >= min(kills, 3)
    for point in points:
        killed_at(point, command, tmp_path / "ck")
    code = main(command)
    assert code == 0, capsys.readouterr().err[-2000:]
    got = consume(kafka_broker.bootstrap, topic)
    ids = [m.key().decode() for m in got]
    assert len(ids) == len(set(ids)), twice(got, kafka_broker.bootstrap, topic)
    rows = [json.loads(m.value()) for m in got]
    assert [r["match_id"] for r in rows] == ids
    assert match_keys(rows) == expected and len(expected) > 20
    assert consume(kafka_broker.bootstrap, f"{topic}-late") == []  # the files arrive in time order


def twice(got: list, bootstrap: str, topic: str) -> str:
    """What a failure says of matches delivered twice: where each copy lies, the
    micro-batch that wrote it, and the markers of the commit topic."""
    seen: dict[str, list[str]] = {}
    for m in got:
        seen.setdefault(m.key().decode(), []).append(
            f"{m.partition()}@{m.offset()} batch {dict(m.headers())['graphcep.batch'].decode()}")
    copies = {key: places for key, places in seen.items() if len(places) > 1}
    markers = [m.value().decode() for m in consume(bootstrap, topic + COMMITS_SUFFIX)]
    return f"delivered twice: {copies}; markers: {markers}"


@pytest.mark.slow
@pytest.mark.spark
def test_a_stream_killed_ten_times_and_at_each_risky_moment_delivers_each_match_once(
        kafka_broker, tmp_path, capsys):
    """Ten SIGKILLs at random moments (the first in start-up), then one at each kill
    point, each followed by a restart, on one stream: one Spark start per kill and one to
    finish (two streams, one killed three times and at the points, the other ten times
    and after a commit, started Spark five times more for the same kills)."""
    check_stream_against_the_batch_run(kafka_broker, tmp_path, capsys, kills=10, seed=22,
                                       files=48, points=KILL_POINTS)


# -- a socket source: not replayable ----------------------------------------------------


def test_a_socket_restart_passes_over_a_batch_delivered_without_its_state(tmp_path):
    """A socket run killed after the sink committed micro-batch 3 and before the state of
    3 was written (Spark's offsets log: batch 3 of a run begun at batch 1, lines 121-170,
    no commit; the marker: 170 lines read through batch 3): the restart numbers its
    batches from 4 (the sink would skip a new batch 3 as delivered), numbers its lines
    after line 170 (match ids hash them), and counts the 50 lines lost -- once, however
    often it is restarted. The count comes from the marker, or, from a marker without it,
    from Spark's offsets."""
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.runtime.streaming.driver import StreamOperator
    from graphcep.runtime.streaming.query import restart_socket_checkpoint

    job = SubgraphJob.create(parse_program(TRIANGLE.read_text()))
    for marker_lines in (170, None):
        root = tmp_path / f"ck-{marker_lines}"
        offsets, commits = root / "spark" / "offsets", root / "spark" / "commits"
        offsets.mkdir(parents=True)
        commits.mkdir()
        for spark_batch, end in ((0, 69), (1, 119), (2, 169)):  # operator batch 1 + b
            (offsets / str(spark_batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{end}')
        for spark_batch in (0, 1):
            (commits / str(spark_batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        (root / "spark" / "graphcep-batch-offset").write_text("1\n")
        first = StreamOperator(job, checkpoint=root)
        for batch, lines in ((0, 50), (1, 20), (2, 50)):  # 120 lines in batches 0-2
            first.process(batch, None, lines=lines)
        assert first.totals.lines == 120

        restarted = StreamOperator(job, checkpoint=root)
        assert restart_socket_checkpoint(restarted, root, 3, marker_lines) == (4, 50)
        assert restarted.resume() == 3
        assert (restarted.totals.lines, restarted.totals.lost) == (170, 50)
        again = StreamOperator(job, checkpoint=root)  # that start died before a batch
        assert restart_socket_checkpoint(again, root, 3, marker_lines) == (4, 0)
        assert (again.totals.lines, again.totals.lost) == (170, 50)
    # nothing delivered past the state: batches and lines go on from the state
    plain = tmp_path / "plain"
    other = StreamOperator(job, checkpoint=plain)
    other.process(0, None, lines=10)
    assert restart_socket_checkpoint(StreamOperator(job, checkpoint=plain), plain, 0,
                                     10) == (1, 0)


@pytest.mark.slow
@pytest.mark.spark
def test_a_socket_stream_killed_after_the_commit_loses_no_later_match(kafka_broker,
                                                                     tmp_path, capsys):
    """A socket stream to Kafka, SIGKILLed right after the sink committed its first
    micro-batch, before the state of it was written; restarted, it reads the server's next
    connection. Before, the restart numbered its first batch as the one delivered, and
    the sink dropped it as delivered: the second connection's matches were lost. Oracle:
    the batch run over each connection's edges (their times 10,000 s apart, so no match
    spans both; lateness 0 releases every edge before the newest): the second's matches
    all, once; of the first's, those of the batch delivered before the kill, once."""
    first_edges = random_edges(300, 8, seed=31)
    later_edges = [{**e, "t": e["t"] + 10_000} for e in random_edges(300, 8, seed=32)]
    blocks = ["".join(as_line(e, "jsonl") + "\n" for e in edges).encode()
              for edges in (first_edges, later_edges)]
    port = serve_lines(blocks, None, timeout=300)
    expected_first = set(batch_run(TRIANGLE, first_edges, "jsonl", tmp_path, capsys))
    expected_later = batch_run(TRIANGLE, later_edges[:-1], "jsonl", tmp_path, capsys)
    topic = "socket-matches"
    command = ["stream", str(TRIANGLE), "--source", f"tcp://127.0.0.1:{port}", "--format",
               "jsonl", "--checkpoint", str(tmp_path / "ck"), "--output",
               f"kafka://{kafka_broker.bootstrap}/{topic}", "--master", "local[1]",
               "--quiet", "--summary", "json"]
    log = tmp_path / "killed.err"
    with open(log, "wb") as err:
        done = subprocess.run([sys.executable, "-c", KILLED_AT, "committed-lines", "-1",
                               *command, "--run-for", "240"], env=child_env(),
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=err,
                              timeout=300)
    assert done.returncode == -signal.SIGKILL, log.read_text()[-2000:]
    markers = [json.loads(m.value()) for m in consume(kafka_broker.bootstrap,
                                                      topic + COMMITS_SUFFIX)]
    delivered = markers[-1]["batch"]  # committed, its state not written
    assert markers[-1]["lines"] > 0 and newest_state(tmp_path / "ck") == delivered - 1
    code = main([*command, "--run-for", "25"])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    assert f"were lost for later matches: micro-batch {delivered} delivered their " \
           "matches" in err, err
    summary = json.loads(out.strip().splitlines()[-1])
    got = consume(kafka_broker.bootstrap, topic)
    ids = [m.key().decode() for m in got]
    assert len(ids) == len(set(ids)), twice(got, kafka_broker.bootstrap, topic)
    keys = match_keys([json.loads(m.value()) for m in got])
    later = [k for k in keys if k[0][0] > 10_000]
    first = [k for k in keys if k[0][0] <= 10_000]
    assert later == expected_later and len(expected_later) > 5
    assert first and set(first) <= expected_first  # the batch delivered before the kill
    # the killed batch's lines: read (numbered) and lost for later matches; then the 300
    assert 0 < summary["lost"] <= 300 and summary["lines"] == summary["lost"] + 300
