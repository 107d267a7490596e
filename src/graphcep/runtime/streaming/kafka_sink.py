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
(:class:`~graphcep.runtime.streaming.driver.StreamOperator`) commits the transaction after its
writes and *before* its own state ``state-b`` (its ``commit`` hook). The steps of a batch:

0. Spark logs the batch's input (its offsets: files, Kafka offsets) before running it;
1. the operator loads ``state-(b-1)``, matches, and stages the records;
2. the transaction commits -- records and marker visible together, or neither;
3. ``state-b`` is written;
4. Spark logs ``b`` done, and plans ``b + 1`` (step 0 again).

At start the sink calls ``init_transactions``: the broker fences every earlier producer
of the id and finishes its open transaction -- aborted if it had not asked to commit,
committed if it had -- before answering. Only then is the last marker ``L`` read
(``read_committed``, to the partition's last stable offset), so ``L`` is the last batch
whose records are visible, and no older process can make another visible. A SIGKILL

* before (0): nothing of ``b`` exists; Spark plans it afresh at the restart;
* in (1) or (2) before the commit: the transaction is aborted by the restart's
  ``init_transactions``; none of its records is ever seen by a ``read_committed``
  consumer. Spark runs ``b`` again with the input it logged in (0), from
  ``state-(b-1)``; the engine is deterministic (match ids hash the edges' ``seq``), so the
  same records are written in a new transaction;
* after (2), before (3) or (4): Spark runs ``b`` again, from ``state-(b-1)``; ``b <= L``,
  so the sink drops the batch's records instead of committing them again (the state and
  the progress still advance): nothing is repeated;
* after (4): Spark starts at ``b + 1``, which ``L`` does not hold yet.

So a batch id always names the same records, and ``L`` says which batch ids were
delivered: each record is delivered once. Step (2) before (3) matters: the other order
could lose a batch (state saved, transaction aborted, batch not re-run).

The end of input (``--once``) is the exception: its flush, batch ``F = last + 1`` with
``"final": true``, reports every match still waiting for the watermark, and is not
checkpointed. Run again with nothing new, the same flush is found delivered and skipped.
Run again with new input, Spark's batches go on from ``F`` (``state-(F-1)``), and the
matches the flush delivered come again as the watermark passes their edges -- in batch
``F`` or later ones. So the flush's match ids are *carried*: written with the flush, in
records of at most :data:`FLUSH_PART_BYTES` each (keyed ``TXN/flush/K``; a flush of many
matches would not fit in one record of Kafka's default largest, 1 MB), named by every later
marker, and dropped from the output of every later batch, until the operator says the
stream has settled past the flush (``settled``: every match whose edges lie before the
flush's last edge has been reported again; a query over the whole stream, or windowed by
edge counts, carries them until the next flush). A Kafka record cannot be taken back: a
flushed match that the longer stream does not report (one reported at the end of input
only) stays.

A zombie (an old process still running) is fenced by the new ``init_transactions``: its
next commit fails instead of writing.

A source that cannot be read again (a socket) breaks "a batch id always names the same
records": killed after (2) and before (3), the restart cannot run ``b`` again, and a new
batch numbered ``b`` would be dropped as delivered. Such a restart therefore numbers its
batches after ``L`` (:meth:`KafkaTransactions.delivered_batch`), and its lines after
``b``'s (match ids hash them; the marker holds the stream's line count): see
:func:`~graphcep.runtime.streaming.query.restart_socket_checkpoint`.

Brokers that stop answering: a transaction waits for them ``wait_s`` seconds
(``--broker-wait``; the producer's ``transaction.timeout.ms`` and ``message.timeout.ms``
too), then the batch fails with :class:`BrokerLost` -- not aborted by the producer (the
brokers are not there to hear it): the broker aborts it after its timeout, or the next
start's ``init_transactions`` does. The batch was not committed, so it is the case
"in (1) or (2) before the commit" above.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from graphcep.io.sinks import SAL_MATCHES, MatchFormat, Sink
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming.kafka_client import (
    BROKER_WAIT_S,
    BrokerLost,
    client_config,
    confluent,
    kafka_reason,
    settled_watermarks,
)

SCHEME = "kafka://"
#: The commit topic of an output topic ``T`` is ``T`` + this suffix.
COMMITS_SUFFIX = ".graphcep-batches"
#: Seconds to wait for the steps of the start (topics, fencing, the last marker).
TRANSACTION_TIMEOUT_S = 60.0
#: The roles a Kafka topic can take, as their options name them.
ROLES = ("output", "late", "rejects")
#: The most bytes of match ids one record of a flush's ids holds: well under Kafka's
#: default largest record (1 MB, the broker's ``message.max.bytes``).
FLUSH_PART_BYTES = 512 * 1024


class KafkaSinkError(OSError):
    """A Kafka write that failed (a broker gone, a producer fenced by a newer start)."""


def is_kafka_target(target: object) -> bool:
    """Whether an ``--output``/``--late``/``--rejects`` value names a Kafka topic."""
    return isinstance(target, str) and target.startswith(SCHEME)


def kafka_targets_of(args: Any) -> dict[str, str]:
    """role -> ``kafka://...`` text for the roles of ``args`` that name Kafka."""
    return {role: getattr(args, role) for role in ROLES
            if is_kafka_target(getattr(args, role, None))}


def parse_targets(targets: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The brokers (one ``bootstrap.servers`` text) and role -> topic of ``targets``: one
    topic each, all on one cluster (one transaction holds them)."""
    from graphcep.runtime.streaming.kafka_source import parse_kafka_uri

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


def bootstrap_brokers(bootstrap: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` pairs of a ``HOST:PORT,...`` bootstrap list (a host may be an
    IPv6 address: its last ``:`` is the port's)."""
    return [(host, int(port)) for host, _, port in
            (address.rpartition(":") for address in bootstrap.split(","))]


@dataclass
class _Carry:
    """The match ids an end-of-input flush delivered, skipped in the batches after it
    until the stream has settled past the flush (see the module docstring)."""

    #: the flush's micro-batch id: its ids are the records keyed ``TXN/flush/K`` of it
    batch: int
    #: every match whose edges all lie before this time was reported by the flush
    horizon: int | None
    ids: set[str]
    #: how many records hold the ids
    parts: int = 0

    def reference(self) -> dict[str, Any]:
        """What a marker says of the carry (the ids stay in their own records)."""
        return {"batch": self.batch, "horizon": self.horizon, "parts": self.parts}


def id_parts(ids: Iterable[str], limit: int = FLUSH_PART_BYTES) -> list[list[str]]:
    """``ids`` cut into lists whose JSON text stays under ``limit`` bytes each.

    >>> id_parts(["a" * 16] * 5, limit=60)
    [['aaaaaaaaaaaaaaaa', 'aaaaaaaaaaaaaaaa'], ['aaaaaaaaaaaaaaaa', 'aaaaaaaaaaaaaaaa'], ['aaaaaaaaaaaaaaaa']]
    """
    parts: list[list[str]] = []
    size = limit
    for match_id in ids:
        cost = len(match_id.encode()) + 4  # quotes, comma, space
        if size + cost > limit:
            parts.append([])
            size = 2
        parts[-1].append(match_id)
        size += cost
    return parts


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
                 query: str, settings: dict[str, str] | None = None,
                 wait_s: float = BROKER_WAIT_S) -> None:
        self.bootstrap, self.topics, self.txn_id, self.query = bootstrap, topics, txn_id, query
        #: how long a micro-batch's transaction waits for brokers that stopped answering
        self.wait_s = wait_s
        #: the security settings of every client (:func:`client_settings`)
        self.settings = dict(settings or {})
        self.commits_topic = topics.get("output", next(iter(topics.values()))) + COMMITS_SUFFIX
        self._producer: Any = None
        #: the last marker committed: its batch id, whether a final flush, its carry
        self.last: dict[str, Any] | None = None
        #: the ids of the last flush, while the stream has not settled past it
        self.carry: _Carry | None = None
        self._staged = _Staged()
        self.delivered = 0

    def start(self) -> None:
        """Create missing topics, fence earlier producers of this stream, read its last
        committed marker."""
        kafka = confluent()
        self._create_topics(kafka)
        self._producer = kafka.Producer(client_config(
            self.settings, bootstrap_servers=self.bootstrap, transactional_id=self.txn_id,
            enable_idempotence=True, linger_ms=5,
            # a record not acknowledged within the wait fails the transaction, which the
            # broker aborts by itself after it (if no restart fenced it first)
            transaction_timeout_ms=int(self.wait_s * 1000),
            message_timeout_ms=int(self.wait_s * 1000)))
        try:
            self._producer.init_transactions(TRANSACTION_TIMEOUT_S)
        except kafka.KafkaException as err:
            raise KafkaSinkError(f"kafka://{self.bootstrap}: the transactional producer "
                                 f"did not start ({kafka_reason(err)})") from None
        self.last, self.carry = self._last_marker(kafka)

    def _create_topics(self, kafka: Any) -> None:
        admin = kafka.admin.AdminClient(client_config(self.settings, bootstrap_servers=self.bootstrap))
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
                                         f"cannot be created ({kafka_reason(err)})") from None

    def _last_marker(self, kafka: Any) -> tuple[dict[str, Any] | None, _Carry | None]:
        """The newest committed marker of this stream (None: nothing delivered yet) and
        the flush ids it still carries, read back from their records."""
        last, parts = None, {}
        for key, value in self._commit_records(kafka):
            if key == self.txn_id:
                last = value
            elif key.startswith(self._part_key("")):
                parts[key] = value
        reference = (last or {}).get("carry")
        if reference is None:
            return last, None
        ids: set[str] = set()
        for k in range(reference["parts"]):
            part = parts.get(self._part_key(k))
            if part is None or part["batch"] != reference["batch"]:
                raise KafkaSinkError(f"kafka://{self.bootstrap}/{self.commits_topic}: the "
                                     f"ids flushed in micro-batch {reference['batch']} are "
                                     f"missing (record {self._part_key(k)})")
            ids.update(part["match_ids"])
        return last, _Carry(reference["batch"], reference["horizon"], ids, reference["parts"])

    def _part_key(self, k: int | str) -> str:
        return f"{self.txn_id}/flush/{k}"

    def _commit_records(self, kafka: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, value) of every committed record of the commit topic, oldest first."""
        consumer = kafka.Consumer(client_config(
            self.settings, bootstrap_servers=self.bootstrap, group_id=self.txn_id,
            enable_auto_commit=False,
            isolation_level="read_committed", enable_partition_eof=True))
        try:
            part = kafka.TopicPartition(self.commits_topic, 0, kafka.OFFSET_BEGINNING)
            # read_committed: the last stable offset, past every committed transaction
            try:
                _, end = settled_watermarks(consumer, part, TRANSACTION_TIMEOUT_S)
            except kafka.KafkaException as err:
                raise KafkaSinkError(f"kafka://{self.bootstrap}/{self.commits_topic}: its "
                                     f"offsets cannot be read ({kafka_reason(err)})") from None
            if end <= 0:
                return
            consumer.assign([part])
            deadline = time.monotonic() + TRANSACTION_TIMEOUT_S
            while time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                error = message.error()
                if error is None and message.key() is not None:
                    yield message.key().decode(), json.loads(message.value())
                if (error is not None and error.code() == kafka.KafkaError._PARTITION_EOF) \
                        or consumer.position([part])[0].offset >= end:
                    return
            raise KafkaSinkError(f"kafka://{self.bootstrap}/{self.commits_topic}: its "
                                 f"records could not be read within "
                                 f"{TRANSACTION_TIMEOUT_S:g} s")
        finally:
            consumer.close()

    def delivered_batch(self) -> int | None:
        """The last micro-batch of input whose records are delivered, as read at
        :meth:`start` (None: none). Not a final flush's id: the stream goes on with it."""
        if self.last is None:
            return None
        return self.last["batch"] - 1 if self.last.get("final") else self.last["batch"]

    def delivered_lines(self) -> int | None:
        """How many lines the stream had read through the last micro-batch delivered, as
        its marker says (None: nothing delivered, or a marker without the count)."""
        return None if self.last is None else self.last.get("lines")

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

    def commit(self, batch_id: int, final: bool = False, settled: int | None = None,
               lines: int | None = None) -> None:
        """Write micro-batch ``batch_id``'s staged records and its marker in one
        transaction -- unless it was delivered already (see the module docstring).

        ``settled``: every match whose edges all lie before this event time has been
        reported by this batch or an earlier one (None: no such time is known); at a
        final flush, the time before which the flush reported everything. ``lines``: the
        lines the stream has read through this batch, kept in the marker (a socket
        stream's restart numbers its lines after them)."""
        staged = self._staged if self._staged.batch_id == batch_id else _Staged(batch_id)
        self._staged = _Staged()
        skip = self._delivered_ids(batch_id, final)
        if skip is None:
            return
        output = self.topics.get("output")
        records = [r for r in staged.records
                   if not (skip and r[0] == output and r[1] is not None
                           and r[1].decode() in skip)]
        carry, parts = self._next_carry(batch_id, final, settled, staged.match_ids)
        marker = {"batch": batch_id, "final": final, "query": self.query}
        if lines is not None:
            marker["lines"] = lines
        if carry is not None:
            marker["carry"] = carry.reference()
        records += [(self.commits_topic, self._part_key(k).encode(),
                     json.dumps({"batch": batch_id, "part": k, "match_ids": ids}).encode())
                    for k, ids in enumerate(parts)]
        self._transaction(batch_id, records, marker)
        self.last, self.carry = marker, carry
        self.delivered += len(records) - len(parts)

    def _delivered_ids(self, batch_id: int, final: bool) -> set[str] | None:
        """None: the batch was delivered, write nothing; else the match ids a flush
        delivered that the stream, gone on past it, may report again."""
        last = self.last
        if last is not None and (batch_id < last["batch"] or (
                batch_id == last["batch"] and (final or not last.get("final")))):
            return None
        return self.carry.ids if self.carry is not None else set()

    def _next_carry(self, batch_id: int, final: bool, settled: int | None,
                    match_ids: list[str]) -> tuple[_Carry | None, list[list[str]]]:
        """The carry after this batch, and the records of ids to write for it (a flush's)."""
        carry = self.carry
        if final:  # the flush: its ids, and those still carried from an earlier flush
            ids = set(match_ids) | (carry.ids if carry is not None else set())
            if not ids:  # nothing flushed: nothing can come again
                return None, []
            parts = id_parts(sorted(ids), FLUSH_PART_BYTES)
            return _Carry(batch_id, settled, ids, len(parts)), parts
        if carry is None or (settled is not None and carry.horizon is not None
                             and settled >= carry.horizon):
            return None, []  # settled past the flush: none of its matches comes again
        return carry, []

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
            producer.commit_transaction(self.wait_s)
        except kafka.KafkaException as err:
            fenced = err.args[0].fatal() or err.args[0].code() in (
                kafka.KafkaError._FENCED, kafka.KafkaError.PRODUCER_FENCED)
            if not fenced and _no_answer(kafka, err.args[0].code()):
                # no abort: it would wait for the same brokers; the broker aborts the
                # transaction after its timeout, or the next start fences it
                raise BrokerLost(f"kafka://{self.bootstrap}: the brokers did not answer "
                                 f"for {self.wait_s:g} s (--broker-wait), micro-batch "
                                 f"{batch_id} not delivered ({kafka_reason(err)})") from None
            if not fenced:
                with contextlib.suppress(kafka.KafkaException):
                    producer.abort_transaction(self.wait_s)
            why = ("a newer start of this stream took over its transactions" if fenced
                   else kafka_reason(err))
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


def _no_answer(kafka: Any, code: int) -> bool:
    """Whether librdkafka's error ``code`` says the brokers did not answer in time (or at
    all)."""
    error = kafka.KafkaError
    return code in (error._TIMED_OUT, error._MSG_TIMED_OUT, error._TRANSPORT,
                    error._ALL_BROKERS_DOWN, error._TIMED_OUT_QUEUE, error.REQUEST_TIMED_OUT)


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
    as :class:`~graphcep.runtime.streaming.driver.PartWriter` writes them to files."""

    def __init__(self, transactions: KafkaTransactions, role: str) -> None:
        self.transactions, self.role = transactions, role

    def write(self, table: pa.Table, batch_id: int) -> None:
        from graphcep.io.json_lines import record_lines

        self.transactions.stage(self.role, batch_id, record_lines(table))


__all__ = [
    "BROKER_WAIT_S",
    "COMMITS_SUFFIX",
    "BrokerLost",
    "KafkaMatchSink",
    "KafkaPartWriter",
    "KafkaSinkError",
    "KafkaTransactions",
    "bootstrap_brokers",
    "is_kafka_target",
    "kafka_targets_of",
    "parse_targets",
    "transactional_id",
]
