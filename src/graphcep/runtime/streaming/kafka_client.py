"""graphcep's own Kafka clients (confluent-kafka, librdkafka): what the Kafka sink
(:mod:`graphcep.runtime.streaming.kafka_sink`) and the checks of the Kafka source
(:mod:`graphcep.runtime.streaming.kafka_source`: its topics, its partitions' lag, records lost)
share -- the module, the settings from ``--kafka-option`` pairs, quiet clients, offsets.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import socket
import time
from collections.abc import Sequence
from typing import Any

from graphcep.patterns.subgraph import QueryError

#: Seconds to wait for a broker's answer at start, and to the checks' requests.
CONNECT_TIMEOUT_S = 3.0
#: Seconds a stream waits for brokers that stopped answering mid-stream, by default
#: (``--broker-wait``): a Kafka output's transaction, a Kafka source's reads; longer, the
#: stream fails (:class:`BrokerLost`).
BROKER_WAIT_S = 60.0

#: Where the Kafka clients' own log lines go: nowhere (a failure raises, one line).
_QUIET = logging.getLogger("graphcep.kafka.client")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def check_reachable(brokers: Sequence[tuple[str, int]], named: str,
                    timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """One line, led by ``named`` (``--source kafka://HOST:PORT/TOPIC``), when no broker of
    ``brokers`` accepts a TCP connection within ``timeout_s``: a Kafka client -- Spark's
    source, librdkafka -- would retry without end, logging each try, or answer in its own
    words (``Failed to get metadata: Local: Broker transport failure``)."""
    reasons = []
    for host, port in brokers:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as err:
            reasons.append(f"{host}:{port} ({_connect_reason(err)})")
    raise QueryError(f"{named}: no Kafka broker answers: {'; '.join(reasons)}; start the "
                     "broker or correct the address")


def _connect_reason(err: OSError) -> str:
    if isinstance(err, TimeoutError | socket.timeout):
        return "no answer"
    if isinstance(err, socket.gaierror):
        return "unknown host"
    return err.strerror or type(err).__name__


def confluent() -> Any:
    """The ``confluent_kafka`` module, or one line saying how to install it."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 -- loads the submodule used below
    except ImportError:
        raise QueryError("a kafka:// output needs the confluent-kafka package: pip install "
                         "'graphcep[kafka]'") from None
    return confluent_kafka



#: The settings among ``--kafka-option kafka.KEY=VALUE`` that a graphcep Kafka client
#: (confluent-kafka: the sink's producer, the topic check) takes too: how to reach and
#: authenticate to the brokers. The consumer's other settings are Spark's alone.
SECURITY_KEYS = ("security.protocol", "ssl.", "sasl.")
_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"([^"]*)"')


def client_settings(options: dict[str, str]) -> dict[str, str]:
    """The security settings among the reader options of ``--kafka-option`` pairs
    (``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*``; the pairs parsed by
    :func:`~graphcep.runtime.streaming.kafka_source.kafka_options`), named as confluent-kafka
    (librdkafka) names them:
    the same names as Spark's Java client, but ``sasl.jaas.config``, whose ``username``
    and ``password`` become ``sasl.username`` and ``sasl.password``. A setting librdkafka
    does not have is one line (:func:`check_client_settings`).

    >>> client_settings({"kafka.security.protocol": "SASL_SSL", "failOnDataLoss": "false",
    ...     "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
    ...     'required username="u" password="p";', "kafka.isolation.level": "read_committed"})
    {'security.protocol': 'SASL_SSL', 'sasl.username': 'u', 'sasl.password': 'p'}
    """
    settings: dict[str, str] = {}
    for key, value in options.items():
        name = key.removeprefix("kafka.")
        if name == key or not name.startswith(SECURITY_KEYS):
            continue
        if name == "sasl.jaas.config":
            fields = dict(_JAAS_FIELD.findall(value))
            if set(fields) != {"username", "password"}:
                raise QueryError("--kafka-option kafka.sasl.jaas.config: a Kafka output or "
                                 "topic check reads username=\"...\" and password=\"...\" "
                                 "from it; give kafka.sasl.username and kafka.sasl.password "
                                 "instead")
            settings.update({"sasl.username": fields["username"],
                             "sasl.password": fields["password"]})
        else:
            settings[name] = value
    return settings


def check_client_settings(settings: dict[str, str]) -> None:
    """One line when confluent-kafka refuses the settings: one it does not have (a Java
    client's own, such as ``ssl.truststore.location``: give ``ssl.ca.location``, a PEM
    file, instead), or a value it cannot use."""
    if not settings:
        return
    kafka = confluent()
    try:
        kafka.Producer({**settings, "logger": _QUIET})
    except kafka.KafkaException as err:
        reason = kafka_reason(err)
        unknown = re.search(r'No such configuration property: "([^"]+)"', reason)
        if unknown:
            raise QueryError(f"--kafka-option kafka.{unknown.group(1)}: not a setting of "
                             "graphcep's Kafka client, librdkafka") from None
        raise QueryError(f"--kafka-option: graphcep's Kafka client, librdkafka, refuses "
                         f"the security settings ({reason})") from None


def check_topics(bootstrap: str, topics: list[str], settings: dict[str, str],
                 timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """One line, before Spark starts, when the brokers lack a topic of ``topics`` (Spark's
    source says so only once its query runs). Nothing is said here without
    confluent-kafka, with settings only Spark's Java client takes, or when the brokers do
    not answer the metadata request within ``timeout_s``: Spark's source then decides,
    as it would without the check."""
    try:
        kafka = confluent()
    except QueryError:
        return
    try:  # settings only Spark's Java client takes fail here
        admin = kafka.admin.AdminClient(client_config(settings, bootstrap_servers=bootstrap))
        have = admin.list_topics(timeout=timeout_s).topics
    except kafka.KafkaException:
        return
    missing = [topic for topic in topics if topic not in have]
    if missing:
        known = sorted(name for name in have if not name.startswith("_"))
        shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "") or "none"
        raise QueryError(f"--source kafka://{bootstrap}/{','.join(topics)}: the brokers have "
                         f"no topic {', '.join(missing)} (topics there: {shown})")


def earliest_offset(bootstrap: str, settings: dict[str, str], topic: str, partition: int,
                    timeout_s: float = CONNECT_TIMEOUT_S) -> int | None:
    """The earliest offset a partition holds now (None: confluent-kafka absent, or no
    answer within ``timeout_s``)."""
    found = _watermarks(bootstrap, settings, [(topic, partition)], timeout_s)
    return None if not found else found[(topic, partition)][0]


def end_offsets(bootstrap: str, settings: dict[str, str], partitions: list[tuple[str, int]],
                timeout_s: float = CONNECT_TIMEOUT_S, client: OffsetsClient | None = None
                ) -> dict[tuple[str, int], int] | None:
    """(topic, partition) -> the offset the next record written there will have, for
    those of ``partitions`` the brokers answer for within ``timeout_s`` (None:
    confluent-kafka absent). ``client``: one kept to ask again (else one for this ask)."""
    if client is not None:
        found = client.watermarks(partitions, timeout_s)
    else:
        found = _watermarks(bootstrap, settings, partitions, timeout_s)
    return None if found is None else {key: high for key, (_, high) in found.items()}


class OffsetsClient:
    """A consumer kept for asking partitions' offsets again and again (a Kafka source's
    lag, after every micro-batch): a client made for each ask connects and fetches the
    metadata anew, which costs a stream about 0.1 s a micro-batch (106 ms against 21 ms
    kept, for two partitions, measured on a loaded 2-core machine). Made on first use;
    :meth:`close` ends it."""

    def __init__(self, bootstrap: str, settings: dict[str, str]) -> None:
        self.bootstrap, self.settings = bootstrap, settings
        self._consumer: Any = None
        #: no client can be made here (no confluent-kafka, settings only Spark takes)
        self._unavailable = False

    def watermarks(self, partitions: list[tuple[str, int]], timeout_s: float
                   ) -> dict[tuple[str, int], tuple[int, int]] | None:
        """(topic, partition) -> (earliest, end) offsets, for those of ``partitions`` the
        brokers answer for within ``timeout_s``; None when no client can be made."""
        consumer = self._client()
        if consumer is None:
            return None
        kafka = confluent()
        found = {}
        for topic, partition in partitions:
            with contextlib.suppress(kafka.KafkaException):
                low, high = consumer.get_watermark_offsets(
                    kafka.TopicPartition(topic, partition), timeout=timeout_s, cached=False)
                found[(topic, partition)] = (int(low), int(high))
        return found

    def _client(self) -> Any:
        if self._consumer is not None or self._unavailable:
            return self._consumer
        self._unavailable = True  # until a client is made
        try:
            kafka = confluent()
        except QueryError:
            return None
        try:
            self._consumer = kafka.Consumer(client_config(
                self.settings, bootstrap_servers=self.bootstrap,
                group_id="graphcep-offsets", enable_auto_commit=False))
        except kafka.KafkaException:  # settings only Spark's Java client takes
            return None
        self._unavailable = False
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


#: what a broker answers for a partition without a leader yet (a topic just created, a
#: leader moving): asked again until it has one
_LEADERLESS = ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART")


def settled_watermarks(consumer: Any, partition: Any, timeout_s: float) -> tuple[int, int]:
    """A partition's (earliest, end) offsets from ``consumer``, asked again every 0.2 s
    while the broker says the partition has no leader yet (a topic created a moment
    before: its leader is elected after the creation returns), within ``timeout_s``;
    any other failure, or that one past the time, is raised (a ``KafkaException``)."""
    kafka = confluent()
    waits = {getattr(kafka.KafkaError, name) for name in _LEADERLESS}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                partition, timeout=max(0.1, deadline - time.monotonic()), cached=False)
            return int(low), int(high)
        except kafka.KafkaException as err:
            code = err.args[0].code() if err.args and hasattr(err.args[0], "code") else None
            if code not in waits or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _watermarks(bootstrap: str, settings: dict[str, str], partitions: list[tuple[str, int]],
                timeout_s: float) -> dict[tuple[str, int], tuple[int, int]] | None:
    client = OffsetsClient(bootstrap, settings)
    try:
        return client.watermarks(partitions, timeout_s)
    finally:
        client.close()


def client_config(given: dict[str, str] | None = None, **settings: Any) -> dict[str, Any]:
    """A client's settings (``given``: as librdkafka names them, the security ones), its
    log lines silenced (its failures raise, said in one line)."""
    return {**(given or {}), **{key.replace("_", "."): value for key, value in settings.items()},
            "logger": _QUIET}


class BrokerLost(OSError):
    """The brokers did not answer a micro-batch within the wait (``--broker-wait``): a
    Kafka output's transaction, or a Kafka source's reads. A fault of the system
    (``ETIMEDOUT``: the command line exits 1), not of the input; the batch was not
    committed, and a restart, the brokers back, runs it once."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ETIMEDOUT, message)

    def __str__(self) -> str:
        return self.strerror


def kafka_reason(err: BaseException) -> str:
    inner = err.args[0] if err.args else err
    text = inner.str() if hasattr(inner, "str") else str(inner)
    return " ".join(text.split())


__all__ = [
    "BROKER_WAIT_S",
    "CONNECT_TIMEOUT_S",
    "BrokerLost",
    "OffsetsClient",
    "SECURITY_KEYS",
    "check_client_settings",
    "check_topics",
    "client_config",
    "client_settings",
    "confluent",
    "earliest_offset",
    "end_offsets",
    "kafka_reason",
    "settled_watermarks",
]
