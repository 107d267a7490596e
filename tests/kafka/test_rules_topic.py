"""``--rules kafka://BROKER/TOPIC``: a control topic on the real broker, its records rule
files (key: the file's name, value: its text, a null value removes it), applied at the
next micro-batch with the watched directory's exact semantics, and restarted from the
checkpoint's offsets.

The oracle is the one of the watched directory (:mod:`tests.jobs.test_rules`): each rule's
batch run alone over the whole stream, its matches whose last edge falls in the time the
rule was in force.
"""

from __future__ import annotations

from collections import Counter

import pytest

from graphcep.jobs import rules
from graphcep.runtime.streaming.driver import StreamOperator
from graphcep.runtime.streaming.rules_topic import fold, live_job
from tests.jobs.test_rules import (
    CHANGED,
    NEVER,
    OPTIONS,
    SECOND,
    TEXTS,
    batch_oracle,
    cut,
    edges_table,
    file_rules,
    watermarks,
)


def send(broker, topic: str, records: list[tuple[str, str | None, str | None]]) -> None:
    """Write ``(key, text or None: a tombstone, kind header or None)`` records, in order
    (one key, one partition: its records stay in order)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for key, text, kind in records:
        producer.produce(topic, key=key.encode(), value=None if text is None else text.encode(),
                         headers=None if kind is None else [("kind", kind.encode())])
    assert producer.flush(30) == 0


class TopicRun:
    """A stream over micro-batches whose rules are the control topic's."""

    def __init__(self, url: str, checkpoint=None) -> None:
        self.found: list = []
        self.notes: list[str] = []
        job = live_job(url, OPTIONS, 10 * SECOND, False)
        self.operator = StreamOperator(job, lateness_us=0, watch=job.watch(url),
                                       checkpoint=checkpoint,
                                       on_matches=lambda m, b: self.found.append(m))

    def batch(self, batch_id: int, chunk) -> None:
        self.notes += self.operator.process(batch_id, chunk).notes

    def reported(self) -> Counter:
        rows = [row for table in self.found for row in
                table.select(["rule", "version", "match_id"]).to_pylist()]
        return Counter((r["rule"], r["version"], r["match_id"]) for r in rows)


def test_control_topic_changes_apply_at_the_next_batch_and_survive_a_restart(
        kafka_broker, tmp_path) -> None:
    topic = "rules-control-live"
    kafka_broker.create_topic(topic, partitions=2)
    url = f"kafka://{kafka_broker.bootstrap}/{topic}"
    send(kafka_broker, topic, [("pair.sal", TEXTS["pair.sal"], None),
                               ("back.ddst", TEXTS["back.ddst"], None),
                               ("echo", TEXTS["echo.subs"], "subs")])
    stream = edges_table([((7 * i) % 31, "abcd"[i % 4], "abcd"[(3 * i + 1) % 4])
                          for i in range(60)])
    chunks = cut(stream, [0.25, 0.5, 0.75])
    marks = watermarks(chunks)
    checkpoint = tmp_path / "ckpt"
    first = TopicRun(url, checkpoint)
    assert {rule.name for rule in first.operator.job.rules} == {
        "pair.sal", "back.ddst", "echo.subs"}
    first.batch(0, chunks[0])
    # live: back.nu added (kind from its header), back.ddst removed (a tombstone)
    send(kafka_broker, topic, [("back", TEXTS["back.nu"], "nu"), ("back.ddst", None, None),
                               ("early", "x", "kind-before-the-crash")])
    first.batch(1, chunks[1])
    assert sum("kind-before-the-crash" in note for note in first.notes) == 1
    assert any(note.startswith("rules: added back.nu version") for note in first.notes)
    assert any(note.startswith("rules: removed back.ddst") for note in first.notes)
    first.batch(2, chunks[2])
    del first.operator  # as a crash after batch 2: nothing more is written
    # while down: pair.sal changed, a broken rule, a record that is no rule file
    send(kafka_broker, topic, [("pair.sal", CHANGED["pair.sal"], None),
                               ("bad.sal", "{ x e1 y; starttime(e1) < ; }", None),
                               ("odd", "x", "no-such-kind")])
    second = TopicRun(url, checkpoint)
    assert second.operator.resume() == 2
    second.batch(3, chunks[3])
    second.notes += second.operator.flush().notes
    version = rules.version_of(CHANGED["pair.sal"])
    assert any(f"changed pair.sal version {version}" in note for note in second.notes)
    assert any(f"{url} bad.sal:1:" in note for note in second.notes), second.notes
    assert any("no-such-kind" in note for note in second.notes), second.notes
    # the topic is read on from the checkpoint's offsets: what was read before, not again
    assert not any("kind-before-the-crash" in note for note in second.notes)
    at_add, at_change = marks[1], marks[3]
    spare = tmp_path / "oracle"
    spare.mkdir()
    expected: Counter = Counter()
    for name, text, since, until in (
            ("pair.sal", TEXTS["pair.sal"], NEVER, at_change),
            ("pair.sal", CHANGED["pair.sal"], at_change, float("inf")),
            ("back.ddst", TEXTS["back.ddst"], NEVER, at_add),
            ("echo.subs", TEXTS["echo.subs"], NEVER, float("inf")),
            ("back.nu", TEXTS["back.nu"], at_add, float("inf"))):
        for rule in file_rules(spare, name, text):
            expected += batch_oracle(rule, stream, since, until)
    assert first.reported() + second.reported() == expected
    assert {rule for rule, _, _ in expected} == {"pair.sal", "back.ddst", "echo.subs",
                                                  "back.nu"}


def test_a_missing_control_topic_is_one_line(kafka_broker) -> None:
    from graphcep.patterns.subgraph import QueryError

    with pytest.raises(QueryError, match="no topic rules-control-absent"):
        live_job(f"kafka://{kafka_broker.bootstrap}/rules-control-absent", OPTIONS, None,
                 False)


@pytest.mark.parametrize("key, value, kind, files, says", [
    (b"pair.sal", b"text", None, {"pair.sal": "text"}, None),
    (b"pair", b"text", b"sal", {"pair.sal": "text"}, None),
    (b"r", b"text", b"regex", {"r.regex": "text"}, None),
    (b"old.sal", None, None, {}, None),
    (b"../x.sal", b"text", None, {"old.sal": "t"}, "not a rule's file name"),
    (None, b"text", None, {"old.sal": "t"}, "not a rule's file name"),
    (b"p", b"text", b"cobol", {"old.sal": "t"}, "names no kind of rule"),
    (b"p.sal", b"\xff", None, {"old.sal": "t"}, "not UTF-8"),
])
def test_a_record_folds_into_the_files_or_is_said(key, value, kind, files, says) -> None:
    held = {"old.sal": "t"}
    said = fold(held, key, value, None if kind is None else [("kind", kind)])
    assert (said is None) == (says is None) and (says is None or says in said)
    assert held == (files if says is not None or value is None
                    else {"old.sal": "t", **files})


@pytest.mark.spark
def test_stream_rules_from_a_control_topic_on_the_command_line(spark, kafka_broker, tmp_path,
                                                                capsys) -> None:
    """``graphcep stream --rules kafka://...`` end to end: the topic's rules over a
    directory's files, every rule's matches those of its own batch run."""
    import json

    from graphcep.cli import main
    from tests.runtime.test_rules_stream import envelope_keys, oracle_keys, write_snap

    topic = "rules-control-cli"
    kafka_broker.create_topic(topic, partitions=1)
    url = f"kafka://{kafka_broker.bootstrap}/{topic}"
    send(kafka_broker, topic, [("pair.sal", TEXTS["pair.sal"], None),
                               ("back", TEXTS["back.nu"], "nu")])
    stream = edges_table([((7 * i) % 31, "abcd"[i % 4], "abcd"[(3 * i + 1) % 4])
                          for i in range(60)])
    incoming = tmp_path / "in"
    incoming.mkdir()
    write_snap(stream, incoming / "part-0.snap")
    command = ["stream", "--rules", url, "--source", str(incoming), "--format", "snap",
               "--checkpoint", str(tmp_path / "ckpt"), "--output", str(tmp_path / "out") + "/",
               "--master", "local[2]", "--nu-engine", "interpreted", "--once", "--quiet"]
    assert main(command) == 0, capsys.readouterr().err[-2000:]
    rows = [json.loads(line) for part in sorted((tmp_path / "out").glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]
    expected = oracle_keys(tmp_path / "oracle", [
        ("pair.sal", TEXTS["pair.sal"], NEVER, float("inf")),
        ("back.nu", TEXTS["back.nu"], NEVER, float("inf"))], stream)
    assert envelope_keys(rows) == expected and len({r for r, _, _ in expected}) == 2


def test_run_refuses_a_control_topic_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    """Also where the default rejects file of an earlier run lies in the current
    directory (its check against the inputs once stat'ed the topic as a file)."""
    from graphcep.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "rejects.jsonl").write_text("")
    (tmp_path / "e.snap").write_text("a b 0\n")
    status = main(["run", "--rules", "kafka://localhost:1/rules", "-i",
                   str(tmp_path / "e.snap"), "--engine", "local"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "graphcep stream" in err[0], err


def closed_loopback_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_control_topic_is_one_line_and_status_2_within_seconds(
        tmp_path, capsys) -> None:
    """As the Kafka source's unreachable broker: the address and what to check, not the
    client library's words."""
    import time

    from graphcep.cli import main

    port = closed_loopback_port()
    (tmp_path / "in").mkdir()
    started = time.monotonic()
    status = main(["stream", "--rules", f"kafka://127.0.0.1:{port}/rules", "--source",
                   str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"), "--once"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert time.monotonic() - started < 15
    assert err[0] == (f"graphcep: --rules kafka://127.0.0.1:{port}/rules: no Kafka broker "
                      f"answers: 127.0.0.1:{port} (Connection refused); start the broker or "
                      "correct the address"), err


@pytest.mark.parametrize("options, rules_at, says", [
    # a security setting goes to the control topic's client, which then finds no broker
    (["kafka.security.protocol=PLAINTEXT"], "kafka", "no Kafka broker answers"),
    # and the client's checks see it: librdkafka has no Java trust store
    (["kafka.ssl.truststore.location=/nowhere.jks"], "kafka",
     "librdkafka, refuses the security settings (Java TrustStores are not supported"),
    # a reader option of Spark's Kafka source has no Kafka source to shape
    (["failOnDataLoss=false"], "kafka", "--kafka-option shapes a Kafka source"),
    # nothing is Kafka
    (["kafka.security.protocol=PLAINTEXT"], "dir", "--kafka-option shapes a Kafka source"),
])
def test_kafka_security_options_go_to_the_control_topic(tmp_path, capsys, options, rules_at,
                                                        says) -> None:
    from graphcep.cli import main

    port = closed_loopback_port()
    (tmp_path / "in").mkdir()
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "back.nu").write_text(TEXTS["back.nu"])
    rules_of = {"kafka": f"kafka://127.0.0.1:{port}/rules", "dir": str(tmp_path / "rules")}
    status = main(["stream", "--rules", rules_of[rules_at], "--source", str(tmp_path / "in"),
                   "--checkpoint", str(tmp_path / "ck"), "--once",
                   *(f"--kafka-option={pair}" for pair in options)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and says in err[0], err
