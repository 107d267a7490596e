"""Spark runtime: read edge files with Spark, replay shards of them in parallel tasks.

- :mod:`~graphcep.runtime.spark.session`: the SparkSession (embedded ``local[*]`` by
  default, Java checked, exact column names);
- :mod:`~graphcep.runtime.spark.reading`: :func:`read_edges_spark`, row for row what the
  local reader reads;
- :mod:`~graphcep.runtime.spark.replay`: :func:`run_spark`, exact replay by time shards
  (or edge rank, for count windows), its strategies and how "auto" picks one;
  :func:`plan_spark`, the same run planned, its matches a lazy DataFrame or batches the
  driver takes one task's at a time;
- :mod:`~graphcep.runtime.spark.cells`: HyperCube cells, routed in the JVM;
- :mod:`~graphcep.runtime.spark.tasks`: what one replay runs, in the driver or a task;
- :mod:`~graphcep.runtime.spark.widening`: :func:`run_widening_spark`, progressive window
  widening with the windows cut in the driver and detected in parallel tasks.

The names below are the runtime's public API, importable from this package.
"""

from graphcep.runtime.spark.cells import cell_routes, keyed_grid, one_cell_per_edge, route_spark
from graphcep.runtime.spark.reading import read_edges_spark
from graphcep.runtime.spark.replay import (
    CELL_SKEW,
    SparkRun,
    choose_strategy,
    plan_shards,
    plan_spark,
    run_spark,
)
from graphcep.runtime.spark.session import (
    JavaMissingError,
    check_column_names,
    check_java,
    spark_session,
)
from graphcep.runtime.spark.tasks import DRIVER_REPLAY_ROWS, partition_keys, replay_shard
from graphcep.runtime.spark.widening import run_widening_spark

__all__ = [
    "CELL_SKEW",
    "SparkRun",
    "DRIVER_REPLAY_ROWS",
    "JavaMissingError",
    "cell_routes",
    "check_column_names",
    "check_java",
    "choose_strategy",
    "keyed_grid",
    "one_cell_per_edge",
    "partition_keys",
    "plan_spark",
    "plan_shards",
    "read_edges_spark",
    "replay_shard",
    "route_spark",
    "run_spark",
    "run_widening_spark",
    "spark_session",
]
