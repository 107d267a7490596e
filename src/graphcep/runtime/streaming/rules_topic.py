"""A Kafka control topic as the rules of ``graphcep stream --rules kafka://BROKER/TOPIC``.

Each record of the topic is one rule file: its key the file's name (``pair.sal``), its
value the file's text; the kind is the name's suffix, or the record's ``kind`` header
(``sal``, ``nu``, ``ddst``, ``subs``, or a suffix such as ``.regex``: a name without that
suffix gets it, ``pair`` with ``kind: sal`` is the rule ``pair.sal``). A record with a
null value (a tombstone) removes the file; the newest record of a key is its content, as
a compacted topic keeps it.

The topic is folded into a private directory of files, which the directory's own watch
(:class:`~graphcep.jobs.rules.RulesWatch`) reads: the same rules, versions, refusals and
one-line notes, applied at the next micro-batch's watermark with the same exact semantics.
What has been read of the topic -- each partition's next offset and the files it made --
is part of the rules engine's snapshot (``RulesEngine.control``), so a stream's checkpoint
holds it: a restart continues with the rules in force at the checkpoint, then reads what
was written to the topic meanwhile and applies it at the checkpoint's watermark.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graphcep.jobs import rules
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming.kafka_client import (
    CONNECT_TIMEOUT_S,
    check_reachable,
    client_config,
    confluent,
    kafka_reason,
    settled_watermarks,
)
from graphcep.runtime.streaming.kafka_source import parse_kafka_uri

#: Seconds a read of the topic up to its end may take before it is given up (the rules in
#: force then stay, and the next micro-batch tries again).
READ_TIMEOUT_S = 30.0

#: The record header that names a rule's kind when its key does not.
KIND_HEADER = "kind"

#: partition -> the next offset to read
Offsets = dict[int, int]
#: file name -> text: the rules directory the topic's records make
Files = dict[str, str]


def is_control_topic(text: str | None) -> bool:
    return bool(text) and str(text).startswith("kafka://")


class RulesTopic:
    """The control topic ``kafka://BROKER[,BROKER...]/TOPIC``, read with confluent-kafka.

    Parameters
    ----------
    url
        ``kafka://BROKER/TOPIC`` (one topic).
    settings
        confluent-kafka settings (the security ones of ``--kafka-option``).
    """

    def __init__(self, url: str, settings: Mapping[str, str] | None = None) -> None:
        try:
            brokers, topics = parse_kafka_uri(url)
        except QueryError as err:
            raise QueryError(str(err).replace("--source", "--rules", 1)) from None
        if len(topics) != 1:
            raise QueryError(f"--rules {url}: name one control topic")
        self.url = url
        self.brokers = brokers
        self.bootstrap = ",".join(f"{host}:{port}" for host, port in brokers)
        self.topic = topics[0]
        self.settings = dict(settings or {})

    def read(self, offsets: Offsets, files: Files) -> tuple[Offsets, Files, list[str]]:
        """The records after ``offsets`` up to the topic's end now, folded into ``files``:
        the offsets after them, the files, and one line per record not taken (a key that
        is not a file name, an unknown kind, a value that is not UTF-8).

        Raises
        ------
        QueryError
            The brokers do not answer, the topic is absent, or its end is not reached
            within :data:`READ_TIMEOUT_S` (one line).
        """
        # librdkafka would answer an absent broker in its own words, after its timeout
        check_reachable(self.brokers, f"--rules {self.url}")
        kafka = confluent()
        consumer = kafka.Consumer(client_config(
            self.settings, bootstrap_servers=self.bootstrap, group_id="graphcep-rules",
            enable_auto_commit=False, auto_offset_reset="earliest"))
        try:
            return self._read(kafka, consumer, dict(offsets), dict(files))
        except kafka.KafkaException as err:
            raise QueryError(f"--rules {self.url}: {kafka_reason(err)}") from None
        finally:
            consumer.close()

    def _read(self, kafka: Any, consumer: Any, offsets: Offsets, files: Files
              ) -> tuple[Offsets, Files, list[str]]:
        ends = self._ends(kafka, consumer, offsets)
        due = {p: end for p, end in ends.items() if offsets[p] < end}
        notes: list[str] = []
        if not due:
            return offsets, files, notes
        consumer.assign([kafka.TopicPartition(self.topic, p, offsets[p]) for p in due])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(offsets[p] < end for p, end in due.items()):
            if time.monotonic() > deadline:
                raise QueryError(f"--rules {self.url}: the topic's end not reached within "
                                 f"{READ_TIMEOUT_S:g} s")
            message = consumer.poll(0.5)
            if message is None:  # transaction markers take offsets and bring no record
                for tp in consumer.position([kafka.TopicPartition(self.topic, p)
                                             for p in due]):
                    if tp.offset >= 0:
                        offsets[tp.partition] = max(offsets[tp.partition], tp.offset)
                continue
            if message.error():
                raise kafka.KafkaException(message.error())
            offsets[message.partition()] = message.offset() + 1
            note = fold(files, message.key(), message.value(), message.headers())
            if note is not None:
                notes.append(f"rules: {self.url} partition {message.partition()} offset "
                             f"{message.offset()}: {note}")
        return offsets, files, notes

    def _ends(self, kafka: Any, consumer: Any, offsets: Offsets) -> Offsets:
        """Each partition's end now; ``offsets`` completed with each partition's start
        (and moved past records the brokers deleted meanwhile)."""
        topic = consumer.list_topics(self.topic, timeout=CONNECT_TIMEOUT_S).topics.get(
            self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise QueryError(f"--rules {self.url}: the brokers have no topic {self.topic}"
                             + (f" ({topic.error.str()})" if topic is not None
                                and topic.error is not None else ""))
        ends = {}
        for partition in sorted(topic.partitions):
            low, high = settled_watermarks(
                consumer, kafka.TopicPartition(self.topic, partition), CONNECT_TIMEOUT_S)
            offsets[partition] = max(offsets.get(partition, low), low)
            ends[partition] = high
        return ends


def fold(files: Files, key: bytes | None, value: bytes | None,
         headers: list[tuple[str, bytes | None]] | None) -> str | None:
    """Apply one record to ``files``: a file set, or removed (a null value). What is
    wrong with a record it does not take, in words (None: taken)."""
    name = (key or b"").decode("utf-8", errors="replace")
    if not name or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        return f"key {name!r} is not a rule's file name"
    kind = dict(headers or {}).get(KIND_HEADER)
    if kind is not None:
        suffix = _suffix_of(kind.decode("utf-8", errors="replace"))
        if suffix is None:
            return f"{name}: header {KIND_HEADER}={kind!r} names no kind of rule"
        if not name.lower().endswith(suffix):
            name += suffix
    if value is None:
        files.pop(name, None)
        return None
    try:
        files[name] = value.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        return f"{name}: not UTF-8 text ({err.reason} at byte {err.start})"
    return None


def _suffix_of(kind: str) -> str | None:
    """The file suffix of a kind named by its name (``sal``) or a suffix (``regex``,
    ``.regex``)."""
    from graphcep.jobs import KINDS

    wanted = kind.strip().lower()
    dotted = wanted if wanted.startswith(".") else f".{wanted}"
    for job_kind in KINDS:
        if job_kind.suffixes and wanted == job_kind.name:
            return job_kind.suffixes[0]
        if dotted in job_kind.suffixes:
            return dotted
    return None


def write_files(folder: Path, files: Files) -> None:
    """Make ``folder`` hold exactly ``files`` (a file rewritten only when its text
    changed)."""
    for path in folder.iterdir():
        if path.name not in files:
            path.unlink()
    for name, text in files.items():
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


class TopicRulesWatch(rules.RulesWatch):
    """The control topic, read before each micro-batch from the offsets the engine's
    state holds; what changed applied as a directory's changes are."""

    def __init__(self, topic: RulesTopic, folder: Path, options: Mapping[str, Any]) -> None:
        super().__init__(folder, options)
        self.topic = topic

    def changes(self, engine: rules.RulesEngine) -> list[str]:
        control = engine.control or {"offsets": {}, "files": {}}
        try:
            offsets, files, notes = self.topic.read(control["offsets"], control["files"])
        except QueryError as err:
            return [f"rules: {err}; keeping the {len(engine.live):,} rules in force"]
        engine.control = {"offsets": offsets, "files": files}
        write_files(self.directory, files)
        return notes + [self._named(note) for note in super().changes(engine)]

    def _named(self, note: str) -> str:
        """A note naming the private directory's file as the topic's record."""
        return note.replace(f"{self.directory}/", f"{self.topic.url} ")


def live_job(url: str, options: Mapping[str, Any], history_us: int | None,
             accept_partial: bool, settings: Mapping[str, str] | None = None
             ) -> rules.RulesJob:
    """The rules of the control topic ``url`` now, as a job whose rules change while the
    stream runs (its watch: :class:`TopicRulesWatch`); one line when the topic cannot be
    read."""
    topic = RulesTopic(url, settings)
    _, files, _ = topic.read({}, {})
    folder = Path(tempfile.mkdtemp(prefix="graphcep-rules-"))
    write_files(folder, files)
    job = rules.load(str(folder), options, strict=False).live(history_us, accept_partial)
    atexit.register(shutil.rmtree, folder, True)
    job.watch_factory = lambda: TopicRulesWatch(topic, folder, options)
    job.origin = url
    return job


__all__ = ["KIND_HEADER", "RulesTopic", "TopicRulesWatch", "fold", "is_control_topic",
           "live_job", "write_files"]
