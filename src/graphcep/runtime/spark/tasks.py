"""What one replay runs, in the driver or in one Spark task, and how its shards are placed on partitions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from graphcep.hashing import spark_hash_long
from graphcep.jobs.base import ReplayJob
from graphcep.runtime.local import replay_job

# the "single" strategy replays streams up to this many edges in the driver
DRIVER_REPLAY_ROWS = 20_000_000


def spark_schema(job: ReplayJob):
    """The Spark type of the job's match rows, for ``mapInArrow``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(job.output.schema)


def received(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """The rows a ``mapInArrow`` task received, or None when there are none: an empty
    partition sends no batch at all, and ``pa.Table.from_batches`` needs at least one (or
    a schema). Every function that replays a partition starts with this."""
    batches = list(batches)
    if not batches:
        return None
    table = pa.Table.from_batches(batches)
    return table if table.num_rows else None


def replay_single(spark, job: ReplayJob, edges_df, n: int):
    """One engine replays everything.

    Up to ``DRIVER_REPLAY_ROWS`` edges the engine runs in the driver: Spark collects the
    partitions as Arrow in parallel and the driver's engine uses its cores. A single task
    would instead receive every row through one JVM-to-Python pipe (on the benchmark's 1M
    edges that pipe alone cost more than collecting and matching together). Larger
    streams run in one task, so the driver never has to hold them.
    """
    threads = max(1, min(spark.sparkContext.defaultParallelism, len(os.sched_getaffinity(0))))
    if n <= DRIVER_REPLAY_ROWS:
        table = edges_df.toArrow()
        matches = (replay_edges(job, table, None, threads=threads) if table.num_rows
                   else job.output.schema.empty_table())
        return matches, {"strategy": "single", "shards": 1, "where": "driver"}

    def run_all(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = received(batches)
        if table is not None:
            yield from replay_edges(job, table, None, threads=threads).to_batches()

    matches = edges_df.coalesce(1).mapInArrow(run_all, spark_schema(job)).toArrow()
    return matches, {"strategy": "single", "shards": 1, "where": "task"}


def ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def partition_keys(parts: int) -> list[int]:
    """One integer per partition that Spark's hash partitioning sends to that partition.

    Shard ``i`` is tagged with key ``i % parts`` of this list, so repartitioning by the tag
    spreads shards evenly instead of letting hash collisions stack them in one task.
    """
    found: dict[int, int] = {}
    candidate = 0
    while len(found) < parts:
        found.setdefault(spark_hash_long(candidate) % parts, candidate)
        candidate += 1
    return [found[p] for p in range(parts)]


def replay_shard(job: ReplayJob, table: pa.Table) -> pa.Table:
    """What one shuffled Spark task runs: warm up on the copied edges, report the shard's own
    matches."""
    owned_mask = table.column("_owned")
    edges = table.drop_columns(["_shard", "_owned"])
    return replay_edges(job, edges.filter(owned_mask), edges.filter(pc.invert(owned_mask)))


def replay_edges(job: ReplayJob, own: pa.Table, warm: pa.Table | None,
                  threads: int = 1) -> pa.Table:
    """Replay one shard; Spark runs one task per core, so one thread unless told otherwise."""
    return replay_job(job, own, warmup=warm, threads=threads)
