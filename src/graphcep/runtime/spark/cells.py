"""HyperCube cells on Spark: the JVM routes each edge to the cells it must reach
(``pmod(xxhash64(v), s)``), each cell is replayed on a partition of its own and keeps its
home matches (:mod:`graphcep.runtime.hypercube`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from graphcep.jobs.base import ReplayJob, cell_query_or_none
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.patterns.subgraph import PREDICATE_COMPARISONS, EdgePredicate, QueryError
from graphcep.runtime.hypercube import Shares, choose_shares, free_offsets, home_filter
from graphcep.runtime.spark.tasks import (
    TaskPlan,
    partition_keys,
    received,
    replay_single,
    task_rows,
)


def check_cells(job: ReplayJob, shard_length_us: int | None) -> None:
    """Only SAL jobs without vertex features can be split into cells."""
    try:
        job.cell_query()
    except QueryError as err:
        raise ValueError(f"strategy 'cells' splits a query by its vertex variables and "
                         f"cannot run this one: {err}; use auto, single, partitions or "
                         "shuffle") from None
    if shard_length_us is not None:
        raise ValueError("strategy 'cells' does not cut time: give shards (the cell budget), "
                         "not shard_length_us")


def keyed_grid(spark, job: ReplayJob) -> Shares | None:
    """The grid "auto" may run ``job`` on: the SAL query's best grid of one cell per core
    (:func:`~graphcep.runtime.hypercube.choose_shares`) when it sends every edge to exactly
    one cell (:func:`one_cell_per_edge`, keyed partitioning of a star); else None."""
    query = cell_query_or_none(job)
    if query is None:
        return None
    grid = choose_shares(query, cell_budget(spark, None))
    return grid if grid.cells > 1 and one_cell_per_edge(job, grid) else None


def cell_budget(spark, shards: int | None) -> int:
    """How many cells :func:`~graphcep.runtime.hypercube.choose_shares` may use: ``shards``
    when given, else one per core."""
    return max(1, shards or spark.sparkContext.defaultParallelism)


def run_cells(spark, job: SubgraphJob, edges_df, n: int, shares: Shares,
              timings: Any = None, count: bool = False, lazy: bool = False) -> TaskPlan:
    """HyperCube: route every edge to the cells it must reach (in the JVM, see
    :func:`route_spark`), shuffle each cell onto a partition of its own, replay each cell's
    edges in stream order and keep its home matches
    (:func:`~graphcep.runtime.hypercube.home_filter`)."""
    from pyspark.sql import functions as F

    if shares.cells == 1:  # no split pays (e.g. the triangle on 2 or 4 cells): one engine
        plan = replay_single(spark, job, edges_df, n, timings, count, lazy)
        plan.extra.update({"strategy": "cells", "cells": 1})
        return plan
    keyed = one_cell_per_edge(job, shares)
    routed = route_spark(job, shares, edges_df)
    keys = F.array(*[F.lit(k).cast("long") for k in partition_keys(shares.cells)])
    placed = (routed.withColumn("_key", F.element_at(keys, (F.col("_cell") + 1).cast("int")))
              .repartition(shares.cells, "_key"))

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = received(batches, timings)
        if table is None:
            return
        cell_of = table.column("_cell")
        table = table.drop_columns(["_cell", "_key"])
        for cell in sorted(pc.unique(cell_of).to_pylist()):
            # with one cell per edge, a match found in a cell has it as home
            home = None if keyed else (lambda found, c=cell: home_filter(found, shares, c))
            yield from task_rows(job, table.filter(pc.equal(cell_of, cell)), None,
                                 count=count, timings=timings, keep=home)

    extra = {"strategy": "cells", "cells": shares.cells,
             "grid": "x".join(str(s) for s in shares.shares), "one_cell_per_edge": keyed}
    return TaskPlan(placed, run_partition, extra)


def route_spark(job: SubgraphJob, shares: Shares, edges_df):
    """``edges_df`` with one row per (edge, cell it must reach), the cell id in column
    ``_cell``: :func:`~graphcep.runtime.hypercube.route` computed by Spark SQL in the JVM
    (``pmod(xxhash64(v), s)`` is the module's vertex coordinate).

    Edges that can play no query edge are dropped. When every edge has one cell (keyed
    partitioning with the key at the same end of every query edge), the cell is a plain
    column: a projection and a filter, no arrays.
    """
    from pyspark.sql import functions as F

    routes = cell_routes(job, shares, edges_df)
    if len(routes) == 1 and len(routes[0][1]) == 1:
        eligible, (cell,) = routes[0]
        return edges_df.where(eligible).withColumn("_cell", cell)
    empty = F.array().cast("array<bigint>")
    arrays = [F.when(eligible, F.array(*cells)).otherwise(empty) for eligible, cells in routes]
    cells = arrays[0] if len(arrays) == 1 else F.array_distinct(F.concat(*arrays))
    return edges_df.withColumn("_cell", F.explode(cells))


def cell_routes(job: SubgraphJob, shares: Shares, edges_df) -> list:
    """``[(eligible, [cell, ...]), ...]``: Spark columns, one entry per distinct cell set
    among the query edges (query edges whose split variables sit at the same ends share
    one, their eligibility OR-ed), as :func:`~graphcep.runtime.hypercube.route` does:
    loops only for ``x -> x``, no loops between distinct variables under isomorphism, the
    edge predicates with the engine's rules (a string field compares with the value's
    text, a null never holds)."""
    from pyspark.sql import functions as F

    same = F.coalesce(F.col("src") == F.col("dst"), F.lit(False))
    sets: dict[tuple[tuple[int, str], ...], object] = {}
    for edge in job.query.edges:
        if edge.src == edge.dst:
            ok = same
        elif job.homomorphic:
            ok = F.lit(True)
        else:
            ok = ~same
        for pred in job.query.edge_predicates:
            if pred.edge == edge.name:
                ok = ok & predicate_column(edges_df, pred, job.field_aliases)
        fixed = _split_ends(job, shares, edge)
        sets[fixed] = (sets[fixed] | ok) if fixed in sets else ok
    routes = []
    for fixed, ok in sets.items():
        base = F.lit(0).cast("long")
        for i, column in fixed:
            coordinate = F.pmod(_spark_vertex_hash(column), F.lit(shares.shares[i]).cast("long"))
            base = base + coordinate * F.lit(int(shares.strides[i])).cast("long")
        free = free_offsets(shares, {i for i, _ in fixed})
        routes.append((F.coalesce(ok, F.lit(False)),
                       [base + F.lit(int(o)).cast("long") for o in free]))
    return routes


def _split_ends(job: SubgraphJob, shares: Shares, edge) -> tuple[tuple[int, str], ...]:
    """``(variable index, stream column)`` for the ends of a query edge whose variable is
    split (share > 1): what fixes the edge's cells."""
    src, dst = ("dst", "src") if job.swap_endpoints else ("src", "dst")
    ends = {edge.src: src} if edge.src == edge.dst else {edge.src: src, edge.dst: dst}
    index = {v: i for i, v in enumerate(shares.variables)}
    return tuple(sorted((index[v], c) for v, c in ends.items() if shares.share(v) > 1))


def one_cell_per_edge(job: SubgraphJob, shares: Shares) -> bool:
    """Whether every edge reaches at most one cell: every query edge has the grid's split
    variables at the same ends (keyed partitioning on a star's centre). Then a match found
    in a cell has all its edges there only, so that cell is its home."""
    fixed = {_split_ends(job, shares, edge) for edge in job.query.edges}
    split = {i for i, s in enumerate(shares.shares) if s > 1}
    return len(fixed) == 1 and {i for i, _ in next(iter(fixed))} == split


def _spark_vertex_hash(column: str):
    """Spark SQL's :func:`~graphcep.runtime.hypercube.vertex_hash`: XXH64 (seed 42) of the
    endpoint as a string, a null as the empty string."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.coalesce(F.col(column).cast("string"), F.lit("")))


def predicate_column(edges_df, pred: EdgePredicate, aliases: dict[str, str]):
    """``edge.field op value`` as a Spark column, by the engine's rule
    (:meth:`~graphcep.patterns.subgraph.EdgePredicate.operand`; a null never holds)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    text = {f.name: isinstance(f.dataType, StringType) for f in edges_df.schema.fields}
    name, value = pred.operand(text, aliases)
    return PREDICATE_COMPARISONS[pred.op][1](F.col(name), F.lit(value))
