"""The Kafka tests' broker: one per run, started on first use, stopped at the end."""

from __future__ import annotations

import pytest

from tests.kafka.broker import running_broker, why_no_kafka


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    reason = why_no_kafka()
    if reason is not None:
        pytest.skip(f"no Kafka broker: {reason}")
    yield from running_broker(tmp_path_factory.mktemp("kafka-broker"))
