"""A real Apache Kafka broker for the tests: one KRaft node on loopback ports.

The broker runs from the jars ``graphcep.runtime.streaming.kafka_jars`` fetches from Maven Central
(no Docker, no mock): its storage is formatted with ``kafka.tools.StorageTool`` and the
server is ``kafka.Kafka`` with a generated ``server.properties``, listening on free ports
of 127.0.0.1 only. Messages are produced with confluent-kafka (the ``test`` extra).
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from graphcep.runtime.streaming import kafka_jars

START_TIMEOUT_S = 90.0
JVM_FLAGS = ["-Xmx512m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true"]


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def why_no_kafka() -> str | None:
    """Why the broker tests cannot run here (None when they can): jars or client missing."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (pip install -e '.[test]')"
    if not any(kafka_jars.broker_dir().glob("kafka_*.jar")):
        return (f"no Kafka broker jars in {kafka_jars.broker_dir()} "
                f"(fetch them: python3 src/graphcep/runtime/streaming/kafka_jars.py)")
    if not any(kafka_jars.connector_dir().glob("spark-sql-kafka-0-10_*.jar")):
        return f"no Spark Kafka connector in {kafka_jars.connector_dir()}"
    return None


def _properties(data: Path, port: int, controller_port: int) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "2",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "2",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.flush.interval.messages": "1000000",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


@dataclass
class KafkaBroker:
    """A running single-node broker; :meth:`stop` ends it, :meth:`start_again` starts it
    again on the same ports and log directories (a broker that went down and came back)."""

    bootstrap: str
    process: subprocess.Popen
    log: Path
    #: the command line that starts the server (``java ... kafka.Kafka server.properties``)
    command: list[str]

    def create_topic(self, name: str, partitions: int = 2) -> None:
        """Create ``name`` and wait until its partitions have a leader."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
        futures[name].result(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=10).topics.get(name)
            if topic and topic.error is None and len(topic.partitions) == partitions and all(
                    p.leader >= 0 for p in topic.partitions.values()):
                return
            time.sleep(0.2)
        raise TimeoutError(f"topic {name} has no leader after 30 s")

    def produce(self, topic: str, messages: Iterable[tuple[int, bytes]],
                timestamps_ms: Iterable[int] | None = None) -> None:
        """Write ``(partition, value)`` messages, in order, and wait until all are acked."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                             "enable.idempotence": True})
        errors: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))

        times = iter(timestamps_ms) if timestamps_ms is not None else None
        newest: dict[int, int] = {}
        for partition, value in messages:
            extra = {}
            if times is not None:
                extra["timestamp"] = stamp = next(times)
                newest[partition] = max(stamp, newest.get(partition, stamp))
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered,
                             **extra)
            producer.poll(0)
        left = producer.flush(60)
        if left or errors:
            raise RuntimeError(f"{left} messages not delivered; errors: {errors[:3]}")
        if timestamps_ms is not None:
            self._wait_time_indexed(topic, newest)

    def _wait_time_indexed(self, topic: str, newest: dict[int, int]) -> None:
        """Wait until the broker finds each partition's newest timestamp by time (what a
        reader starting at a time asks), so a test starts on a settled broker."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "time-index"})
        try:
            deadline = time.monotonic() + 30
            while True:
                asked = [TopicPartition(topic, p, ts) for p, ts in newest.items()]
                found = consumer.offsets_for_times(asked, 10)
                if all(tp.offset >= 0 for tp in found):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the broker does not find {topic}'s timestamps: {found}")
                time.sleep(0.2)
        finally:
            consumer.close()

    def stop(self) -> None:
        """End the broker (SIGTERM, then SIGKILL after 20 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def kill(self) -> None:
        """End the broker at once (SIGKILL): a machine gone, no controlled shutdown."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def start_again(self) -> None:
        """Start the stopped broker again, with its storage as it left it, and wait until
        it answers."""
        assert self.process.poll() is not None, "the broker is still running"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_ready(self)
        except BaseException:
            self.stop()
            raise


def start_broker(workdir: Path) -> KafkaBroker:
    """Format a KRaft storage under ``workdir`` and start a broker on free loopback ports."""
    classpath = ":".join(str(jar) for jar in sorted(kafka_jars.broker_dir().glob("*.jar")))
    data = workdir / "data"
    port, controller_port = free_port(), free_port()
    props = workdir / "server.properties"
    props.write_text(_properties(data, port, controller_port))
    java = ["java", *JVM_FLAGS, "-cp", classpath]
    cluster_id = _cluster_id()
    subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                    "-c", str(props)], check=True, capture_output=True, timeout=120)
    log = workdir / "broker.log"
    command = [*java, "kafka.Kafka", str(props)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    broker = KafkaBroker(f"127.0.0.1:{port}", process, log, command)
    try:
        _wait_ready(broker)
    except BaseException:
        broker.stop()
        raise
    return broker


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding -- never one
    that begins with ``-``, which the storage tool would take for an option (Kafka's own
    ``Uuid.randomUuid`` draws again for the same reason)."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _wait_ready(broker: KafkaBroker) -> None:
    """Wait until the broker answers a metadata request with itself as a live broker."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + START_TIMEOUT_S
    host, port = broker.bootstrap.rsplit(":", 1)
    admin = None
    while time.monotonic() < deadline:
        if broker.process.poll() is not None:
            tail = broker.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Kafka broker exited: {tail}")
        try:
            if admin is None:  # the client once the port listens (it logs each refusal)
                socket.create_connection((host, int(port)), timeout=1).close()
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            if admin.list_topics(timeout=2).brokers:
                return
        except Exception:  # not up yet  # noqa: BLE001
            pass
        time.sleep(0.3)
    raise TimeoutError(f"the Kafka broker did not answer within {START_TIMEOUT_S:.0f} s")


def running_broker(workdir: Path) -> Iterator[KafkaBroker]:
    """Start a broker, yield it, stop it (the body of the session fixture)."""
    broker = start_broker(workdir)
    try:
        yield broker
    finally:
        broker.stop()
