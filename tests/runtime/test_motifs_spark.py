"""Motif counts on Spark equal the in-process counts: each group counted by one task.

Per-vertex counts too, for any split of the groups over tasks: against the brute-force
counter of :mod:`tests.motifs_oracle` and the vectors Raphtory's unit tests assert.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from graphcep.engines.motifs import count_stream, motif_stream
from graphcep.motifs import count_motifs
from graphcep.runtime.motifs_spark import (
    add_up,
    count_groups,
    count_motifs_spark,
    plan,
    subset,
    to_rows,
)
from tests.engines.test_motifs import RAPHTORY_LOCAL, RAPHTORY_WINDOWED, _events, _random_events
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


DELTAS = [0, 1, 3, 10]


def _union() -> tuple[list[list[tuple[str, str, int]]], list[dict[str, list[int]] | None]]:
    """Streams on disjoint vertices, one stream together: Raphtory's local test graph
    (vertex ids as they are), its windowed graph (ids + 1000) and random streams with
    ties, duplicates and self-loops (ids + 100 k). Integer ids keep each part's vertex
    order, hence its tie rule, as it is alone."""
    raphtory = _events("raphtory-local-motif-test.txt")
    windowed = [(str(int(s) + 1000), str(int(d) + 1000), t) for s, d, t in raphtory
                if 0 < t < 11]
    moved = {str(int(v) + 1000): counts for v, counts in RAPHTORY_WINDOWED.items()}
    rng = np.random.default_rng(11)
    parts = [raphtory, windowed]
    for k in range(1, 9):
        parts.append([(str(int(s) + 100 * k), str(int(d) + 100 * k), t)
                      for s, d, t in _random_events(rng)])
    return parts, [RAPHTORY_LOCAL, moved] + [None] * (len(parts) - 2)


def _expected(parts: list[list[tuple]], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The brute force's tables and per-vertex counts of the union, row per name."""
    tables = np.zeros((len(DELTAS), 6, 6), dtype=np.int64)
    local = np.zeros((len(names), len(DELTAS), 40), dtype=np.int64)
    row = {v: j for j, v in enumerate(names)}
    for events in parts:
        oracle = Oracle(events)
        for i, delta in enumerate(DELTAS):
            tables[i] += oracle.table(delta)
            for v, counts in oracle.local(delta).items():
                local[row[v], i] = counts
    return tables, local


def _stream(parts: list[list[tuple]]):
    events = [e for part in parts for e in part]
    return motif_stream(np.array([t for *_, t in events], dtype=np.int64),
                        pa.array([s for s, _, _ in events]), pa.array([d for _, d, _ in events]))


def test_tasks_per_vertex_counts_add_up_for_any_split():
    """Every split of the groups over tasks (what Spark's partitions do) adds up to the
    brute force's tables and per-vertex counts, without Spark."""
    parts, _ = _union()
    stream = _stream(parts)
    tables, local = _expected(parts, stream.names)
    state, units = plan(stream, np.array(DELTAS), local=True)
    kind, ids = units.column("kind").to_numpy(), units.column("id").to_numpy()
    rng = np.random.default_rng(3)
    for tasks in (1, 2, 3, 7, len(ids) + 2):  # the last: some tasks get no group
        task = rng.integers(tasks, size=len(ids))
        rows = [b for k in range(tasks) for b in to_rows(
            count_groups(state, kind[task == k], ids[task == k]), batch=2)]
        counted = add_up(pa.Table.from_batches(rows), len(DELTAS), stream.n)
        np.testing.assert_array_equal(counted.tables, tables)
        np.testing.assert_array_equal(counted.local, local)


def test_spark_per_vertex_counts_equal_in_process_brute_force_and_raphtory(spark):
    parts, raphtory = _union()
    stream = _stream(parts)
    tables, local = _expected(parts, stream.names)
    in_process = count_stream(stream, np.array(DELTAS), local=True)
    np.testing.assert_array_equal(in_process.local, local)
    for partitions in (1, 2, 3):
        counted = count_motifs_spark(spark, stream, np.array(DELTAS), partitions, local=True)
        np.testing.assert_array_equal(counted.tables, tables)
        np.testing.assert_array_equal(counted.tables, in_process.tables)
        np.testing.assert_array_equal(counted.local, local)
        np.testing.assert_array_equal(counted.local, in_process.local)
    at_10 = {v: counted.local[j, DELTAS.index(10)].tolist() for j, v in enumerate(stream.names)}
    for expected in raphtory[:2]:
        assert {v: at_10[v] for v in expected} == expected
