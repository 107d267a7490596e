"""Shared fixtures: one SparkSession for the whole run (UI off, two shuffle partitions)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.paths import FIXTURES

# Timing is not what these tests check: a loaded CI machine must not fail them.
settings.register_profile(
    "graphcep",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("graphcep")

# The tests' JVMs -- the shared session's and those of the drivers the tests start as
# processes -- are short-lived, on a small shared machine: C1 only and the serial collector
# start them in about two thirds of the time and run the tests' small jobs no slower.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", '--driver-java-options '
                      '"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell')


def pytest_configure(config: pytest.Config) -> None:
    """``-n 2 --dist loadfile`` hands the files out in the order collected (xdist's default
    order, by number of tests, sends the few-test Spark files that take longest last, so
    that one worker runs them while the other has nothing left)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Heaviest files first, so the two workers end together on the light ones: a file
    weighs two per slow test and one per Spark test (in their file order otherwise)."""
    weight: dict[Path, int] = {}
    for item in items:
        spark = item.get_closest_marker("spark") or "spark" in getattr(item, "fixturenames", ())
        weight[item.path] = (weight.get(item.path, 0) + 2 * bool(item.get_closest_marker("slow"))
                             + bool(spark))
    items.sort(key=lambda item: -weight[item.path])


@pytest.fixture(autouse=True)
def split_small_streams(monkeypatch):
    """Let "auto" split the tests' small streams into shards, partitions and cells, as it
    splits streams of millions of edges (``MIN_SHARD_EDGES``): each strategy is tested
    on streams small enough for an oracle. Tests of the size rule itself restore it."""
    from graphcep.runtime.spark import replay

    monkeypatch.setattr(replay, "MIN_SHARD_EDGES", 0)


@pytest.fixture(scope="session")
def spark():
    from graphcep.runtime.spark import spark_session

    session = spark_session("local[2]", app_name="graphcep-tests", shuffle_partitions=2,
                            conf=kafka_connector_conf())
    yield session
    session.stop()


def kafka_connector_conf() -> dict[str, str]:
    """Spark's Kafka connector on the shared session's classpath when its jars have been
    fetched (cheap, and the session is started once), so that in-process streams can read
    Kafka; the Kafka tests skip, saying why, without them."""
    from graphcep.runtime.streaming.kafka_source import connector_conf, jars_for

    folder = jars_for(None)
    if folder is None:
        return {}  # not spark.jars.packages: the tests download nothing
    try:
        return connector_conf(folder)
    except ValueError:
        return {}


@pytest.fixture(scope="session")
def college_msg_path() -> Path:
    return FIXTURES / "CollegeMsg.txt.gz"
