"""Shared fixtures: one SparkSession for the whole run (UI off, two shuffle partitions)."""

from __future__ import annotations

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

    session = spark_session("local[2]", app_name="graphcep-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def college_msg_path() -> Path:
    return FIXTURES / "CollegeMsg.txt.gz"
