"""``graphcep stream``'s Kafka sink: matches, late edges and rejected lines as Kafka
records, exactly once for a ``read_committed`` consumer.

``--output kafka://BROKER/TOPIC`` writes one record per match: its value the JSON object
the JSONL sink writes (:meth:`~graphcep.io.sinks.MatchFormat.lines`), its key the match
id, its headers ``graphcep.query`` (the query's name) and ``graphcep.batch`` (the
micro-batch id). ``--late`` and ``--rejects kafka://BROKER/TOPIC`` write one record per
late edge or rejected line, the JSON object their JSONL parts hold
(:func:`~graphcep.io.json_lines.record_lines`), with the same headers. All the topics
of one stream are on one cluster: they share one transaction.

Exactly once, and why
---------------------
One transactional producer per stream, its ``transactional.id`` a hash of the checkpoint
directory (resolved) and the query's name (:func:`transactional_id`): the same stream
restarted gets the same id, another stream another. Each micro-batch ``b`` is one Kafka
transaction holding every record of ``b`` -- matches, late edges, rejects -- and one
*marker* record ``{"batch": b, "final": ...}`` in the commit topic ``TOPIC.graphcep-batches``
(one partition, compacted, keyed by the transactional id). The operator
(:class:`~graphcep.runtime.streaming.StreamOperator`) commits the transaction after its
writes and *before* its own state ``state-b`` (its ``commit`` hook), so the steps of a
batch are: (1) records produced in the open transaction; (2) the transaction committed --
records and marker visible together, or neither; (3) ``state-b`` written; (4) Spark
records ``b`` done. At start the sink calls ``init_transactions``, which fences any earlier
producer of the same id and aborts its open transaction, then reads its last marker
``L`` (``read_committed``). A SIGKILL

* before (2): the transaction is aborted at the restart (or when it times out): none of
  its records is ever seen by a ``read_committed`` consumer. Spark runs ``b`` again from
  ``state-(b-1)`` with the same input (its offsets or file list are in its checkpoint),
  the engine is deterministic, and the same records are written in a new transaction;
* after (2), before (3) or (4): ``b`` runs again from ``state-(b-1)``; the marker says
  ``b <= L``, so the sink discards the batch's records instead of committing them again
  (the state and the progress still advance): nothing is repeated;
* after (4): Spark starts at ``b + 1``.

A zombie (an old process still running) is fenced by the new ``init_transactions``: its
next commit fails instead of writing. The end-of-input flush of ``--once`` is batch
``last + 1`` with ``"final": true`` and is not checkpointed: run again with nothing new, the
same flush is found delivered and skipped; run again with new input, Spark's next real
batch has the flush's id, and its matches are written less those the flush already
delivered (their ids are in the flush's marker) -- a Kafka record cannot be taken back, so
a flushed match that the longer stream would not have reported (a match reported at the
end of input only) stays.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from graphcep.io.sinks import SAL_MATCHES, MatchFormat, Sink
from graphcep.patterns.subgraph import QueryError

SCHEME = "kafka://"
#: The commit topic of an output topic ``T`` is ``T`` + this suffix.
COMMITS_SUFFIX = ".graphcep-batches"
#: Seconds to wait for a broker at start, and for a transaction's steps.
CONNECT_TIMEOUT_S = 3.0
TRANSACTION_TIMEOUT_S = 60.0
#: The roles a Kafka topic can take, as their options name them.
ROLES = ("output", "late", "rejects")


#: Where the Kafka clients' own log lines go: nowhere (a failure raises, one line).
_QUIET = logging.getLogger("graphcep.kafka_sink.client")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class KafkaSinkError(OSError):
    """A Kafka write that failed (a broker gone, a producer fenced by a newer start)."""


def is_kafka_target(target: object) -> bool:
    """Whether an ``--output``/``--late``/``--rejects`` value names a Kafka topic."""
    return isinstance(target, str) and target.startswith(SCHEME)


def kafka_targets_of(args: Any) -> dict[str, str]:
    """role -> ``kafka://...`` text for the roles of ``args`` that name Kafka."""
    return {role: getattr(args, role) for role in ROLES
            if is_kafka_target(getattr(args, role, None))}


def confluent() -> Any:
    """The ``confluent_kafka`` module, or one line saying how to install it."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 -- loads the submodule used below
    except ImportError:
        raise QueryError("a kafka:// output needs the confluent-kafka package: pip install "
                         "'graphcep[kafka]'") from None
    return confluent_kafka


def parse_targets(targets: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The brokers (one ``bootstrap.servers`` text) and role -> topic of ``targets``: one
    topic each, all on one cluster (one transaction holds them)."""
    from graphcep.runtime.kafka_source import parse_kafka_uri

    bootstraps, topics = set(), {}
    for role, text in targets.items():
        try:
            brokers, names = parse_kafka_uri(text)
        except QueryError as err:
            raise QueryError(f"--{role}: {err}") from None
        if len(names) != 1:
            raise QueryError(f"--{role} {text}: name one topic to write")
        bootstraps.add(",".join(f"{host}:{port}" for host, port in brokers))
        topics[role] = names[0]
    if len(bootstraps) > 1:
        raise QueryError(f"{', '.join(f'--{r} {t}' for r, t in targets.items())}: the Kafka "
                         "topics of one stream share one transaction, so one cluster: give "
                         "them the same brokers")
    if len(set(topics.values())) < len(topics):
        raise QueryError("--output, --late and --rejects name the same Kafka topic: give "
                         "each its own")
    return bootstraps.pop(), topics


def transactional_id(checkpoint: str | os.PathLike, query: str) -> str:
    """The producer's ``transactional.id``: the same for every start of one stream (its
    checkpoint directory, resolved, and its query), another for another stream."""
    text = f"{Path(checkpoint).resolve()}\0{query}"
    return "graphcep-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def check_reachable(bootstrap: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """One line when no broker of ``bootstrap`` accepts a TCP connection within
    ``timeout_s`` (the client would retry without end, logging each try)."""
    from graphcep.runtime.kafka_source import _connect_reason

    reasons = []
    for address in bootstrap.split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except OSError as err:
            reasons.append(f"{address} ({_connect_reason(err)})")
    raise QueryError(f"kafka://{bootstrap}: no Kafka broker answers: {'; '.join(reasons)}; "
                     "start the broker or correct the address")


def _client(**settings: Any) -> dict[str, Any]:
    """A client's settings, its log lines silenced (its failures raise, said in one line)."""
    return {**{key.replace("_", "."): value for key, value in settings.items()},
            "logger": _QUIET}


def _reason(err: BaseException) -> str:
    inner = err.args[0] if err.args else err
    text = inner.str() if hasattr(inner, "str") else str(inner)
    return " ".join(text.split())


@dataclass
class _Staged:
    """The records of the open micro-batch: (topic, key, value) each."""

    batch_id: int | None = None
    records: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    #: the match ids among them (a final flush's marker lists them)
    match_ids: list[str] = field(default_factory=list)
    #: the roles staged (each writes once per attempt at a batch)
    roles: set[str] = field(default_factory=set)


class KafkaTransactions:
    """One transactional producer for a stream's Kafka topics; one transaction per
    micro-batch (see the module docstring). :meth:`start` before the first batch; the
    writers :meth:`stage` records, the operator's hook calls :meth:`commit`."""

    def __init__(self, bootstrap: str, topics: dict[str, str], txn_id: str,
                 query: str) -> None:
        self.bootstrap, self.topics, self.txn_id, self.query = bootstrap, topics, txn_id, query
        self.commits_topic = topics.get("output", next(iter(topics.values()))) + COMMITS_SUFFIX
        self._producer: Any = None
        #: the last marker committed: batch id, whether a final flush, its match ids
        self.last: dict[str, Any] | None = None
        self._staged = _Staged()
        self.delivered = 0

    def start(self) -> None:
        """Create missing topics, fence earlier producers of this stream, read its last
        committed marker."""
        kafka = confluent()
        self._create_topics(kafka)
        self._producer = kafka.Producer(_client(
            bootstrap_servers=self.bootstrap, transactional_id=self.txn_id,
            enable_idempotence=True, linger_ms=5,
            transaction_timeout_ms=int(TRANSACTION_TIMEOUT_S * 1000)))
        try:
            self._producer.init_transactions(TRANSACTION_TIMEOUT_S)
        except kafka.KafkaException as err:
            raise KafkaSinkError(f"kafka://{self.bootstrap}: the transactional producer "
                                 f"did not start ({_reason(err)})") from None
        self.last = self._last_marker(kafka)

    def _create_topics(self, kafka: Any) -> None:
        admin = kafka.admin.AdminClient(_client(bootstrap_servers=self.bootstrap))
        have = admin.list_topics(timeout=TRANSACTION_TIMEOUT_S).topics
        wanted = [kafka.admin.NewTopic(name, -1, -1) for name in self.topics.values()
                  if name not in have]
        if self.commits_topic not in have:
            wanted.append(kafka.admin.NewTopic(self.commits_topic, 1, -1,
                                               config={"cleanup.policy": "compact"}))
        for name, future in admin.create_topics(wanted).items() if wanted else ():
            try:
                future.result(TRANSACTION_TIMEOUT_S)
            except kafka.KafkaException as err:
                if err.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaSinkError(f"kafka://{self.bootstrap}/{name}: the topic "
                                         f"cannot be created ({_reason(err)})") from None

    def _last_marker(self, kafka: Any) -> dict[str, Any] | None:
        """The newest committed marker of this stream (None: nothing delivered yet)."""
        consumer = kafka.Consumer(_client(
            bootstrap_servers=self.bootstrap, group_id=self.txn_id, enable_auto_commit=False,
            isolation_level="read_committed", enable_partition_eof=True))
        try:
            part = kafka.TopicPartition(self.commits_topic, 0, kafka.OFFSET_BEGINNING)
            _, end = consumer.get_watermark_offsets(part, timeout=TRANSACTION_TIMEOUT_S,
                                                    cached=False)
            consumer.assign([part])
            last, deadline = None, time.monotonic() + TRANSACTION_TIMEOUT_S
            while end > 0 and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                if message.error() is None and message.key() == self.txn_id.encode():
                    last = json.loads(message.value())
                position = consumer.position([part])[0].offset
                if position >= end or (message.error() is not None and
                                       message.error().code() == kafka.KafkaError._PARTITION_EOF):
                    return last
            if end > 0:
                raise KafkaSinkError(f"kafka://{self.bootstrap}/{self.commits_topic}: its "
                                     f"records could not be read within "
                                     f"{TRANSACTION_TIMEOUT_S:g} s")
            return last
        finally:
            consumer.close()

    def stage(self, role: str, batch_id: int, values: Iterable[str],
              keys: Iterable[str | None] | None = None) -> None:
        """Hold the records of ``role`` for micro-batch ``batch_id`` until :meth:`commit`."""
        staged = self._staged
        if staged.batch_id != batch_id or role in staged.roles:  # a batch begun and left
            self._staged = staged = _Staged(batch_id)  # (its attempt failed): afresh
        staged.roles.add(role)
        topic = self.topics[role]
        values = list(values)
        keys = list(keys) if keys is not None else [None] * len(values)
        if role == "output":
            staged.match_ids.extend(k for k in keys if k is not None)
        staged.records.extend((topic, None if k is None else k.encode(), v.encode())
                              for k, v in zip(keys, values, strict=True))

    def commit(self, batch_id: int, final: bool = False) -> None:
        """Write micro-batch ``batch_id``'s staged records and its marker in one
        transaction -- unless it was delivered already (see the module docstring)."""
        staged = self._staged if self._staged.batch_id == batch_id else _Staged(batch_id)
        self._staged = _Staged()
        skip = self._delivered_ids(batch_id, final)
        if skip is None:
            return
        records = [r for r in staged.records
                   if not (skip and r[0] == self.topics.get("output") and r[1] is not None
                           and r[1].decode() in skip)]
        marker = {"batch": batch_id, "final": final, "query": self.query}
        if final:
            marker["match_ids"] = staged.match_ids
        self._transaction(batch_id, records, marker)
        self.last = marker
        self.delivered += len(records)

    def _delivered_ids(self, batch_id: int, final: bool) -> set[str] | None:
        """None: the batch was delivered, write nothing; else the match ids of it
        already delivered (a flush's, followed by the stream going on)."""
        last = self.last
        if last is None or batch_id > last["batch"]:
            return set()
        if batch_id == last["batch"] and last.get("final") and not final:
            return set(last.get("match_ids", ()))
        return None

    def _transaction(self, batch_id: int, records: list[tuple[str, bytes | None, bytes]],
                     marker: dict[str, Any]) -> None:
        kafka = confluent()
        producer = self._producer
        headers = [("graphcep.query", self.query.encode()),
                   ("graphcep.batch", str(batch_id).encode())]
        try:
            producer.begin_transaction()
            for topic, key, value in records:
                self._produce(producer, topic, key, value, headers)
            self._produce(producer, self.commits_topic, self.txn_id.encode(),
                          json.dumps(marker).encode(), headers)
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except kafka.KafkaException as err:
            fenced = err.args[0].fatal() or err.args[0].code() in (
                kafka.KafkaError._FENCED, kafka.KafkaError.PRODUCER_FENCED)
            if not fenced:
                with contextlib.suppress(kafka.KafkaException):
                    producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            why = ("a newer start of this stream took over its transactions" if fenced
                   else _reason(err))
            raise KafkaSinkError(f"kafka://{self.bootstrap}: micro-batch {batch_id} not "
                                 f"delivered: {why}") from None

    @staticmethod
    def _produce(producer: Any, topic: str, key: bytes | None, value: bytes,
                 headers: list[tuple[str, bytes]]) -> None:
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers)
                producer.poll(0)
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)

    def close(self) -> None:
        """Release the producer (an open transaction is aborted by the broker, or fenced
        by the next start)."""
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None


class KafkaMatchSink(Sink):
    """Matches to the ``output`` topic of ``transactions``, keyed by match id."""

    def __init__(self, transactions: KafkaTransactions, matches: MatchFormat | None = None
                 ) -> None:
        self.transactions = transactions
        self.matches = matches or SAL_MATCHES
        self.rows_written = 0

    def write(self, table: pa.Table, batch_id: int | str | None = None) -> None:
        if batch_id is None or isinstance(batch_id, str):
            raise ValueError("a Kafka sink writes micro-batches, each by its integer id")
        table = table.select(self.matches.schema.names).cast(self.matches.schema)
        self.transactions.stage("output", batch_id, self.matches.lines(table),
                                table.column("match_id").to_pylist())
        self.rows_written += table.num_rows

    def close(self) -> None:
        self.transactions.close()


class KafkaPartWriter:
    """Late edges or rejected lines to their topic (``role``: ``late`` or ``rejects``),
    as :class:`~graphcep.runtime.streaming.PartWriter` writes them to files."""

    def __init__(self, transactions: KafkaTransactions, role: str) -> None:
        self.transactions, self.role = transactions, role

    def write(self, table: pa.Table, batch_id: int) -> None:
        from graphcep.io.json_lines import record_lines

        self.transactions.stage(self.role, batch_id, record_lines(table))


__all__ = [
    "COMMITS_SUFFIX",
    "KafkaMatchSink",
    "KafkaPartWriter",
    "KafkaSinkError",
    "KafkaTransactions",
    "check_reachable",
    "is_kafka_target",
    "kafka_targets_of",
    "parse_targets",
    "transactional_id",
]
