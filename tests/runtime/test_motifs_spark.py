"""Motif counts on Spark equal the in-process counts: each group counted by one task."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from graphcep.motifs import count_motifs
from graphcep.runtime.motifs_spark import subset
from tests.motifs_oracle import Oracle
from tests.paths import FIXTURES

pytestmark = pytest.mark.spark


def test_subset_takes_the_groups_rows():
    off = np.array([0, 2, 2, 5, 6])
    new_off, rows = subset(off, np.array([2, 0]))
    assert new_off.tolist() == [0, 3, 5]
    assert rows.tolist() == [2, 3, 4, 0, 1]


def test_spark_counts_equal_in_process_and_brute_force(spark):
    example = FIXTURES / "motifs" / "snap-example-temporal-graph.txt"
    rng = np.random.default_rng(5)  # ties, duplicates and self-loops
    events = [(str(rng.integers(6)), str(rng.integers(6)), int(rng.integers(10)))
              for _ in range(40)]
    tied = pa.table({"t": pa.array([t * 1_000_000 for *_, t in events], pa.int64()),
                     "src": [s for s, _, _ in events], "dst": [d for _, d, _ in events]})
    for edges, fmt, deltas in ((example, "snap", [10, 50, 300]), (tied, None, [0, 2, 9])):
        on_spark = count_motifs(edges, deltas, fmt=fmt, spark=spark)
        in_process = count_motifs(edges, deltas, fmt=fmt)
        np.testing.assert_array_equal(on_spark.tables, in_process.tables)
    oracle = Oracle(events)
    for i, delta in enumerate([0, 2, 9]):
        np.testing.assert_array_equal(on_spark.tables[i], oracle.table(delta))


def test_a_stream_too_small_for_any_motif_counts_zero_on_spark(spark):
    """No group that can hold an instance: no Spark task counts, and the tables are 0."""
    two = pa.table({"t": pa.array([1_000_000, 2_000_000], pa.int64()), "src": ["1", "1"],
                    "dst": ["2", "2"]})
    counted = count_motifs(two, [3, 5], spark=spark)
    assert counted.tables.shape == (2, 6, 6) and not counted.tables.any()
