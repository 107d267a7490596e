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



@pytest.fixture(scope="session")
def spark():
    from graphcep.runtime.spark import spark_session

    session = spark_session("local[2]", app_name="graphcep-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def college_msg_path() -> Path:
    return FIXTURES / "CollegeMsg.txt.gz"
