"""Kafka faults met before Spark starts: a topic the brokers lack, security settings the
Kafka output's client cannot take; the settings it can, passed to it.

Oracle: the lines and exit status the README promises (one line, status 2, before the
checkpoint is touched), and the topics a metadata request to the real broker lists.
"""

from __future__ import annotations

import argparse
import errno
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphcep.cli import main
from graphcep.cli.kafka import refuse_kafka_options
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming import kafka_client
from graphcep.runtime.streaming.kafka_client import check_client_settings, client_settings
from graphcep.runtime.streaming.kafka_source import KafkaSource, kafka_options
from tests.kafka.broker import running_broker, why_no_kafka
from tests.kafka.test_kafka_sink import (
    child_env,
    consume,
    newest_state,
    stream_command,
    twice,
    write_files,
)
from tests.kafka.test_kafka_source import (
    TRIANGLE,
    batch_run,
    match_keys,
    produce_edges,
    random_edges,
    stream_rows,
)
from tests.kafka.test_kafka_source import stream_command as source_command

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="graphcep" password="s3 cret";')


# -- without a broker -------------------------------------------------------------------


def test_security_settings_are_named_as_librdkafka_names_them():
    pairs = ["kafka.security.protocol=SASL_SSL", "kafka.sasl.mechanism=SCRAM-SHA-512",
             f"kafka.sasl.jaas.config={JAAS}", "kafka.ssl.ca.location=/etc/ca.pem",
             "kafka.isolation.level=read_committed", "failOnDataLoss=false"]
    assert client_settings(kafka_options(pairs)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "graphcep", "sasl.password": "s3 cret",
        "ssl.ca.location": "/etc/ca.pem"}
    assert client_settings({}) == {}
    with pytest.raises(QueryError, match="reads username=.* and password="):
        client_settings({"kafka.sasl.jaas.config": "com.example.Module required token=x;"})
    check_client_settings(client_settings(kafka_options(pairs[:3])))  # librdkafka has every one of them
    with pytest.raises(QueryError, match="refuses the security settings .*ssl.ca.location"):
        check_client_settings(client_settings(kafka_options(pairs)))  # no such file: said before Spark
    with pytest.raises(QueryError, match=r"^--kafka-option kafka.ssl.no.such: not a setting "
                       "of graphcep's Kafka client, librdkafka$"):
        check_client_settings({"ssl.no.such": "x"})
    with pytest.raises(QueryError, match=r"Java TrustStores are not supported, use "
                       "`ssl.ca.location`"):
        check_client_settings({"ssl.truststore.location": "/etc/trust.jks"})
    with pytest.raises(QueryError, match="librdkafka, refuses the security settings"):
        check_client_settings({"security.protocol": "carrier-pigeon"})
    given = kafka_client.client_config({"security.protocol": "SSL"}, bootstrap_servers="h:1")
    assert given["security.protocol"] == "SSL" and given["bootstrap.servers"] == "h:1"


def test_a_kafka_output_takes_the_security_options_with_another_source():
    def args(*pairs: str, output: str | None = "kafka://h/m") -> argparse.Namespace:
        return argparse.Namespace(kafka_option=list(pairs) or None, output=output, late=None,
                                  rejects=None, starting_offsets="earliest", kafka_jars=None,
                                  time="field")

    refuse_kafka_options(args("kafka.security.protocol=SSL", "kafka.sasl.username=u"), "dir")
    with pytest.raises(QueryError, match="--kafka-option shapes a Kafka source"):
        refuse_kafka_options(args("kafka.security.protocol=SSL", "failOnDataLoss=false"),
                             "dir")
    with pytest.raises(QueryError, match="--kafka-option shapes a Kafka source"):
        refuse_kafka_options(args("kafka.security.protocol=SSL", output="out/"), "dir")


def test_a_java_only_setting_for_the_output_is_one_line_before_the_broker(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    code = main(["stream", str(TRIANGLE), "--source", str(tmp_path / "in"), "--checkpoint",
                 str(tmp_path / "ck"), "--once", "--output", "kafka://127.0.0.1:1/m",
                 "--kafka-option", "kafka.ssl.truststore.location=/etc/trust.jks"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "--kafka-option: graphcep's Kafka client, librdkafka, refuses the security " \
           "settings (Java TrustStores are not supported, use `ssl.ca.location`" in err
    assert not (tmp_path / "ck").exists()


def test_broker_wait_without_a_kafka_source_or_output_is_one_line(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    code = main(["stream", str(TRIANGLE), "--source", str(tmp_path / "in"), "--checkpoint",
                 str(tmp_path / "ck"), "--once", "--broker-wait", "5"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "--broker-wait sets how long a Kafka source (--source kafka://BROKERS/TOPICS) " \
           "or output (--output, --late or --rejects kafka://BROKER/TOPIC) waits for its " \
           "brokers: there is none" in err
    assert not (tmp_path / "ck").exists()


def test_broker_wait_sets_the_source_clients_timeouts_and_kafka_options_win():
    """``--broker-wait 5`` is 5000 ms for Spark's admin client (one attempt, not Spark's
    three), its consumers' polls and requests; a ``--kafka-option`` naming one of them,
    in any case, is passed as given and the wait's is dropped."""
    source = KafkaSource([("h", 9092)], ["t"], broker_wait_s=5,
                         extra={"FetchOffset.NumRetries": "4",
                                "kafka.request.timeout.ms": "2000"})
    assert source.reader_options() == {
        "startingOffsets": "earliest", "kafka.default.api.timeout.ms": "5000",
        "kafkaConsumer.pollTimeoutMs": "5000", "FetchOffset.NumRetries": "4",
        "kafka.request.timeout.ms": "2000"}
    assert KafkaSource([("h", 9092)], ["t"]).reader_options()[
        "kafka.request.timeout.ms"] == "30000"  # Kafka's own, under the 60 s wait


def test_a_timeout_of_sparks_kafka_clients_is_the_brokers_lost():
    """What Spark's admin client raises planning a batch with the brokers gone (seen on
    the test broker SIGKILLed), and what its consumer raises reading one, are one line
    naming the brokers and the batch, a fault of the system (``ETIMEDOUT``: exit 1);
    another failure (another of Spark's waits) is not taken for it."""
    source = KafkaSource([("k1", 9092), ("k2", 9093)], ["t"], broker_wait_s=7.5)
    planning = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
                "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a "
                "node assignment. Call: listNodes SQLSTATE: XXKST\n\tat org.apache...")
    lost = source.brokers_lost(planning, 3)
    assert str(lost) == ("kafka://k1:9092,k2:9093: the brokers did not answer for 7.5 s "
                         "(--broker-wait), micro-batch 3 not read (Timed out waiting for a "
                         "node assignment. Call: listNodes)")
    assert lost.errno == errno.ETIMEDOUT
    reading = ("Caused by: java.util.concurrent.TimeoutException: Cannot fetch record for "
               "offset 80 in 5000 milliseconds\n\tat org.apache.spark...")
    assert "micro-batch 4 not read (Cannot fetch record for offset 80 in 5000 " \
           "milliseconds)" in str(source.brokers_lost(reading, 4))
    for other in ("java.lang.OutOfMemoryError: Java heap space",
                  "java.util.concurrent.TimeoutException: Futures timed out after [300 s]"):
        assert source.brokers_lost(other, 3) is None


# -- with the broker --------------------------------------------------------------------


@pytest.mark.slow
def test_an_unknown_topic_is_one_line_before_spark(kafka_broker, tmp_path, capsys):
    kafka_broker.create_topic("faults-present", partitions=1)
    started = time.monotonic()
    code = main(["stream", str(TRIANGLE), "--source",
                 f"kafka://{kafka_broker.bootstrap}/faults-present,faults-absent",
                 "--checkpoint", str(tmp_path / "ck"), "--once"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0, err
    assert f"--source kafka://{kafka_broker.bootstrap}/faults-present,faults-absent: the " \
           "brokers have no topic faults-absent (topics there: " in err
    assert "faults-present" in err.split("topics there: ")[1]
    assert time.monotonic() - started < 15
    assert not (tmp_path / "ck" / "spark").exists()  # Spark never started on it


@pytest.mark.slow
@pytest.mark.spark
def test_records_deleted_before_they_were_read_are_named(spark, kafka_broker, tmp_path,
                                                          capsys):
    """The stream reads offsets 0-9, the topic gets 10-19, retention deletes those before
    15 (``deleteRecords``, as the log cleaner does) before the stream reads them: by
    default (Spark's ``failOnDataLoss``) the next run stops, in one line naming the
    topic, the partition and the offsets lost; with ``--on-data-loss report`` a warning
    and the summary name them, and the stream reads on (15-19)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    def edges(first: int) -> list[tuple[int, bytes]]:
        return [(0, json.dumps({"src": f"v{i % 3}", "dst": f"v{(i + 1) % 3}", "t": i + 1})
                 .encode()) for i in range(first, first + 10)]

    kafka_broker.create_topic("lossy", partitions=1)
    kafka_broker.produce("lossy", edges(0))
    command = ["stream", str(TRIANGLE), "--source", f"kafka://{kafka_broker.bootstrap}/lossy",
               "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out") + "/",
               "--quiet", "--once"]
    assert main(command) == 0, capsys.readouterr().err
    capsys.readouterr()
    kafka_broker.produce("lossy", edges(10))
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for future in admin.delete_records([TopicPartition("lossy", 0, 15)]).values():
        future.result(30)
    code = main(command)
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0, err
    assert f"micro-batch 1: --source kafka://{kafka_broker.bootstrap}/lossy: records deleted " \
           "before they were read (retention): topic lossy, partition 0, offsets 10-14; " \
           "--kafka-option failOnDataLoss=false reads on past them" in err, err
    code = main([*command, "--on-data-loss", "report", "--summary", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"graphcep: warning: --source kafka://{kafka_broker.bootstrap}/lossy: records " \
           "deleted before they were read (retention): lossy/0 offsets 10-14; the stream " \
           "goes on" in err.splitlines(), err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["records_lost"] == {"lossy/0": ["10-14"]}
    assert summary["edges"] == 15  # 0-9, then 15-19


def test_settings_only_spark_takes_leave_the_checks_to_spark():
    """A Java truststore is the Spark source's to use: the topic check and the lag are
    skipped (no client can be made with it), the source is not refused."""
    settings = {"ssl.truststore.location": "/etc/trust.jks"}
    kafka_client.check_topics("127.0.0.1:1", ["t"], settings)
    assert kafka_client.end_offsets("127.0.0.1:1", settings, [("t", 0)]) is None


# -- a broker of its own, stopped mid-stream ----------------------------------------------


@pytest.fixture
def own_broker(tmp_path_factory):
    """A broker for one test alone (stopped and started again: the shared one stays up)."""
    reason = why_no_kafka()
    if reason is not None:
        pytest.skip(f"no Kafka broker: {reason}")
    yield from running_broker(tmp_path_factory.mktemp("own-broker"))


def start_stream(command: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as err:  # a file: a pipe nobody reads would stall the stream
        return subprocess.Popen([sys.executable, "-m", "graphcep.cli", *command],
                                env=child_env(), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=err)


def kill_broker_mid_stream(broker, proc: subprocess.Popen, checkpoint: Path, log: Path,
                           files: int) -> None:
    """Wait until the stream has checkpointed a micro-batch, then SIGKILL the broker,
    the stream still far from its end."""
    deadline = time.monotonic() + 240
    while newest_batch(checkpoint) < 0 and time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        time.sleep(0.05)
    broker.kill()
    assert 0 <= newest_batch(checkpoint) < files - 4, "the outage did not land mid-stream"


def newest_batch(checkpoint: Path) -> int:
    """The newest micro-batch checkpointed (-1: none yet): the operator's state, or the
    executor mode's totals."""
    totals = [int(p.stem.split("-")[1]) for p in (checkpoint / "cells").glob("totals-*.json")]
    return max([newest_state(checkpoint), *totals])


def the_one_line(proc: subprocess.Popen, log: Path) -> str:
    """A stream that stopped with exit status 1: the one ``graphcep`` line it wrote, its
    last."""
    assert proc.wait(120) == 1, log.read_text()[-2000:]
    said = [line for line in log.read_text().splitlines() if line.startswith("graphcep")]
    assert len(said) == 1 and log.read_text().rstrip().endswith(said[0]), said
    return said[0]


def outage_line(broker, verb: str) -> str:
    """The one line of a stream whose brokers did not answer for 5 s (``--broker-wait
    5``), the micro-batch it names not ``verb`` (read: a source's; delivered: an
    output's), as a regular expression."""
    return (rf"graphcep: micro-batch (\d+): kafka://{re.escape(broker.bootstrap)}: the "
            rf"brokers did not answer for 5 s \(--broker-wait\), micro-batch \1 not {verb} "
            r"\(.*\) \(not committed: the checkpoint holds the micro-batches before it, and "
            r"a restart runs it again\)")


def read_back(broker, topic: str) -> list:
    """The matches a read_committed consumer sees on ``topic``, each once."""
    got = consume(broker.bootstrap, topic)
    ids = [m.key().decode() for m in got]
    assert len(ids) == len(set(ids)), twice(got, broker.bootstrap, topic)
    return match_keys([json.loads(m.value()) for m in got])


@pytest.mark.slow
@pytest.mark.spark
def test_a_broker_stopped_mid_stream_is_waited_for_or_one_line_and_a_restart(
        own_broker, tmp_path, capsys):
    """The broker SIGKILLed while a stream writes to it (a micro-batch per file), and
    started again on the same port and storage. An outage shorter than ``--broker-wait``:
    the stream waits and ends normally. A longer one: the stream stops in one line
    naming the brokers and the batch, exit 1; run again once the broker is back, it
    delivers the rest. Oracle: the batch run's matches, each once, for a read_committed
    consumer of either stream's topic."""
    files = 24
    edges = random_edges(files * 60, 8, seed=41)
    source = write_files(edges, tmp_path / "in", files)
    expected = batch_run(TRIANGLE, edges, "jsonl", tmp_path, capsys)
    assert len(expected) > 20

    short = stream_command(source, own_broker.bootstrap, tmp_path / "short", "outage-short")
    (tmp_path / "short").mkdir()
    log = tmp_path / "short.err"
    proc = start_stream([*short, "--broker-wait", "300"], log)
    kill_broker_mid_stream(own_broker, proc, tmp_path / "short" / "ck", log, files)
    time.sleep(2)
    own_broker.start_again()
    assert proc.poll() is None, log.read_text()[-2000:]  # it waited for the broker
    assert proc.wait(300) == 0, log.read_text()[-2000:]
    assert read_back(own_broker, "outage-short") == expected

    long = [*stream_command(source, own_broker.bootstrap, tmp_path / "long", "outage-long"),
            "--broker-wait", "5"]
    (tmp_path / "long").mkdir()
    log = tmp_path / "long.err"
    proc = start_stream(long, log)
    kill_broker_mid_stream(own_broker, proc, tmp_path / "long" / "ck", log, files)
    said = the_one_line(proc, log)
    assert re.fullmatch(outage_line(own_broker, "delivered"), said), said
    own_broker.start_again()
    assert main(long) == 0, capsys.readouterr().err[-2000:]
    assert read_back(own_broker, "outage-long") == expected


def parts_read_once(out: Path) -> list:
    """The matches of every part of the folder ``out``, none written twice (by id)."""
    rows = stream_rows(out)
    ids = [row["match_id"] for row in rows]
    assert len(ids) == len(set(ids)), "a match was written twice"
    return match_keys(rows)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("matching", ["driver", "executors"])
def test_a_source_broker_stopped_mid_stream_is_waited_for_or_one_line_and_a_restart(
        matching, own_broker, tmp_path, capsys):
    """The brokers of a Kafka *source* SIGKILLed while a stream reads them (``--once``, a
    micro-batch per 40 records, matches to a folder), and started again on the same port
    and storage. An outage shorter than ``--broker-wait``: the stream waits and ends
    normally. A longer one: one line naming the brokers and the batch, exit 1; run again
    once the broker is back, it reads on from its checkpoint. In either matching mode.
    Oracle: the batch run's matches, each once (by match id) over all the output's
    parts."""
    edges = random_edges(24 * 60, 8, seed=43)
    produce_edges(own_broker, "outage-in", edges, "jsonl", seed=44)
    expected = batch_run(TRIANGLE, edges, "jsonl", tmp_path, capsys)
    assert len(expected) > 20

    def command(work: Path, wait: str) -> list[str]:
        work.mkdir()
        return source_command(TRIANGLE, own_broker, "outage-in", work, "jsonl", "--once",
                              "--max-records-per-batch", "40", "--lateness", "30",
                              "--master", "local[1]", "--matching", matching,
                              "--broker-wait", wait)

    short = command(tmp_path / "short", "300")
    log = tmp_path / "short.err"
    proc = start_stream(short, log)
    kill_broker_mid_stream(own_broker, proc, tmp_path / "short" / "ck", log, 10)
    time.sleep(2)
    own_broker.start_again()
    assert proc.poll() is None, log.read_text()[-2000:]  # it waited for the broker
    assert proc.wait(300) == 0, log.read_text()[-2000:]
    assert parts_read_once(tmp_path / "short" / "out") == expected

    long = command(tmp_path / "long", "5")
    log = tmp_path / "long.err"
    proc = start_stream(long, log)
    kill_broker_mid_stream(own_broker, proc, tmp_path / "long" / "ck", log, 10)
    said = the_one_line(proc, log)
    assert re.fullmatch(outage_line(own_broker, "read"), said), said
    own_broker.start_again()
    log = tmp_path / "restart.err"  # a process of its own: its Spark session has the connector
    assert start_stream(long, log).wait(300) == 0, log.read_text()[-2000:]
    assert parts_read_once(tmp_path / "long" / "out") == expected


class _Answers:
    """A consumer whose ``get_watermark_offsets`` answers from a script: an error code
    (raised as the client raises it) or offsets."""

    def __init__(self, *script):
        self.script, self.asked = list(script), 0

    def get_watermark_offsets(self, partition, timeout, cached):
        import confluent_kafka

        self.asked += 1
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, int):
            raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(answer))
        return answer


def test_a_partition_without_a_leader_yet_is_asked_again_any_other_failure_raised():
    """A commit topic created a moment before has no leader for a while (the broker says
    NOT_LEADER_FOR_PARTITION): the sink's start asks again rather than failing the
    stream with a traceback; any other error, or no leader past the time, is raised."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from graphcep.runtime.streaming.kafka_client import settled_watermarks

    error = confluent_kafka.KafkaError
    part = confluent_kafka.TopicPartition("t", 0)
    late_leader = _Answers(error.NOT_LEADER_FOR_PARTITION, error.LEADER_NOT_AVAILABLE, (0, 5))
    assert settled_watermarks(late_leader, part, 10) == (0, 5) and late_leader.asked == 3
    refused = _Answers(error.TOPIC_AUTHORIZATION_FAILED, (0, 5))
    with pytest.raises(confluent_kafka.KafkaException):
        settled_watermarks(refused, part, 10)
    assert refused.asked == 1
    never = _Answers(error.NOT_LEADER_FOR_PARTITION)
    started = time.monotonic()
    with pytest.raises(confluent_kafka.KafkaException):
        settled_watermarks(never, part, 0.5)
    assert never.asked > 1 and time.monotonic() - started < 5
