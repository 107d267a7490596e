"""In-process and Spark runtimes return identical matches, for several shard sizes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from graphcep.io.generator import generate_netflow, write_edges
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.runtime.local import run_local

pytestmark = pytest.mark.spark

QUERIES = {
    "triangle": """{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e3) - starttime(e1) <= 10;
                     starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }""",
    "fan_in": """{ y e1 x; z e2 x; w e3 x; starttime(e1) < starttime(e2);
                   starttime(e2) <= starttime(e3); starttime(e3) - starttime(e1) <= 1; }""",
    "after_end": """{ a e1 b; a e2 c; starttime(e2) > endtime(e1);
                      starttime(e2) - endtime(e1) < 3; }""",
}


def keys(matches: pa.Table) -> set[tuple]:
    return {
        (mid, tuple(e["seq"] for e in edges))
        for mid, edges in zip(
            matches.column("match_id").to_pylist(), matches.column("edges").to_pylist(), strict=True
        )
    }


@pytest.fixture(scope="module")
def stream() -> pa.Table:
    table = generate_netflow(6_000, 60, 200, seed=4)
    rng = np.random.default_rng(4)
    durations = rng.integers(0, 3_000_000, table.num_rows)
    return table.set_column(3, "dur", pa.array(durations, pa.int64()))


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_spark_equals_local_for_several_shard_sizes(spark, stream, name):
    from graphcep.runtime.spark import run_spark

    job = SubgraphJob.create(parse_program(QUERIES[name]))
    expected, _ = run_local(job.query, stream)
    assert expected.num_rows > 0
    df = spark.createDataFrame(stream).cache()
    for shards in (1, 5) if name == "triangle" else (5,):
        matches, stats = run_spark(spark, job, df, shards=shards)
        assert stats.extra["strategy"] == "shuffle"
        assert keys(matches) == keys(expected), f"{shards} shards"
    # shards shorter than the extent are widened to it, never cut below it
    matches, stats = run_spark(spark, job, df, shard_length_us=1)
    assert keys(matches) == keys(expected)
    assert stats.extra["shard_length_us"] == stats.extra["extent_us"]
    # time-ordered partitions are replayed where they are, with a broadcast warm-up
    for parts in (2, 5) if name == "triangle" else (5,):
        ordered = spark.createDataFrame(stream).repartitionByRange(parts, "t", "seq").cache()
        matches, stats = run_spark(spark, job, ordered, strategy="partitions")
        assert stats.extra["strategy"] == "partitions"
        assert keys(matches) == keys(expected), f"{parts} ordered partitions"
    # chosen by itself when ordered partitions are at least one extent long (2 x 15 s)
    halves = spark.createDataFrame(stream).repartitionByRange(2, "t", "seq")
    matches, stats = run_spark(spark, job, halves)
    assert stats.extra["strategy"] == "partitions"
    assert keys(matches) == keys(expected)


def test_partition_strategy_needs_ordered_partitions(spark, stream):
    from graphcep.runtime.spark import run_spark

    job = SubgraphJob.create(parse_program(QUERIES["triangle"]))
    shuffled = spark.createDataFrame(stream).repartition(3, "src")
    expected, _ = run_local(job.query, stream)
    matches, stats = run_spark(spark, job, shuffled)
    assert stats.extra["strategy"] == "shuffle"
    assert keys(matches) == keys(expected)
    with pytest.raises(ValueError, match="increasing time order"):
        run_spark(spark, job, shuffled, strategy="partitions")


def test_spark_reads_files_like_the_local_reader(spark, stream, tmp_path):
    from graphcep.io.readers import read_edges
    from graphcep.runtime.spark import read_edges_spark, run_spark

    path = tmp_path / "flows.csv"
    write_edges(stream, path, "vast")
    with open(path, "a") as fh:
        fh.write("not,a,flow\n\n1.5,x\n")
    local = read_edges(path, "vast")
    edges_df, rejects_df, lines = read_edges_spark(spark, path, "vast")
    assert lines == local.lines_read
    spark_edges = edges_df.toArrow().sort_by("seq")
    assert spark_edges.column("seq").to_pylist() == local.edges.column("seq").to_pylist()
    assert spark_edges.column("t").to_pylist() == local.edges.column("t").to_pylist()
    rejected = sorted(rejects_df.select("line").toPandas()["line"].tolist())
    assert rejected == sorted(local.rejects.column("line").to_pylist())
    job = SubgraphJob.create(parse_program(QUERIES["triangle"]), fmt="vast")
    matches, _ = run_spark(spark, job, edges_df)
    expected, _ = run_local(job.query, local.edges)
    assert keys(matches) == keys(expected)


def test_shard_keys_land_on_their_own_partitions(spark):
    from pyspark.sql import functions as F

    from graphcep.hashing import spark_hash_long
    from graphcep.runtime.spark import partition_keys

    values = [0, 1, -1, 2**40, -(2**62), 123456789]
    df = spark.createDataFrame([(v,) for v in values], "v long")
    assert [r[0] for r in df.select(F.hash("v")).collect()] == [spark_hash_long(v) for v in values]
    for parts in (1, 2, 3, 8):
        keys = partition_keys(parts)
        placed = (
            spark.createDataFrame([(k,) for k in keys], "k long")
            .repartition(parts, "k")
            .select("k", F.spark_partition_id().alias("p"))
            .collect()
        )
        assert sorted((keys.index(r["k"]), r["p"]) for r in placed) == [(p, p) for p in range(parts)]


def test_short_streams_and_feature_queries_run_as_one_task(spark, stream):
    from graphcep.runtime.spark import run_spark

    job = SubgraphJob.create(parse_program(QUERIES["triangle"].replace("<= 10", "<= 20")))
    expected, _ = run_local(job.query, stream)
    matches, stats = run_spark(spark, job, spark.createDataFrame(stream))
    assert stats.extra["strategy"] == "single"  # 30 s of stream, a 20 s extent
    assert stats.extra["where"] == "driver"
    assert keys(matches) == keys(expected)


def test_single_strategy_runs_large_streams_in_one_task(spark, stream, monkeypatch):
    import graphcep.runtime.spark as spark_runtime
    import graphcep.runtime.spark.tasks as tasks

    monkeypatch.setattr(tasks, "DRIVER_REPLAY_ROWS", stream.num_rows - 1)
    job = SubgraphJob.create(parse_program(QUERIES["triangle"]))
    expected, _ = run_local(job.query, stream)
    matches, stats = spark_runtime.run_spark(spark, job, spark.createDataFrame(stream),
                                             strategy="single")
    assert stats.extra["where"] == "task"
    assert keys(matches) == keys(expected)
