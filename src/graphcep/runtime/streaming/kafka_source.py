"""Kafka topics as a ``graphcep stream`` source (``--source kafka://BROKERS/TOPICS``).

Spark's own Kafka connector reads the topics (:mod:`graphcep.runtime.streaming.kafka_jars` says where
its jars come from); its offsets live in Spark's checkpoint, so a micro-batch a crash left
unfinished is read again, from the same offsets, at the restart: exactly once, as with
the files source. Each micro-batch's records are taken in (topic, partition, offset) order;
a record's value holds one line or several lines (``\\n``-separated) of a line format
graphcep reads (jsonl by default, csv, tsv, snap, vast, netflow5, the flow collectors'
JSON: goflow2-json, zeek-conn, pmacct), or goflow2 protobuf ``FlowMessage`` s
(``goflow2-pb``: one plain message, or length-prefixed ones as goflow2's ``-format bin``
writes them, a message standing for a line). All the values of a micro-batch
are cut into lines and parsed together by the line parsers of :mod:`graphcep.io.formats`,
as the socket source parses its lines: no Python call per record. ``seq`` numbers the lines
from the start of the stream. A line that does not parse is a reject naming its record
(topic, partition, offset) and its line within the record; the stream goes on.

With ``time_from_kafka`` (``--time kafka``) an edge's ``t`` is its record's Kafka timestamp
(producer or broker time, per the topic's ``message.timestamp.type``): a JSON line then
needs no ``t`` of its own, and any it has is replaced; a line of the other formats keeps
its time field (it must still parse), replaced as well.

Brokers that stop answering mid-stream are waited for ``broker_wait_s`` seconds
(``--broker-wait``: Spark's clients' timeouts, :func:`broker_wait_options`); longer, the
micro-batch fails with :class:`~graphcep.runtime.streaming.kafka_client.BrokerLost`
(:meth:`KafkaSource.brokers_lost`), before Spark commits it: the restart reads it again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats import (
    LINE_FORMATS,
    RECORD_FORMATS,
    ReaderOptions,
    parse_lines,
    prepare_options,
)
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming import kafka_jars
from graphcep.runtime.streaming.kafka_client import (
    BROKER_WAIT_S,
    CONNECT_TIMEOUT_S,
    BrokerLost,
    check_reachable,
)

#: The formats a record's value may hold: the line formats and goflow2's protobuf (the
#: whole-file formats and Parquet need files).
KAFKA_FORMATS = (*LINE_FORMATS, *RECORD_FORMATS)
DEFAULT_PORT = 9092
#: Kafka's legal topic names (``[a-zA-Z0-9._-]``, at most 249 characters).
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
#: Spark's words for records of a micro-batch that are gone (``failOnDataLoss``)
DATA_LOSS = re.compile(r"Could not read records in offset \[(\d+), (\d+)\) for topic "
                       r"partition (\S+)-(\d+)\b")
#: What Spark's Kafka clients raise when the brokers did not answer within their wait: the
#: admin client planning a micro-batch's offsets (Kafka's exception), or a consumer reading
#: its records (Spark's words; Java's exception alone may be another wait of Spark's)
NO_ANSWER = re.compile(r"org\.apache\.kafka\.common\.errors\.TimeoutException: ([^\n]*)|"
                       r"java\.util\.concurrent\.TimeoutException: (Cannot fetch record[^\n]*)")
#: Reader options graphcep sets from its own command-line options.
OWN_OPTIONS = {"kafka.bootstrap.servers": "the BROKERS of --source",
               "subscribe": "the TOPICS of --source",
               "subscribepattern": "the TOPICS of --source", "assign": "the TOPICS of --source",
               "startingoffsets": "--starting-offsets",
               "startingtimestamp": "--starting-offsets",
               "startingoffsetsbytimestamp": "--starting-offsets",
               "maxoffsetspertrigger": "--max-records-per-batch"}
#: A rejected line as a Kafka source writes it: the reader's columns (``file`` names the
#: record, ``line`` is the line within its value) and where the record lies.
KAFKA_REJECT_SCHEMA = pa.schema([
    pa.field("file", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),
    pa.field("text", pa.string()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
])


def parse_kafka_uri(text: str) -> tuple[list[tuple[str, int]], list[str]]:
    """``kafka://h1:9092,h2/t1,t2`` -> ``([("h1", 9092), ("h2", 9092)], ["t1", "t2"])``.

    A :class:`QueryError` (one line) for anything else.

    >>> parse_kafka_uri("kafka://127.0.0.1:9093/flows")
    ([('127.0.0.1', 9093)], ['flows'])
    """
    usage = f"--source {text!r}: expected kafka://BROKER[:PORT][,BROKER...]/TOPIC[,TOPIC...]"
    body = text.removeprefix("kafka://")
    brokers_text, slash, topics_text = body.partition("/")
    if not slash or not brokers_text or not topics_text:
        raise QueryError(usage)
    brokers = [_broker(item, usage) for item in brokers_text.split(",")]
    topics = topics_text.split(",")
    for topic in topics:
        if not TOPIC_NAME.match(topic) or topic in (".", ".."):
            raise QueryError(f"{usage}; {topic!r} is not a Kafka topic name (letters, "
                             "digits, '.', '_', '-', at most 249)")
    return brokers, topics


def _broker(item: str, usage: str) -> tuple[str, int]:
    host, colon, port = item.strip().rpartition(":") if ":" in item else (item.strip(), "", "")
    if not colon:
        port = str(DEFAULT_PORT)
    host = host.strip("[]")  # [::1]:9092
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise QueryError(f"{usage} (a port from 1 to 65535)")
    return host, int(port)


def starting_offsets(text: str) -> dict[str, str]:
    """``--starting-offsets``' reader options: ``earliest``, ``latest``, or an ISO-8601
    time (UTC when it names no zone) -> Spark's ``startingTimestamp`` in milliseconds.

    A partition with no record at or after that time starts at its end (Spark's
    ``startingOffsetsByTimestampStrategy=latest``): it has nothing from then on yet, and
    Spark's default would stop the whole stream for it."""
    if text in ("earliest", "latest"):
        return {"startingOffsets": text}
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(f"--starting-offsets {text!r}: expected earliest, latest or an "
                         "ISO-8601 time such as 2026-01-31T12:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    millis = int(when.timestamp() * 1000)
    if millis < 0:
        raise QueryError(f"--starting-offsets {text!r}: before 1970, when Kafka's "
                         "timestamps begin")
    return {"startingTimestamp": str(millis), "startingOffsetsByTimestampStrategy": "latest"}


def kafka_options(pairs: list[str] | None) -> dict[str, str]:
    """``--kafka-option KEY=VALUE`` (repeated) as reader options, passed to Spark as given
    (``kafka.security.protocol=SSL``, ``failOnDataLoss=false``, ...); those graphcep sets
    from its own options are refused, naming the option to use."""
    options: dict[str, str] = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise QueryError(f"--kafka-option {pair!r}: expected KEY=VALUE")
        if (owner := OWN_OPTIONS.get(key.lower())) is not None:
            raise QueryError(f"--kafka-option {key}: graphcep sets it from {owner}")
        options[key] = value
    return options


@dataclass
class KafkaSource:
    """Records of Kafka ``topics`` on ``brokers`` (see the module docstring)."""

    brokers: list[tuple[str, int]]
    topics: list[str]
    fmt: str = "jsonl"
    options: ReaderOptions = field(default_factory=ReaderOptions)
    starting: dict[str, str] = field(default_factory=lambda: {"startingOffsets": "earliest"})
    max_records_per_batch: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    time_from_kafka: bool = False
    #: a folder of the connector's jars (offline); None: Spark downloads them
    jars_dir: str | None = None
    _prepared: ReaderOptions | None = field(default=None, repr=False)
    #: ``--on-data-loss report``: records gone before they were read are a warning (and
    #: Spark, its failOnDataLoss false, reads on)
    report_data_loss: bool = False
    #: (topic, partition) -> the next offset to read, for the partitions this run has read
    _next_offsets: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)
    #: the client asking the partitions' end offsets after every batch (kept: see there)
    _offsets: Any = field(default=None, repr=False, compare=False)
    #: seconds Spark's clients wait for brokers that stopped answering (``--broker-wait``)
    broker_wait_s: float = BROKER_WAIT_S

    def __getstate__(self) -> dict[str, Any]:
        """The source as the executors get it with its ``read_part`` (pickled into every
        micro-batch's tasks): without the driver's offsets client, a live connection."""
        return {**self.__dict__, "_offsets": None}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.brokers)

    def describe(self) -> str:
        return f"kafka://{self.bootstrap}/{','.join(self.topics)}"

    def spark_conf(self) -> dict[str, str]:
        """The session settings that put the connector on Spark's classpath."""
        try:
            return connector_conf(self.jars_dir)
        except ValueError as err:
            raise QueryError(f"--kafka-jars: {err}") from None

    def check_reachable(self, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        """Refuse the stream in one line when no broker accepts a TCP connection within
        ``timeout_s`` (Spark's Kafka source would wait for one without end)."""
        check_reachable(self.brokers, f"--source {self.describe()}", timeout_s)

    def stream_df(self, spark: Any) -> Any:
        reader = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", self.bootstrap)
                  .option("subscribe", ",".join(self.topics)))
        for key, value in self.reader_options().items():
            reader = reader.option(key, value)
        if self.max_records_per_batch:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_records_per_batch))
        try:
            frame = reader.load()
        except Exception as err:
            if "kafka" in str(err).lower() and "data source" in str(err).lower():
                raise QueryError(
                    "Spark's Kafka connector is not on this session's classpath (a session "
                    "started without it is reused): give --kafka-jars DIR or set "
                    f"{kafka_jars.JARS_ENV} before Spark starts") from None
            raise
        return frame.select("topic", "partition", "offset", "timestamp", "value")

    def reader_options(self) -> dict[str, str]:
        """Spark's reader options but the brokers and topics: where to start, the waits
        of :func:`broker_wait_options`, then the ``--kafka-option`` pairs, which win over
        a wait of the same name (Spark's option names ignore case)."""
        given = {key.lower() for key in self.extra}
        waits = {key: value for key, value in broker_wait_options(self.broker_wait_s).items()
                 if key.lower() not in given}
        return {**self.starting, **waits, **self.extra}

    def brokers_lost(self, text: str, batch_id: int) -> BrokerLost | None:
        """Micro-batch ``batch_id``'s failure ``text`` (Spark's, Java's) as the brokers not
        answering within the wait, in one line naming them and the batch; None for
        another failure."""
        found = NO_ANSWER.search(text)
        if found is None:
            return None
        said = found.group(1) or found.group(2)
        reason = re.sub(r"\s*SQLSTATE: \w+\s*$", "", said)  # Spark's error code
        return BrokerLost(f"kafka://{self.bootstrap}: the brokers did not answer for "
                          f"{self.broker_wait_s:g} s (--broker-wait), micro-batch {batch_id} "
                          f"not read ({reason.strip()})")

    def read_batch(self, batch_df: Any, operator: Any) -> Any:
        from graphcep.runtime.streaming.sources import SourceBatch

        try:
            rows = batch_df.toArrow()
        except Exception as err:  # records gone: said in one line, naming them
            lost = DATA_LOSS.search(str(err))
            if lost is None:
                raise
            raise QueryError(self._data_loss(*lost.groups())) from None
        if rows.num_rows == 0:
            return SourceBatch(None)
        rows = rows.sort_by([("topic", "ascending"), ("partition", "ascending"),
                             ("offset", "ascending")])
        first = operator.totals.lines + 1
        edges, rejects, lines = self.parse_records(rows, first)
        lost = self.gaps(rows, operator) if self.report_data_loss else {}
        return SourceBatch(edges, rejects, 0, lines, {0: self.describe()},
                           places=self.places(rows, first), partition_lag=self.lag(rows),
                           lost=lost)

    def read_part(self, rows: pa.Table, place: Any = None) -> Any:
        """One executor task's records (``--matching executors``) parsed as
        :meth:`read_batch` parses a micro-batch's: each partition's run of records is a
        chunk (:class:`~graphcep.runtime.streaming.sources.SourcePart`) ordered by (topic,
        partition, first offset), so the cells number its lines as the driver mode does:
        from the start of the stream, in (topic, partition, offset) order."""
        from graphcep.events import concat_edges, empty_edges
        from graphcep.runtime.streaming.sources import SourcePart, file_key

        rows = rows.sort_by([("topic", "ascending"), ("partition", "ascending"),
                             ("offset", "ascending")])
        edges, rejects, chunks, lines = [], [], [], 0
        for run in _partition_runs(rows):
            topic, partition = run.column("topic")[0].as_py(), run.column("partition")[0].as_py()
            first = run.column("offset")[0].as_py()
            order = (topic, partition, first)
            key = file_key(f"{topic}/{partition}@{first}")
            found, refused, count = self.parse_records(run, 1)
            edges.append(found.append_column("_file", pa.array(
                np.full(found.num_rows, key, np.int64))))
            rejects.append(refused)
            chunks.append((order, key, count))
            lines += count
        return SourcePart(concat_edges(edges) if edges else empty_edges(), [], lines,
                          pa.concat_tables(rejects) if rejects else None, chunks)

    def gaps(self, rows: pa.Table, operator: Any) -> dict[str, str]:
        """``--on-data-loss report``: ``TOPIC/PARTITION`` -> the offsets (``A-B``) of its
        records between the batch's start offset (Spark's offsets log) and the first it
        holds that are gone -- deleted before they were read, the partition's earliest
        offset now past them (a gap there is otherwise a transaction's marker, or records
        of an aborted one)."""
        from graphcep.runtime.streaming.kafka_client import earliest_offset

        starts = self._batch_starts(operator)
        firsts = rows.group_by(["topic", "partition"]).aggregate([("offset", "min")])
        lost = {}
        for topic, partition, first in zip(*(firsts.column(n).to_pylist() for n in (
                "topic", "partition", "offset_min")), strict=True):
            start = starts.get((topic, partition))
            if start is None or first <= start:
                continue
            earliest = earliest_offset(self.bootstrap, self._client_settings(), topic,
                                       partition)
            if earliest is None or earliest <= start:
                continue
            lost[f"{topic}/{partition}"] = f"{start}-{min(earliest, first) - 1}"
        return lost

    @staticmethod
    def _batch_starts(operator: Any) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset the micro-batch under way starts at: the end
        of the batch before it in Spark's offsets log (empty: none logged)."""
        state_dir = getattr(operator, "state_dir", None)
        if state_dir is None:
            return {}
        return offsets_logged(state_dir.parent / "spark" / "offsets" / str(operator.resume()))

    def lag(self, rows: pa.Table) -> dict[str, int] | None:
        """``TOPIC/PARTITION`` -> records not read yet (the partition's end offset less the
        next offset to read), for each partition this run has read; None when the brokers
        cannot be asked (no confluent-kafka)."""
        ends = self._next_offsets
        grouped = rows.group_by(["topic", "partition"]).aggregate([("offset", "max")])
        for topic, partition, last in zip(*(grouped.column(n).to_pylist() for n in (
                "topic", "partition", "offset_max")), strict=True):
            ends[(topic, partition)] = last + 1
        return self._lag_behind(ends)

    def lag_after(self, spark_dir: Path, batch_id: int) -> dict[str, int] | None:
        """As :meth:`lag`, after micro-batch ``batch_id`` of the executor mode, whose
        records the driver does not see: the next offsets to read are the batch's end in
        Spark's offsets log under ``spark_dir`` (written before the batch runs), for every
        partition of the topics."""
        return self._lag_behind(offsets_logged(spark_dir / "offsets" / str(batch_id)))

    def _lag_behind(self, ends: dict[tuple[str, int], int]) -> dict[str, int] | None:
        """``TOPIC/PARTITION`` -> each partition's end offset less ``ends``' offset."""
        from graphcep.runtime.streaming.kafka_client import OffsetsClient, end_offsets

        if self._offsets is None:
            self._offsets = OffsetsClient(self.bootstrap, self._client_settings())
        latest = end_offsets(self.bootstrap, self._client_settings(), list(ends),
                             client=self._offsets)
        if latest is None:
            return None
        return {f"{topic}/{partition}": max(0, latest[(topic, partition)] - offset)
                for (topic, partition), offset in sorted(ends.items())
                if (topic, partition) in latest}

    def close(self) -> None:
        """Release the client the lag is asked with (the stream has stopped)."""
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None

    def _client_settings(self) -> dict[str, str]:
        from graphcep.runtime.streaming.kafka_client import client_settings

        return client_settings(self.extra)

    def _data_loss(self, start: str, until: str, topic: str, partition: str) -> str:
        """The line for records of ``[start, until)`` that Spark could not read (deleted
        by retention, or with their topic): the offsets lost, from the partition's
        earliest offset now where the brokers tell it."""
        from graphcep.runtime.streaming.kafka_client import earliest_offset

        first, end = int(start), int(until)
        earliest = earliest_offset(self.bootstrap, self._client_settings(), topic,
                                   int(partition))
        if earliest is not None and first < earliest:
            gone = f"offsets {first}-{min(earliest, end) - 1}" + (
                " and the rest of the batch's" if earliest > end else "")
        else:
            gone = f"offsets from {first} (the batch's went to {end - 1})"
        return (f"--source {self.describe()}: records deleted before they were read "
                f"(retention): topic {topic}, partition {partition}, {gone}; "
                "--kafka-option failOnDataLoss=false reads on past them")

    @staticmethod
    def places(rows: pa.Table, first_line: int) -> pa.Table:
        """Each record's topic, partition and offset, and the ``seq`` of its first line
        (numbered from ``first_line`` as :meth:`parse_records` numbers them), for the
        records of late edges (:func:`~graphcep.runtime.streaming.driver.late_records`)."""
        from graphcep.runtime.streaming.driver import record_places

        counts = pc.list_value_length(_value_lines(rows.column("value").combine_chunks()))
        starts = first_line + np.concatenate(
            [[0], np.cumsum(counts.to_numpy(zero_copy_only=False))[:-1]])
        return record_places(starts, rows.column("topic").combine_chunks(),
                             rows.column("partition").combine_chunks(),
                             rows.column("offset").combine_chunks())

    def parse_records(self, rows: pa.Table, first_line: int) -> tuple[pa.Table, pa.Table, int]:
        """Edges and rejects of ``rows`` (topic, partition, offset, timestamp, value), their
        lines numbered from ``first_line``; and how many lines there were. A protobuf
        format's messages stand for lines (:meth:`_parse_messages`)."""
        if self.fmt in RECORD_FORMATS:
            return self._parse_messages(rows, first_line)
        lists = _value_lines(rows.column("value").combine_chunks())
        lines = pc.list_flatten(lists)
        owner = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
        numbers = np.arange(first_line, first_line + len(lines), dtype=np.int64)
        options = self._reader_options(lines)
        parsed = _with_placeholder_time(lines) if self._placeholder_time else lines
        edges, rejects = parse_lines(parsed, numbers, self.fmt, options)
        if self.time_from_kafka and edges.num_rows:
            edges = self._kafka_times(edges, rows, owner, first_line)
        starts = lists.offsets.to_numpy()[:-1]
        return edges, self._rejects(rejects, rows, owner, starts, first_line), len(lines)

    def _parse_messages(self, rows: pa.Table, first_line: int) -> tuple[pa.Table, pa.Table, int]:
        """goflow2 protobuf values, each one plain message or length-prefixed ones
        (:func:`~graphcep.io.formats.flow_pb.value_frames`), all decoded in one pass; a
        message is numbered as a line is, its reject names its record and its place in
        the value."""
        from graphcep.io.formats.flow_pb import parse_frames, value_frames  # numba

        buf, starts, ends, owner = value_frames(rows.column("value").combine_chunks())
        numbers = np.arange(first_line, first_line + len(starts), dtype=np.int64)
        edges, rejects = parse_frames(buf, starts, ends, numbers)
        if self.time_from_kafka and edges.num_rows:
            edges = self._kafka_times(edges, rows, owner, first_line)
        firsts = np.searchsorted(owner, np.arange(rows.num_rows))
        return edges, self._rejects(rejects, rows, owner, firsts, first_line), len(starts)

    @property
    def _placeholder_time(self) -> bool:
        return self.time_from_kafka and self.fmt == "jsonl"

    def _reader_options(self, lines: pa.Array) -> ReaderOptions:
        """The layout of csv/tsv/snap lines, fixed from the first lines this run reads
        (so that every record agrees with it)."""
        if self._prepared is None:
            head = [bytes(v).decode("utf-8", "replace") if isinstance(v, bytes) else v or ""
                    for v in lines.slice(0, 64).to_pylist()]
            self._prepared = prepare_options(self.fmt, head, self.options)
        return self._prepared

    def _kafka_times(self, edges: pa.Table, rows: pa.Table, owner: np.ndarray,
                     first_line: int) -> pa.Table:
        stamps = pc.cast(rows.column("timestamp"), pa.timestamp("us")).cast(pa.int64())
        stamps = stamps.to_numpy(zero_copy_only=False)
        index = edges.column("seq").to_numpy() - first_line
        times = pa.array(stamps[owner[index]], pa.int64())
        return edges.set_column(edges.schema.get_field_index("t"), "t", times)

    def _rejects(self, rejects: pa.Table, rows: pa.Table, owner: np.ndarray,
                 starts: np.ndarray, first_line: int) -> pa.Table:
        """The parser's rejects, each naming its record and its line within the record;
        the text is the line as it arrived (cut as the readers cut it)."""
        if rejects.num_rows == 0:
            return KAFKA_REJECT_SCHEMA.empty_table()
        index = rejects.column("line").to_numpy() - first_line
        record = owner[index]
        taken = pa.array(record)
        topic = pc.take(rows.column("topic"), taken).cast(pa.string())
        partition = pc.take(rows.column("partition"), taken).cast(pa.int32())
        offset = pc.take(rows.column("offset"), taken).cast(pa.int64())
        place = pc.binary_join_element_wise(
            topic, "/", pc.cast(partition, pa.string()), "@", pc.cast(offset, pa.string()), "")
        text = rejects.column("text")  # decoded and cut as the readers do
        if self._placeholder_time:
            text = pc.replace_substring_regex(text, pattern=PLACEHOLDER_PATTERN,
                                              replacement="}", max_replacements=1)
        return pa.table([place, pa.array(index - starts[record] + 1, pa.int64()),
                         rejects.column("reason"), text, topic, partition, offset],
                        schema=KAFKA_REJECT_SCHEMA)


def offsets_logged(log: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset in one entry of Spark's offsets log of a Kafka source
    (where the micro-batch it names ends: the next offset to read); empty: none logged."""
    if not log.is_file():
        return {}
    lines = log.read_text().splitlines()
    try:  # a version line, the batch's metadata, then the source's offsets
        offsets = json.loads(lines[2])
    except (IndexError, ValueError):
        return {}
    return {(topic, int(partition)): int(offset)
            for topic, parts in offsets.items() for partition, offset in parts.items()}


def broker_wait_options(wait_s: float) -> dict[str, str]:
    """The reader options that make Spark's Kafka clients wait ``wait_s`` seconds for
    brokers that stopped answering, then fail: the driver's admin client, which asks the
    offsets each micro-batch plans (``kafka.default.api.timeout.ms``, in one attempt:
    ``fetchOffset.numRetries``, where Spark's default makes three attempts of 60 s), and
    the executors' consumers, which read the records (``kafkaConsumer.pollTimeoutMs``, and
    the same API timeout for their offset requests). Within the wait a request that got
    no answer is sent again (``kafka.request.timeout.ms``: Kafka's 30 s, or the wait when
    shorter -- the admin client takes no request timeout over its API timeout)."""
    wait_ms = max(1, round(wait_s * 1000))
    return {"kafka.default.api.timeout.ms": str(wait_ms),
            "kafka.request.timeout.ms": str(min(wait_ms, 30_000)),
            "kafkaConsumer.pollTimeoutMs": str(wait_ms),
            "fetchOffset.numRetries": "1"}


def _partition_runs(rows: pa.Table) -> list[pa.Table]:
    """Records sorted by (topic, partition, offset) cut where the partition changes (a
    Spark task of the Kafka source holds one partition's range; one run, then)."""
    if rows.num_rows == 0:
        return []
    topic = rows.column("topic").combine_chunks()
    partition = rows.column("partition").combine_chunks()
    changed = pc.or_(pc.not_equal(topic.slice(1), topic.slice(0, len(topic) - 1)),
                     pc.not_equal(partition.slice(1), partition.slice(0, len(partition) - 1)))
    cuts = [0, *(np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1), rows.num_rows]
    return [rows.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _value_lines(values: pa.Array) -> pa.ListArray:
    """Each record's value cut at ``\\n`` (a final line end opens no line; a record
    without a value, a tombstone, is one empty line, which the parsers pass over)."""
    values = pc.fill_null(values.cast(pa.binary()), b"")
    values = pc.replace_substring_regex(values, pattern="\n$", replacement="",
                                        max_replacements=1)
    return pc.split_pattern(values, b"\n")


def _with_placeholder_time(lines: pa.Array) -> pa.Array:
    """JSON lines given a last ``"t": 0`` member (JSON's last duplicate wins), so that a
    line without a time parses; the Kafka timestamp replaces it."""
    return pc.replace_substring_regex(lines, pattern=r"}\s*$", replacement=PLACEHOLDER,
                                      max_replacements=1)


PLACEHOLDER = ',"t":0}'
PLACEHOLDER_PATTERN = re.escape(PLACEHOLDER) + "$"


def connector_conf(jars_dir: str | None) -> dict[str, str]:
    """Spark settings for the connector: the jars of ``jars_dir`` (``spark.jars``; a
    ``ValueError`` when it holds no connector), or, without one, its Maven coordinates
    (``spark.jars.packages``: Spark downloads it)."""
    if jars_dir is None:
        return {"spark.jars.packages": kafka_jars.connector_packages()}
    return {"spark.jars": ",".join(str(jar) for jar in kafka_jars.connector_jars(jars_dir))}


def jars_for(option: str | None) -> str | None:
    """The connector folder a stream uses: ``--kafka-jars``, else ``GRAPHCEP_KAFKA_JARS``,
    else the fetch's default folder when it is filled; None (Spark downloads the
    connector, ``spark.jars.packages``) otherwise."""
    chosen = option or kafka_jars.jars_dir_from_env()
    if chosen is not None:
        return str(Path(chosen).expanduser())
    default = kafka_jars.connector_dir()
    return str(default) if any(default.glob("spark-sql-kafka-0-10_*.jar")) else None
